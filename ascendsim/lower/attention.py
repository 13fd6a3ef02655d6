"""Lowering of fused attention (FlashAttentionScore, IncreFlashAttention): one mix kernel.

The generic cube/vector lowering cannot time it: its ops name this lowering in the registry
(`OpDef.lowering = "flash_attention"`). The backward kernel FlashAttentionScoreGrad is lowered
in lower/attention_grad.py, with this module's block search (`attention_blocks`).

Note on the fused-attention model
---------------------------------
Work split. The queries of one (batch, kv head) are cut into blocks of `sq` rows: in prefill
each query head's S rows separately (the G heads of a group re-read the same K/V, which then
hit in L2), in decode (S = 1) the G query heads of a kv head stacked as G rows, so K and V are
read once per kv head (GQA's saving, as IncreFlashAttention does). A tile is one query block;
its units are the key/value blocks of `tk` keys it sees (causal: only the blocks at or below
the diagonal, bottom-right aligned, averaged over the tiles). Tiles are spread evenly over
the AI Cores, except FlashAttentionScore's prefill on split chips, which follows CANN's
tiling (ops-transformer flash_attention_score tiling `SetMultiCoreParams` and the s1s2
kernel's `Process`): a tile is a query block of `S1_BASE` = 128 rows (several L0 blocks of
`sq` rows sharing each K/V block), the tiles go to min(tiles, AIV cores) AIVs in consecutive
runs of ceil(tiles / AIVs), and AIV 2k and 2k + 1 share AIC k's cube (`aic_tiles`): 8 query
blocks run on 4 AICs, two each, and 49 blocks leave one AIC with 4 while 11 sit idle. A
block's vector work stays on its own AIV: an AIC with one active AIV runs its tiles' V stage
at one AIV's rate (an AIC whose two AIVs have runs of unequal length is timed at their mean:
simplification). Its
bmm2 takes P from the GM workspace the AIVs wrote (a GM-typed Matmul operand): an MTE2 read
per key block, an L2 hit. A FusedInferAttentionScore call with S > 1 (`prompt` = 1, the
prompt flash attention kernel) keeps the even split over AICs: its measured calls (S0 = 256,
one head, S1 up to 8192) stay within a host cost that the pair split's kernel would exceed.

AIV workspace reads (split chips). The AIC's FIXPIPE writes the fp32 scores and the fp32
partial O to a GM workspace (an L2 hit) and the AIVs copy them back before their vector work.
In ops-transformer's FlashAttentionScore S1 kernel (flash_attention_score_s1_bn2gs1.h,
public copy yueliang13/cann-ops-adv-vllm at 015e205) a task is one query block with all of
S2 (the tiling's S1S2 template, S2 > 1024, cuts tasks of 128 x nRatio 8 = `TASK_KEYS` keys).
`ProcessVec1` copies each row group of the task's scores in (`GetBmm1Result`; 8192 / S2 rows,
`ComputeBmm1Tail`) and waits it out (an MTE2 -> V flag) before the scale `Muls`; the next
group's copy is released (a V -> MTE2 flag) right after that `Muls`, so it runs while the
current group's softmax does: the first row group of a task is exposed. `ProcessVec2` copies
the partial O in chunks of `FLASH_RESCALE_ROWS` rows (s1Vec2BaseSize, 64 at D = 128), each
waited out before its Div: the first chunk is counted exposed, the later ones as hidden (a
simplification: they overlap only the previous chunk's cast and copy-out). So a
FlashAttentionScore tile adds these exposed copies once per task (`aiv_exposed_reads`, the V
stage's head). The prompt flash attention kernel (prompt_flash_attention_s1s2_bns1_x910.h
`Bmm1ResDoVecBmm2Compute`) copies every key block's partial O into UB and waits it out
(MTE2 -> V) before adding it up: its V stage reads that block per unit. Both are timed on the
folded V pipe at the chip's GM -> UB path rate and latency. The S1S2 and B templates' vector
code was not read (the S1 kernel's rule is assumed there); IncreFlashAttention's workspace
reads are not timed.

AIV workspace traffic (split chips, S1 template). The rest of a task's AIV moves is not waited
out but crosses the L2 all the same (`aiv_workspace_moves`, the folded MTE3 stage, per unit, at
the tile's AIV pair's path rate): the later score row groups and partial-O chunks, the
softmax sum ProcessVec2 reads back, P written for bmm2 (keys 16-aligned) and the softmax max
and sum outputs ([B, N, S1, 8] fp32). With the FIXPIPE's scores and partial O and the AIC's
Q, K, V and P reads, a 128-query, 128-key task moves about 450 KB through the L2: at short
sequences and many heads the L2 bandwidth, not a pipe, paces the kernel. Longer keys (the
S1S2 template, over `TASK_KEYS`) keep the hidden moves untimed: that kernel's vector code was
not read.

K/V reuse (split chips). The tiling's task order is (b, n2, g, s1 block) and each AIV takes a
run of consecutive tasks (flash_attention_score_s1_bn2gs1.h `ComputeAxisIdx`, `Process`), so
a kv head's G query heads read the same K/V rows back to back: the re-reads hit the L2 even
when K and V do not fit it (`low.miss` with share G).

Matmul messages (split chips). bmm1 and bmm2 are Matmul-API objects the AIV drives: each
IterateAll<false> is a KFC message (one 64-byte cache line in the GM workspace) that the AIC's
matmul server receives (`RcvMessageImpl`: a DataCache invalidate, then scalar reads of the
line) and frees (its state written back, flushed); then the server sets the tensors and runs
the API's loop (CANN 8.1.RC1 highlevel_api impl/matmul/kfc, public copy leideng/CANN-8.1.RC1
at 4332a01). A tile's AIC scalar work is two such calls (`kfc_scalar_stage`): per message two
scalar GM round trips (`scalar_gm_miss_cycles`) and the API's issue cost
(`api_scalar_cycles`, one L1 chunk, K steps of a baseK that fills half of L0A), a stage of
the AIC's pipeline. bmm1.End() sends no message for an asynchronous IterateAll.

One unit is the flash-attention recurrence on one key block (online softmax):
  MTE2: K and V blocks GM -> L1 (the Q block once per tile, the mask block if there is one);
  MTE1: Q, P -> L0A and K, V -> L0B;
  M:    S = Q K^T (sq x D x tk) and O_part = P V (sq x tk x D), fp32 in L0C;
  FIX (split chips: the scores go to the paired AIV cores through an L2 workspace, never
       to HBM) or the L0C -> UB move on coupled chips;
  V:    the scores times the softmax scale (vmuls: CANN's kernels scale S on the vector
       side, not Q before the cube: `Muls(..., scaleValue, rows * s2)` in
       ProcessVec1 / ElewiseCompute of ops-transformer's flash_attention_score s1s2 and
       incre_flash_attention kernels), running max, subtract, exp, running sum (both row
       reductions as SoftmaxFlashV2 runs them, below), rescale of the O accumulator, cast
       of P to fp16, each step after the first
       waiting out the one before (`vector_dep_latency_cycles`, the kernels'
       PipeBarrier<PIPE_V>); on split chips the vector work is shared by the AIC's
       `aiv_cores / ai_cores` vector cores;
  MTE3: the normalised O block GM, once per tile.
The scores S and probabilities P live only in L0C/UB (and the L2 workspace on split chips):
the HBM traffic is Q, K, V (L2 misses), the mask and O. The stages form one pipeline; its pace
is the busiest pipe per unit (the software pipelining CANN's kernels do: QK^T of block j+1
overlaps the softmax of block j). On split chips the AIV half of this mix kernel is folded
into the AIC's chain (V and MTE3 stages at the aggregate rate of its AIVs): an approximation.

Row reductions (A2 / A3). The kernels' softmax is the Ascend C SoftmaxFlashV2 (ops-transformer
flash_attention_score_s1s2_bn2gs1.h `SoftMaxCompute`; CANN 8.1.RC1's v220 implementation,
public copy leideng/CANN-8.1.RC1 at 4332a01, highlevel_api impl/activation/softmax:
softmax_flashv2_block_reduce_impl.h, softmax_common_reduce.h `BigBlockReduceMax/Sum`,
membase/v220 softmax_common_nd_reduce.h). Its row max and row sum are built alike: a row of
at least 64 fp32 columns is folded to one repeat of 64 values by element-wise Max / Add, or,
from 512 columns, its first 8 repeats by one BlockReduce (vcgmax / vcgadd, 8 values a
repeat) and the rest element-wise into them; then two BlockReduce passes (64 -> 8 -> 1) end
it; a shorter row takes one WholeReduce (vcmax / vcadd). So neither runs the whole-reduce
instruction over the row (`flash_row_cycles`; the BlockReduce rate is the chip's
`block_reduce_fp32`, a chip without it keeps one whole-reduce pass). Rows of 1024 columns
take a special sequence (128 -> 16 -> pairwise Max / Add -> 8 -> 1), counted here by the
general rule.

Barriers (A2 / A3). Each dependent vector step waits out the one before it
(`vector_dep_latency_cycles`, the kernels' PipeBarrier<PIPE_V>). Counted in ops-transformer's
s1s2 FlashAttentionScore kernel (flash_attention_score_s1s2_bn2gs1.h `ProcessVec1`,
`SoftMaxCompute`, `ProcessVec2`; public copy yueliang13/cann-ops-adv-vllm at 015e205) and the
SoftmaxFlashV2 it calls (softmax_flashv2_basic_block_impl.h): the softmax runs on row groups
of 8192 fp32 scores (the 32 KB stage buffer: vec1S1BaseSize = 8 rows of 1024 keys, more rows
of fewer keys), each executing 15 barriers on a query block's first key block (isUpdate
false: 3 in the kernel around the scale Muls, the softmax call and the Cast of P, 12 in the
API) and 20 on every later one (17 in the API: the max and sum updates); the O accumulator's
rescale (`ProcessVec2`, from the second key block on) executes 2 per chunk of 64 rows (at D =
128). `flash_barriers` counts them per unit; a mask or antiquant step adds one each. The
same counts stand for FlashAttentionScore's S1 and B templates (S2 <= 1024: ops-transformer's
FA design note) and the IncreFlashAttention and FusedInferAttentionScore kernels, whose
vector blocks were not counted. Barriers are charged on every AIV at once, not shared out.

K and V rows from HBM (split chips). CANN's kernels bring a K or V block to L1 as one ND -> NZ
copy of one row per key (ops-transformer attention/common memory_copy.h
`CopySingleMatrixNDToNZ`: nValue = the block's keys, dValue = D, the source stride one row of
BNSD or N * D of BSND), so a block is that many GM bursts of D elements. The part of them that
misses the L2 is paced at the chip's per-core read-burst cycles (`gm_read_burst_cycles`, where
the chip gives it): a decode step's K/V, read once, pays it in full; prefill's re-reads of a
block by later query blocks hit the L2 and are not paced. The chip-wide read-burst rate
(`gm_read_bursts_per_cycle`, the AIV scatter writes' rate reused) is not applied to these
AIC moves: CANN-Bench's decode calls on the 910B2 read 256-byte rows at 2.0-2.2 a cycle over
24 AICs, twice that rate (an inference from measured rows, not a source).

Split KV (IncreFlashAttention, split chips). CANN's IFA tiling (ops-transformer
incre_flash_attention_tiling.cpp `IsFlashDecode`, `SplitBNS`) cuts each (batch, kv head)'s
keys over several vector cores when B x Hkv < 0.4 x the AIV cores (0.5 for its all-vector
template: fp16, one query head per kv head) and either one query head per kv head or a
context of at least 2048: `kvSplitPart` = AIV cores // (B x Hkv), lowered while a part would
hold fewer than 512 keys; the parts are tiles of their own (`kv_splits`), spread over the AI
Cores as decode tiles are (one part a core here, where IFA's C1:V2 template serves two vector
cores' parts from one AIC: a simplification). Their combine (partial outputs and log-sum-exps
through the GM workspace after a SyncAll) is not timed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..hw.names import ENGINE_AICORE, TASK_AI_CORE, TASK_MIX_AIC
from ..ir.graph import Node
from ..ir.ops.llm import attention_pairs
from ..ir.tensor import Value, itemsize
from .context import Lowering, TaskSpec
from .cube import cube_dtype
from .formats import ND, padded_bytes
from .movement import ensure
from .program import CoreGroup, Instr, Phase, Segment, Stage
from .tiling import (
    api_scalar_cycles,
    cdiv,
    ceil_to,
    gm_read,
    gm_write,
    local_move,
    scalar_stage,
    split_even,
    vec_instr,
)
from .vector_seq import REPEAT_BYTES, repeat_cycles

#: candidate key-block lengths (longest first) and the largest query block
_KV_BLOCKS = (512, 256, 128, 64, 32, 16)
_MAX_Q_BLOCK = 128
#: CANN FlashAttentionScore's query block on split chips (S: ops-transformer
#: flash_attention_score tiling, HIGH_PERF_BLOCK_SIZE = 128, the s1 basic block)
S1_BASE = 128
ACC = 4     # fp32 accumulator / softmax bytes
#: SoftmaxFlashV2's row reductions (module note, "Row reductions"): the BlockReduce passes
#: that end a row once it is folded to one repeat of 64 fp32 values (64 -> 8 -> 1), and the
#: row length from which its first 512 columns are block-reduced (8 repeats -> 64 values)
#: rather than folded element-wise
FLASH_ROW_BLOCK_PASSES = 2
FLASH_ROW_BIG_BLOCK = 512


def flash_row_cycles(chip, cols: int) -> float:
    """V cycles of one fp32 score row's max or sum as CANN's flash-attention kernels reduce it
    on an A2 / A3 (SoftmaxFlashV2; module note, "Row reductions"): under one repeat, one
    whole-reduce repeat; else the row's repeats folded to one, element-wise (vmax / vadd) or,
    from `FLASH_ROW_BIG_BLOCK` columns, its first 8 repeats by one BlockReduce (vcgmax /
    vcgadd) and the rest element-wise, then `FLASH_ROW_BLOCK_PASSES` one-repeat BlockReduces."""
    if cols * ACC < REPEAT_BYTES:
        return repeat_cycles(chip, "reduce", "float32")
    reps = cdiv(cols * ACC, REPEAT_BYTES)
    block = repeat_cycles(chip, "block_reduce", "float32")
    big = FLASH_ROW_BIG_BLOCK * ACC // REPEAT_BYTES if cols >= FLASH_ROW_BIG_BLOCK else 0
    folded = big * block + (reps - max(big, 1)) * repeat_cycles(chip, "binary", "float32")
    return folded + FLASH_ROW_BLOCK_PASSES * block


def row_reduce(chip, rows: float, cols: int, nbytes: float, kind: str) -> Instr:
    """The row max or row sum of `rows` fp32 score rows of `cols` keys on one vector core:
    SoftmaxFlashV2's fold and block reduces where the chip gives the BlockReduce rate, else
    one whole-reduce pass over the `nbytes` of scores."""
    if chip.vector_op_bytes_per_cycle.block_reduce_fp32 is None:
        return vec_instr(chip, "reduce", "float32", nbytes, kind)
    return Instr("V", kind, max(1, math.ceil(rows * flash_row_cycles(chip, cols) - 1e-9)))


#: the V stage's steps of one unit without a mask or an int8 cache (`vector` in
#: `lower_attention`); each further step (mask, antiquant) adds one barrier
FLASH_STEPS = ("vec_scale", "vec_rowmax", "vec_sub", "vec_exp", "vec_rowsum", "vec_cast",
               "vec_rescale")
#: the kernels' barriers (module note, "Barriers"): fp32 scores a softmax row group holds
#: (the 32 KB stage buffer: 8 rows of 1024 keys), PipeBarrier<PIPE_V> a row group executes on
#: a query block's first key block and on every later one, rows of the O accumulator one
#: rescale chunk holds (64 rows at D = 128) and its barriers
FLASH_GROUP_ELEMS = 8192
FLASH_GROUP_BARRIERS_FIRST, FLASH_GROUP_BARRIERS = 15, 20
FLASH_RESCALE_ROWS, FLASH_RESCALE_BARRIERS = 64, 2


def flash_barriers(rows: float, cols: int, blocks: int) -> float:
    """PipeBarrier<PIPE_V> one AIV executes on one (query block, key block) pair of `rows`
    score rows by `cols` keys, in a tile of `blocks` key blocks (module note, "Barriers"):
    per row group of the softmax, fewer on the tile's first key block, and per rescale chunk
    of the O accumulator on the later ones."""
    groups = max(1, math.ceil(rows * cols / FLASH_GROUP_ELEMS - 1e-9))
    later = (blocks - 1) / blocks
    per_group = FLASH_GROUP_BARRIERS - (FLASH_GROUP_BARRIERS - FLASH_GROUP_BARRIERS_FIRST) / blocks
    chunks = max(1, math.ceil(rows / FLASH_RESCALE_ROWS - 1e-9))
    return groups * per_group + later * chunks * FLASH_RESCALE_BARRIERS


#: simulation granularity: at most this many units per tile, a unit then standing for several
#: consecutive key blocks (their moves and instructions summed; buffers stay one block's size)
MAX_UNITS = 4


def visible_blocks(s: int, t: int, sq: int, tk: int, causal: bool, rows_are_heads: bool
                    ) -> list[int]:
    """Key blocks each query block computes (causal: bottom-right aligned diagonal)."""
    nkv = cdiv(t, tk)
    if not causal or rows_are_heads:
        return [nkv] * cdiv(s if not rows_are_heads else 1, sq)
    out = []
    for j in range(cdiv(s, sq)):
        last_query = min(s, (j + 1) * sq) - 1
        last_key = min(t - 1, last_query + t - s)
        out.append(max(1, cdiv(last_key + 1, tk)))
    return out


def attention_blocks(chip, rows: int, d: int, in_b: int, m0: int, vec_share: int
                     ) -> tuple[int, int]:
    """(sq, tk): the largest query and key blocks whose double-buffered working set fits
    L0A/L0B/L0C/L1 and the UB of one vector core."""
    sq = min(_MAX_Q_BLOCK, ceil_to(rows, m0))
    while True:
        for tk in _KV_BLOCKS:
            l0c = 2 * sq * (tk + d) * ACC
            l0a = 2 * sq * max(d, tk) * in_b
            l0b = 2 * tk * d * in_b
            l1 = 2 * (2 * tk * d * in_b) + sq * d * in_b + sq * tk * in_b
            ub = (2 * sq * tk * (ACC + in_b) + 2 * sq * d * ACC) / vec_share
            if (l0c <= chip.l0c_bytes and l0a <= chip.l0a_bytes and l0b <= chip.l0b_bytes
                    and l1 <= chip.l1_bytes and ub <= chip.ub_bytes):
                return sq, tk
        if sq <= m0:
            return sq, _KV_BLOCKS[-1]
        sq //= 2


@dataclass(frozen=True)
class AttentionDims:
    """What both fused-attention lowerings (forward, backward) read off the node: q (B, H, S,
    D), k (B, Hkv, T, D), the mask, the cube mode and the AIC/AIV split."""

    ins: list[str]
    mask: Value | None
    b: int
    h: int
    s: int
    d: int
    hkv: int
    t: int
    causal: bool
    cdt: str               # the cube mode: bf16 on chips with a bf16 cube, else fp16
    m0: int
    k0: int
    n0: int
    in_b: int
    split: bool            # split chips: the AIV cores of an AIC run the vector stages
    vec_share: int         # AIV cores per AIC

    @property
    def q(self) -> tuple[int, int, int, int]:
        return self.b, self.h, self.s, self.d


def attention_dims(low: Lowering, node: Node, mask_at: int) -> AttentionDims:
    """The node's inputs as ND and its `AttentionDims`; `mask_at`: the mask's input index."""
    chip = low.chip
    mask_name = node.inputs[mask_at] if len(node.inputs) > mask_at else ""
    ins = [ensure(low, i, ND) for i in node.inputs if i]
    q, k = low.value(ins[0]), low.value(ins[1])
    b, h, s, d = (int(x) for x in q.shape)
    cdt = "bfloat16" if cube_dtype(chip, q.dtype, node.op_type, node.name) == "bfloat16" \
        else "float16"
    split = not chip.coupled
    return AttentionDims(ins, low.value(mask_name) if mask_name else None,
                         b, h, s, d, int(k.shape[1]), int(k.shape[2]),
                         bool(node.attrs.get("causal", 0)), cdt, *chip.cube_shape(cdt),
                         itemsize(q.dtype), split,
                         max(1, chip.aiv_cores // chip.ai_cores) if split else 1)


def aic_tiles(chip, tiles: int) -> list[tuple[int, int]]:
    """(tiles, active AIVs) per AIC as CANN's FlashAttentionScore tiling spreads query blocks
    on a split chip: over min(tiles, AIV cores) AIVs in consecutive runs of
    ceil(tiles / AIVs) (`SetMultiCoreParams`: splitFactorSize), AIV 2k and 2k + 1 sharing AIC
    k's cube (block dim = ceil(AIVs / 2)); each block's vector work stays on its own AIV.
    Eight blocks on a 48-AIV chip land on 4 AICs, two each; one block on one AIV."""
    ratio = max(1, chip.aiv_cores // chip.ai_cores)
    used = min(tiles, chip.aiv_cores)
    run = cdiv(tiles, used)
    per_aiv = [min(run, tiles - i * run) for i in range(cdiv(tiles, run))]
    return [(sum(per_aiv[k:k + ratio]), len(per_aiv[k:k + ratio]))
            for k in range(0, len(per_aiv), ratio)]


def runs(counts: list) -> list[tuple]:
    """[(entry, how many consecutive cores have it)] of a per-core list."""
    out: list[tuple] = []
    for n in counts:
        if out and out[-1][0] == n:
            out[-1] = (n, out[-1][1] + 1)
        else:
            out.append((n, 1))
    return out


def keys_read(per_head: list[int], t: int, tk: int) -> tuple[int, float]:
    """Keys the query blocks read in all, and their share of the whole key blocks: the last
    key block ends at T, and its DMA reads only the keys that exist (T = 4097 in a decode step
    over a 4096-token cache reads 4097 rows, not 33 blocks of 128)."""
    keys = sum(min(t, nb * tk) for nb in per_head)
    return keys, keys / (sum(per_head) * tk)


#: IFA's split-KV rule (ops-transformer incre_flash_attention_tiling.cpp, module note): the
#: share of the AIV cores below which (batch x kv heads) is split, per template; a part's keys
#: at least; the context from which a grouped-query call splits
SPLIT_KV_SHARE, SPLIT_KV_SHARE_ALL_VECTOR = 0.4, 0.5
SPLIT_KV_MIN_KEYS = 512
SPLIT_KV_GQA_CONTEXT = 2048


def kv_splits(chip, op_type: str, pairs: int, group: int, t: int, fp16: bool, d: int) -> int:
    """Parts each (batch, kv head)'s keys are cut into by IncreFlashAttention's split-KV
    tiling on a split chip (module note, Split KV); 1 otherwise."""
    if op_type != "IncreFlashAttention" or chip.coupled or not chip.aiv_cores:
        return 1
    all_vector = fp16 and group == 1 and d <= 512
    share = SPLIT_KV_SHARE_ALL_VECTOR if all_vector else SPLIT_KV_SHARE
    if pairs >= share * chip.aiv_cores or (group > 1 and t < SPLIT_KV_GQA_CONTEXT):
        return 1
    parts = chip.aiv_cores // pairs
    while parts > 1 and t / parts < SPLIT_KV_MIN_KEYS:
        parts -= 1
    return max(1, parts)


#: keys of one FlashAttentionScore task on split chips (ops-transformer flash_attention_score
#: tiling: the S1 template's bmm1 takes all of S2 <= 1024 at once, the S1S2 template's task
#: is s2BaseSize 128 x nRatio 8 keys)
TASK_KEYS = 1024


def aiv_exposed_reads(chip, rows: int, keys: int, d: int, share: int) -> tuple[Instr, ...]:
    """The exposed GM workspace reads of one FlashAttentionScore tile of `rows` query rows
    over `keys` visible keys on a split chip (module note, "AIV workspace reads"), per task
    of up to `TASK_KEYS` keys: the first row group of its fp32 scores and the first chunk of
    its fp32 partial O, which the AIV's vector work waits out; `share`: the AIVs of the AIC,
    each running its own tiles (the folded V stage's time is the pair's)."""
    tasks = max(1, cdiv(keys, TASK_KEYS))
    task_keys = min(keys, TASK_KEYS)
    first_s = min(rows, max(1, FLASH_GROUP_ELEMS // task_keys))
    first_o = min(rows, FLASH_RESCALE_ROWS)
    nbytes = round(tasks * (first_s * task_keys + first_o * d) * ACC / share)
    return (gm_read(chip, "V", "UB", nbytes, 0.0, kind="copy_scores"),)


#: fp32 values per query row of FlashAttentionScore's softmax max and sum outputs (and the
#: sum the S1 kernel's ProcessVec2 reads back): [B, N, S1, 8]
SOFTMAX_STAT_VALUES = 8


def aiv_workspace_moves(chip, rows: int, keys: int, d: int, in_b: int, share: int,
                        units: int) -> tuple[Instr, ...]:
    """The AIV's GM traffic of one FlashAttentionScore tile on a split chip that its vector
    work does not wait out (module note, "AIV workspace traffic"): the rest of the fp32 scores
    and partial O after the exposed first row group and chunk (`aiv_exposed_reads`), the
    softmax sum read back, the probabilities P written for bmm2 (keys 16-aligned, the S1
    kernel's s2RealSizeAlign16) and the softmax max and sum written out. Each move keeps its
    full bytes (they load the L2) at `share` times one AIV's path rate (the tile's AIV runs
    beside the AIC's other AIV); per simulated unit (`units` a tile)."""
    first_s = min(rows, max(1, FLASH_GROUP_ELEMS // min(keys, TASK_KEYS))) * keys
    first_o = min(rows, FLASH_RESCALE_ROWS) * d
    stat = rows * SOFTMAX_STAT_VALUES * ACC
    reads = ((rows * keys - first_s + rows * d - first_o) * ACC + stat) // units
    writes = (rows * ceil_to(keys, 16) * in_b + 2 * stat) // units
    moves = (gm_read(chip, "MTE3", "UB", reads, 0.0, kind="copy_workspace"),
             gm_write(chip, "MTE3", "UB", writes, 0.0))
    return tuple(replace(m, bw=m.bw * share) for m in moves if m.nbytes)


def kfc_scalar_stage(chip, rows: int, keys: int, d: int, in_b: int, units: int = 1) -> Stage:
    """The AIC scalar work of one FlashAttentionScore tile on a split chip: bmm1 and bmm2 are
    each one Matmul-API IterateAll request of the tile's AIV, a KFC message the AIC's matmul
    server receives (a DataCache invalidate and read of the message's cache line) and frees
    (its state written back and flushed), each a scalar GM round trip
    (`scalar_gm_miss_cycles`), then issues as the API does (`api_scalar_cycles`: one L1
    chunk, K steps of a baseK that fills half of L0A); per task of up to `TASK_KEYS` keys
    (module note, "Matmul messages"), issued as the tile's `units` run."""
    base_k = max(16, chip.l0a_bytes // (2 * rows * in_b) // 16 * 16)
    msg = 2 * (chip.scalar_gm_miss_cycles or 0)
    tasks = max(1, cdiv(keys, TASK_KEYS))
    cycles = tasks * sum(msg + api_scalar_cycles(chip, 1, cdiv(k, base_k))
                         for k in (d, min(keys, TASK_KEYS)))
    return Stage("S", (Instr("S", "scalar", math.ceil(cycles / units)),), units=units)


def lower_attention(low: Lowering, node: Node) -> None:
    """One task for FlashAttentionScore / IncreFlashAttention (see the module note). Over 60
    lines: the kernel's stages are built in one pass, each line one move or instruction of
    the recurrence the module note lists, which reads best unbroken."""
    chip = low.chip
    dims = attention_dims(low, node, 3)
    ins, mask, cdt, in_b = dims.ins, dims.mask, dims.cdt, dims.in_b
    b, h, s, d, hkv, t, causal = dims.b, dims.h, dims.s, dims.d, dims.hkv, dims.t, dims.causal
    m0, k0, n0, split, vec_share = dims.m0, dims.k0, dims.n0, dims.split, dims.vec_share
    q = low.value(ins[0])
    group = h // hkv
    stacked = s == 1                         # decode: the G heads of a kv head are the rows
    rows = group if stacked else s
    sq, tk = attention_blocks(chip, rows, d, in_b, m0, vec_share)
    parts = kv_splits(chip, node.op_type, b * hkv, group, t, q.dtype == "float16", d) \
        if stacked else 1
    t_part = cdiv(t, parts)                  # keys of one tile (its split-KV part)
    per_head = visible_blocks(rows if stacked else s, t_part, sq, tk, causal, stacked)
    # split chips, prefill: a tile is CANN's query block of S1_BASE rows, `sub` L0 blocks
    prompt = not stacked and bool(int(node.attrs.get("prompt", 0)))
    cann_split = split and not stacked and not prompt
    sub = max(1, min(S1_BASE, ceil_to(s, sq)) // sq) if cann_split else 1
    per_tile = [sum(per_head[j:j + sub]) for j in range(0, len(per_head), sub)]
    keys, fill = keys_read([max(per_head[j:j + sub]) for j in range(0, len(per_head), sub)],
                           t_part, tk)
    keys_tile = round(keys / len(per_tile))     # visible keys of a tile (mean)
    heads_per_tile = hkv * parts if stacked else h
    tiles = b * heads_per_tile * len(per_tile)
    blocks_per_tile = max(1, round(sum(per_tile) / len(per_tile)))
    units = min(blocks_per_tile, MAX_UNITS)
    per_unit = blocks_per_tile / units          # (query, key) blocks a simulated unit stands for
    kv_unit = per_unit / sub                    # key blocks it loads (shared by the sub-blocks)
    per_core = aic_tiles(chip, tiles) if cann_split else [
        (n, vec_share) for n, c in split_even(tiles, min(chip.ai_cores, tiles))
        for _ in range(c)]
    block = len(per_core)
    # an int8 cache (IFA's antiquant): K/V cross GM at one byte, dequantised on V per block
    kv_b = itemsize(low.value(ins[1]).dtype)
    # L2: K/V are read once per query block (per head in prefill); the first read misses
    kv_reads = b * heads_per_tile * keys * d * kv_b * 2
    # CANN's split prefill runs a kv head's G query heads back to back on one AIV (module
    # note, "K/V reuse"): each K/V block is re-read G times while it is in L2, whatever the
    # tensor's size
    reuse = group if cann_split else 1
    miss_k, miss_v = (low.miss(ins[i], kv_reads / 2, share=reuse) for i in (1, 2))
    miss_kv = max(float(miss_k), float(miss_v))
    miss_q = low.miss(ins[0], padded_bytes(q, ND))
    through = low.through([node.outputs[0]], [ND])
    # ---- one unit (a key block) and the per-tile head/tail
    kv_blk = tk * d * in_b
    kv_gm = tk * d * kv_b
    # one burst per key row; the L2 misses among them paced per burst (module note)
    key_rows = tk * kv_unit * fill
    per_burst = (chip.gm_read_burst_cycles or 0.0) if split else 0.0
    mte2 = tuple(gm_read(chip, "MTE2", "L1", round(kv_gm * kv_unit * fill), miss,
                         bursts=round(key_rows * float(miss)), per_burst=per_burst)
                 for miss in (miss_k, miss_v))
    if cann_split:   # bmm2's left operand P comes back from the AIVs' GM workspace (L2 hit)
        mte2 += (gm_read(chip, "MTE2", "L1", round(sq * tk * in_b * per_unit), 0.0,
                         kind="copy_p"),)
    head = (gm_read(chip, "MTE2", "L1", sq * sub * d * in_b, miss_q, kind="copy_q"),)
    if mask is not None:
        mte2 += (gm_read(chip, "MTE2", "L1", round(sq * tk * itemsize(mask.dtype) * per_unit),
                         low.miss(ins[3], padded_bytes(mask, ND)), kind="copy_mask"),)
    mte1 = tuple(local_move(chip, "MTE1", "L1", dst, round(nbytes * per_unit))
                 for dst, nbytes in (("L0A", sq * d * in_b), ("L0B", kv_blk),
                                     ("L0A", sq * tk * in_b), ("L0B", kv_blk)))
    over = chip.cube_mmad_overhead_cycles
    qk = cdiv(sq, m0) * cdiv(d, k0) * cdiv(tk, n0) + over
    pv = cdiv(sq, m0) * cdiv(tk, k0) * cdiv(d, n0) + over
    mm = (Instr("M", "mmad", math.ceil(qk * per_unit)),
          Instr("M", "mmad", math.ceil(pv * per_unit)))
    def vector(share: int) -> tuple[Instr, ...]:
        """The V stage's instructions per unit when `share` AIVs do the AIC's vector work."""
        score_b = sq * tk * ACC / share * per_unit      # per vector core
        acc_b = sq * d * ACC / share * per_unit
        out = (vec_instr(chip, "unary", "float32", score_b, "vec_scale"),
               row_reduce(chip, sq / share * per_unit, tk, score_b, "vec_rowmax"),
               vec_instr(chip, "binary", "float32", score_b, "vec_sub"),
               vec_instr(chip, "exp", "float32", score_b, "vec_exp"),
               row_reduce(chip, sq / share * per_unit, tk, score_b, "vec_rowsum"),
               vec_instr(chip, "unary", "float32", score_b, "vec_cast"),
               vec_instr(chip, "binary", "float32", 2 * acc_b, "vec_rescale"))
        if mask is not None:
            out += (vec_instr(chip, "binary", "float32", score_b, "vec_mask"),)
        if kv_b < in_b:     # the antiquant of the block's keys and values: vconv, vadd, vmul
            kv_elems_b = 2 * tk * d * in_b / share * per_unit
            out += (vec_instr(chip, "unary", q.dtype, kv_elems_b, "vec_antiquant_cast"),
                    vec_instr(chip, "binary", q.dtype, kv_elems_b, "vec_antiquant_offset"),
                    vec_instr(chip, "binary", q.dtype, kv_elems_b, "vec_antiquant_scale"))
        # the kernels' PipeBarrier<PIPE_V> per unit on each AIV (module note, "Barriers")
        barriers = flash_barriers(sq / share, tk, blocks_per_tile) + len(out) - len(FLASH_STEPS)
        dep = (chip.vector_dep_latency_cycles or 0.0) * barriers * per_unit
        return out + ((Instr("V", "vec_dep_wait", math.ceil(dep)),) if dep else ())

    stages = [Stage("MTE2", mte2, units=units, head=head,
                    out_bufs=(("L1", 2 * kv_blk + sq * tk * in_b),)),
              Stage("MTE1", mte1, units=units,
                    out_bufs=(("L0A", sq * max(d, tk) * in_b), ("L0B", kv_blk))),
              Stage("M", mm, units=units, out_bufs=(("L0C", sq * (tk + d) * ACC),))]
    if split:
        # scores and the partial O to the AIVs through the L2 workspace (hbm fraction 0)
        stages.append(Stage("FIX", (gm_write(chip, "FIX", "L0C",
                                             round(sq * (tk + d) * ACC * per_unit), 0.0),),
                            units=units))
        vmove: tuple[Instr, ...] = ()
    else:
        vmove = (local_move(chip, "V", "L0C", "UB", round(sq * (tk + d) * ACC * per_unit)),)
    chains: dict[int, tuple[Stage, ...]] = {}
    for share in sorted({a for _, a in per_core}):
        vec = vector(share)
        exposed = aiv_exposed_reads(chip, sq * sub, keys_tile, d, share) if cann_split else ()
        if split and prompt:    # PFA waits out each key block's partial O read from GM
            vmove = (gm_read(chip, "V", "UB", round(sq * d * ACC * per_unit / share), 0.0,
                             kind="copy_o_part"),)
        tail = (Stage("V", vmove + vec, units=units, head=exposed,
                      out_bufs=(("UB", math.ceil(sq * d * in_b / share)),)),
                Stage("MTE3", aiv_workspace_moves(chip, sq * sub, keys_tile, d, in_b, share,
                                                  units),
                      units=units,
                      head=(gm_write(chip, "MTE3", "UB", sq * sub * d * in_b, through),))
                if cann_split and keys_tile <= TASK_KEYS else
                Stage("MTE3", (gm_write(chip, "MTE3", "UB", sq * sub * d * in_b, through),)))
        n_instr = units * (len(mte2) + len(mte1) + len(mm) + len(vec) + 1) + 2
        scalar = kfc_scalar_stage(chip, sq * sub, keys_tile, d, in_b, units) if cann_split \
            and chip.cube_tile_scalar_cycles_per_instr else scalar_stage(chip, n_instr)
        chains[share] = (scalar,) + tuple(stages) + tail
    groups, core = [], 0
    for (count, share), ncores in runs(per_core):
        groups.append(CoreGroup(tuple(range(core, core + ncores)),
                                (Segment(chains[share], count),)))
        core += ncores
    flops = attention_pairs((b, h, s, d), (b, hkv, t, d), causal) * (4 * d + 5)
    layout = "the group's heads stacked" if stacked else "per head"
    paced = (f"; the missing key rows paced at {per_burst:g} cycles a burst"
             if per_burst and miss_kv else "")
    if parts > 1:
        notes_split = [f"split KV (IFA flash decode): each of the {b * hkv} (batch, kv head) "
                       f"pairs' {t} keys cut into {parts} parts of up to {t_part}, a tile "
                       f"each; the parts' combine (after a SyncAll) not timed"]
    else:
        notes_split = []
    notes = [f"fused attention: B {b}, heads {h} (kv heads {hkv}, group {group}), S {s}, "
             f"T {t}, D {d}{', causal' if causal else ''}"
             f"{', additive mask' if mask is not None else ''}",
             f"attention tiling: query block {sq * sub} rows ({layout}, L0 blocks of {sq}), "
             f"key block {tk}; {tiles} tiles x ~{blocks_per_tile} blocks over block dim "
             f"{block} (simulated as {units} unit(s) of {per_unit:.3g} block(s))",
             f"scores and probabilities stay in L0C/UB"
             f"{' and the L2 workspace (AIC -> AIV)' if split else ''}, never in HBM; "
             f"K/V L2 miss {miss_kv:.2f}{paced}",
             "online softmax per key block: vmuls (scale), vcmax, vsub, vexp, vcadd, cast, "
             "O rescale"]
    notes += notes_split
    if kv_b < in_b:
        notes.append(f"int8 KV cache: keys and values read at {kv_b} B/element and "
                     f"dequantised per key block on V ((x + offset) * scale, IFA antiquant); "
                     f"the dequantised block's way back to the cube is not modelled")
    if split:
        notes.append(f"mix kernel: the vector stages stand for the AIC's {vec_share} AIV "
                     f"core(s), folded into its pipeline")
    if cann_split:
        notes.append(f"work split as CANN's FlashAttentionScore tiling: {tiles} query blocks "
                     f"over min(blocks, {chip.aiv_cores}) AIV cores in runs of "
                     f"ceil(blocks / AIVs), each AIC serving two AIVs: tiles per AIC "
                     f"{max(per_core)[0]} (busiest) to {min(per_core)[0]}, the vector work "
                     f"of a block on its own AIV; P goes back to the "
                     f"AIC through the GM workspace (bmm2 reads it from GM)")
    low.add_task(TaskSpec(node.name, node.op_type, TASK_MIX_AIC if split else TASK_AI_CORE,
                          [Phase(ENGINE_AICORE, tuple(groups))], ins, list(node.outputs),
                          [low.format_of(i) for i in ins], [ND] * len(node.outputs), flops,
                          notes, cube_dtype=cdt))


#: this module's rows of the dispatcher's table (lower/lowering.py)
LOWERINGS = {"flash_attention": lower_attention}

__all__ = ["ACC", "MAX_UNITS", "S1_BASE", "SPLIT_KV_GQA_CONTEXT", "SPLIT_KV_MIN_KEYS",
           "SPLIT_KV_SHARE", "SPLIT_KV_SHARE_ALL_VECTOR", "AttentionDims", "aic_tiles",
           "kv_splits", "runs", "attention_dims", "attention_blocks", "visible_blocks",
           "keys_read", "lower_attention", "LOWERINGS"]

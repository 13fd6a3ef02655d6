"""BNTrainingUpdateGrad's static TBE schedule where it binds whole C1 slices to blocks.

Note on the model
-----------------
On chips whose vector kernels are TBE DSL kernels, CANN's BNTrainingUpdateGrad reads x and
grads as NC1HWC0 and runs its own schedule (te_schedule/bn_update_grad_shedule.py,
`bn_update_grad_schedule_nd`, public canndev copy dengguojie/vue-element-admin). With C1 >=
CORE_NUM, not a multiple of it, and one (n, c1) plane of H x W x C0 elements within
`get_max_ub_count` (UB / 2 / element width / 2, over 4.5 buffer widths of 128 elements for a
float16 x, 2.5 for float32), `get_ub_tiling` splits the UB on H with the whole H inside and
`schedule_cut_c1` binds C1 to the blocks with TVM's `split(nparts=CORE_NUM)`: each block sums
ceil(C1 / cores) whole slices, the last block the rest and the blocks past it none
(`split_blocked`), every one of the CORE_NUM blocks launched; a block's tiles are its slices'
(n, c1) planes, N per slice. C1 = 64 on 30 cores: 21 blocks of 3 slices, one of 1, 8 idle,
where an even split gives each core 2.13 slices' worth. A smaller C1 takes the atomic schedule
over N (`update_grad_blocks`); a C1 that is a multiple of the cores takes
`schedule_cut_c_for_tiling` (not modelled here). The schedule double-buffers x only where the
loop around a tile runs more than twice (`_do_double_buffer`: here H // H = 1); the model
keeps its double-buffered pipeline (docs/corpus.md: single-buffered tiles tried, not kept).
"""

from __future__ import annotations

from typing import Any

from ..ir.tensor import Value, itemsize
from .dynamic_tiling import DynamicSplit
from .formats import FRACTAL as _C0
from .tiling import VecSpec, cdiv, split_blocked

#: bn_update_grad_shedule.py `get_max_ub_count`: buffer widths (in 128-element units) per
#: element byte size of x
_UPDATE_GRAD_WIDTH = {2: 4.5, 4: 2.5}


def max_ub_count(ub_bytes: int, item: int, width: float) -> int:
    """`get_max_ub_count`: elements of x one UB tile of the schedule may hold."""
    total = ub_bytes // 2 // (item // 2 or 1) // 2
    return int(total // (width * 128) * 128)


def _nchw(x: Value) -> tuple[int, int, int, int] | None:
    """(N, C1, H, W x C0) of a 4-D logical x, else None."""
    if x.rank != 4:
        return None
    batch, chan, height, width = (int(d) for d in x.shape)
    return batch, cdiv(chan, _C0), height, width * _C0


def bn_update_grad_fields(x: Value, n: int, cores: int, ub_bytes: int) -> dict[str, Any]:
    """The VecSpec fields of BNTrainingUpdateGrad's `schedule_cut_c1` (module note) for x of
    logical shape [N, C, H, W], `n` task elements; {} where another schedule runs."""
    dims = _nchw(x)
    if dims is None:
        return {}
    batch, c1, height, row = dims
    fits = height * row <= max_ub_count(ub_bytes, itemsize(x.dtype),
                                        _UPDATE_GRAD_WIDTH.get(itemsize(x.dtype), 2.5))
    if c1 < cores or c1 % cores == 0 or not fits:
        return {}
    per_c1 = n // c1
    return {"core_tiles": tuple((k * per_c1, used, k * batch)
                                for k, used in split_blocked(c1, cores))}


def update_grad_blocks(shape: tuple[int, ...], cores: int) -> int:
    """Blocks of TBE's bn_update_grad_schedule (`lower.vector.TBE_BLOCKS`): C1 >= CORE_NUM
    cuts C1 over every core (schedule_cut_c1, module note); a smaller C1 whose H/W do not
    split evenly over the cores and a batch below CORE_NUM falls to the atomic reduce
    schedule, which splits the batch (a ResNet-50 gradient at batch 16, C1 = 16: block_dim 16
    in its MindSpore profile, against 30 at C1 = 64)."""
    c1 = cdiv(shape[1], _C0) if len(shape) > 1 else 1
    return cores if c1 >= cores else min(shape[0], cores)


def tbe_schedule_fields(op_type: str, ins: list[Value], n: int, cores: int,
                        ub_bytes: int) -> dict[str, Any]:
    """The VecSpec fields a lone node's TBE schedule fixes (`TBE_SCHEDULES`, given its main
    input); {}: none."""
    rule = TBE_SCHEDULES.get(op_type)
    return rule(ins[0], n, cores, ub_bytes) if rule is not None and ins else {}


def tbe_launched(chip, spec: VecSpec, blocks: int) -> DynamicSplit | None:
    """The launch of a TBE kernel whose schedule hands out whole C1 slices (`VecSpec.core_tiles`
    on a TBE DSL chip): `split(nparts=CORE_NUM)` launches all `blocks`, those past the last
    share running only their start (`dynamic_tiling.with_idle_blocks`); None elsewhere."""
    if not (spec.core_tiles and chip.vector_split_bytes):
        return None
    return DynamicSplit(0, "TBE split(nparts=cores) of C1", "tbe", launched=blocks)


#: op type -> its TBE schedule's tiles per core
TBE_SCHEDULES: dict[str, Any] = {"BNTrainingUpdateGrad": bn_update_grad_fields}

"""The pass manager: a readable list of stages, each a fixed list of passes, run in order.

Order (graph-optimizers.md §8): GE standard optimisations (constant folding with shape
inference to a fixpoint, If with a constant condition, Loop shapes, CSE, constant dedup,
pruning; repeated until nothing changes), then FE graph fusion, then UB fusion, graph-kernel
fusion (MindSpore basic then composite, only with `graph_kernel=True`) and L2 fusion. Each
stage is logged and, with `dump_dir`, dumped to `.dot`; the verifier runs after every pass.

The whole pipeline is written out here, in `default_stages()`: every pass of every stage, in
order (no pass registers itself on import). A stage without passes says so in the log.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from os import PathLike
from pathlib import Path
from typing import Any

from ..errors import ConfigError, GraphError
from ..hw import Chip
from ..ir.graph import Graph
from .base import GE, CostModel, Pass, PassContext, PassResult
from .dot import write_dot
from .exclude import OPTION as EXCLUDE
from .exclude import parse_exclude
from .log import PassLog, PassRecord
from .switch import FusionSwitch, PassInfo, parse_fusion_switch
from .verify import Verifier, verify_graph

#: GE stage repeats while any pass changes the graph, at most this many rounds (GE re-pass guard)
GE_MAX_ROUNDS = 10


@dataclass(frozen=True)
class Stage:
    """A named step of the pipeline: its passes, whether it iterates, what enables it."""

    name: str
    title: str                          # used in dumps: "after GE optimisations"
    passes: tuple[type[Pass], ...]
    fixpoint: bool = False              # repeat the whole list until nothing changes
    option: str | None = None           # the optimize() flag that enables the stage


def _ge_passes() -> tuple[type[Pass], ...]:
    from .common_subexpression_elimination import CommonSubexpressionEliminationPass
    from .cond_remove import CondRemovePass
    from .constant_folding import ConstantFoldingPass
    from .constant_fuse_same import ConstantFuseSamePass
    from .loop_shape_inference import LoopShapeInferencePass
    from .prune import PrunePass

    return (PrunePass, ConstantFoldingPass, CondRemovePass, LoopShapeInferencePass,
            CommonSubexpressionEliminationPass, ConstantFuseSamePass)


def _graph_fusion_passes() -> tuple[type[Pass], ...]:
    from .aa_biasadd_conv_fusion import AABiasaddConvFusion
    from .channel_align import ChannelAlignFusionPass
    from .conv_batchnorm_fusion import ConvBatchnormFusionPass
    from .flash_attention_fusion import FlashAttentionFusionPass
    from .gelu_fusion import GeluFusionPass
    from .layer_norm_fusion import LayerNormFusionPass
    from .matmul_biasadd_fusion import MatMulBiasAddFusionPass
    from .pow_to_mul_fusion import PowToMulFusionPass
    from .rms_norm_fusion import RmsNormFusionPass
    from .rotary_mul_fusion import RotaryMulFusionPass
    from .softmax_small_op_fusion import SoftmaxSmallOpFusionPass
    from .split_concat_elemwise_fusion import SplitConcatElemwiseFusionPass
    from .swiglu_fusion import SwiGluFusionPass

    # FlashAttention first (its chain holds MatMuls and Adds the generic passes would take);
    # RmsNorm after LayerNorm (a LayerNorm's tail is an RMSNorm of the centred input)
    return (FlashAttentionFusionPass, AABiasaddConvFusion, ConvBatchnormFusionPass,
            MatMulBiasAddFusionPass, SoftmaxSmallOpFusionPass, LayerNormFusionPass,
            GeluFusionPass, PowToMulFusionPass, ChannelAlignFusionPass,
            SplitConcatElemwiseFusionPass, RmsNormFusionPass, RotaryMulFusionPass,
            SwiGluFusionPass)


STAGE_NAMES = ("ge", "graph_kernel_basic", "graph_kernel_composite", "graph_fusion",
               "ub_fusion", "l2_fusion")


def default_stages() -> list[Stage]:
    """The pipeline, in order (GE passes first, then the fusion stages)."""
    from .conv2dbackprop_fusion import DX_UB_PASSES
    from .conv_double_in_fusion import TbeConvDoubleInFusionPass
    from .graph_kernel import BasicOpsFusion, CompositeOpsFusion
    from .l2_fusion import L2BatchSplitFusionPass
    from .mul_addn_fusion import MulAddNFusion
    from .training_fusion import TRAINING_UB_PASSES
    from .ub_fusion import UB_PASSES

    return [
        Stage("ge", "after GE optimisations", _ge_passes(), fixpoint=True),
        # With graph_kernel=True, MindSpore's graph-kernel fusion runs in the front end, before
        # the ops it leaves reach CANN's FE graph fusion and UB fusion; so a composite keeps
        # the ops it absorbed (e.g. Pow, per seed 000) instead of seeing them rewritten first.
        Stage("graph_kernel_basic", "after graph-kernel basic fusion", (BasicOpsFusion,),
              option="graph_kernel"),
        Stage("graph_kernel_composite", "after graph-kernel composite fusion",
              (CompositeOpsFusion,), option="graph_kernel"),
        Stage("graph_fusion", "after graph fusion", _graph_fusion_passes()),
        Stage("ub_fusion", "after UB fusion",
              TRAINING_UB_PASSES + DX_UB_PASSES + (TbeConvDoubleInFusionPass, MulAddNFusion)
              + UB_PASSES),
        Stage("l2_fusion", "after L2 fusion", (L2BatchSplitFusionPass,), option="l2_fusion"),
    ]


@dataclass
class OptimizeResult:
    """The optimised graph and what happened to it."""

    graph: Graph
    log: PassLog
    gears: Any = None                  # a GearSet when optimize() was given gears
    node_counts: dict[str, int] = field(default_factory=dict)   # stage -> nodes after it


class PassManager:
    """Runs the stages over a copy of a graph, honouring the switch, verifying, dumping."""

    def __init__(self, stages: Sequence[Stage] | None = None,
                 switch: FusionSwitch | None = None, verify: bool = True, *,
                 dump_dir: str | PathLike | None = None, ctx: PassContext,
                 enabled_options: Mapping[str, bool] | None = None) -> None:
        self.stages = list(stages) if stages is not None else default_stages()
        self.switch = switch or FusionSwitch()
        self.verify = verify
        self.dump_dir = Path(dump_dir) if dump_dir is not None else None
        self.ctx = ctx
        self.enabled_options = dict(enabled_options or {})
        self._verify = Verifier()

    def pass_infos(self) -> dict[str, PassInfo]:
        """name -> PassInfo of every pass of every stage (for switch validation)."""
        return known_passes(self.stages)

    def _dump(self, graph: Graph, index: int, name: str, title: str, log: PassLog) -> None:
        if self.dump_dir is None:
            return
        path = write_dot(graph, self.dump_dir / f"{index:02d}_{name}.dot", title)
        log.dumps.append(str(path))

    def _run_pass(self, p: Pass, graph: Graph) -> PassResult:
        res = p.run(graph, self.ctx)
        if self.verify:
            self._verify(graph, p.name)
        return res

    def run(self, graph: Graph) -> OptimizeResult:
        """Optimise a copy of `graph`; the input graph is not changed."""
        self._verify = Verifier()        # nodes checked in this run (the graph is copied)
        if self.verify:
            self._verify(graph, where=f"input graph '{graph.name}': ")
        g = graph.copy()
        log = PassLog(graph_id=self.ctx.graph_id)
        if self.switch.source != "defaults":
            log.note(f"fusion switch: {self.switch.source}")
        for name in self.switch.unmodelled:
            log.note(f"fusion switch names CANN pass '{name}', which ascendsim does not model; "
                     f"ignored")
        counts = {"initial": len(g.nodes)}
        self._dump(g, 0, "initial", "initial", log)
        dump_index = 1
        for stage in self.stages:
            if stage.option is not None and not self.enabled_options.get(stage.option, False):
                continue
            if not stage.passes:
                log.note(f"stage '{stage.name}' has no passes registered; graph unchanged")
                continue
            self._run_stage(stage, g, log)
            counts[stage.name] = len(g.nodes)
            self._dump(g, dump_index, f"after_{stage.name}", stage.title, log)
            dump_index += 1
        return OptimizeResult(g, log, node_counts=counts)

    def _run_stage(self, stage: Stage, g: Graph, log: PassLog) -> None:
        plan: list[tuple[Pass, bool, str]] = []
        for cls in stage.passes:
            p = cls()
            runs, why = self.switch.decide(PassInfo(p.name, p.group, p.default_on,
                                                    p.disableable))
            plan.append((p, runs, why))
            if runs and why:
                log.note(why)
        results = {p.name: p.new_result() for p, runs, _ in plan if runs}
        rounds = GE_MAX_ROUNDS if stage.fixpoint else 1
        changed = False
        for _ in range(rounds):
            changed = False
            for p, runs, _ in plan:
                if runs:
                    res = self._run_pass(p, g)
                    results[p.name].merge(res)
                    changed |= res.changed
            if not changed:
                break
        if stage.fixpoint and changed:
            log.note(f"stage '{stage.name}' still changing after {rounds} rounds; stopped")
        for p, runs, why in plan:
            log.add(PassRecord(stage.name, results[p.name] if runs else p.new_result(),
                               ran=runs, note=why))


def known_passes(stages: Sequence[Stage] | None = None) -> dict[str, PassInfo]:
    """Name -> PassInfo of every pass of `stages` (default: the default pipeline)."""
    return {p.name: PassInfo(p.name, p.group, p.default_on, p.disableable)
            for st in (default_stages() if stages is None else stages) for p in st.passes}


def load_fusion_switch(source: str | PathLike | Mapping | None,
                       known: Mapping[str, PassInfo] | None = None) -> FusionSwitch:
    """A fusion switch (file path, dict or None) checked against `known` pass names (default:
    the default pipeline's); see `switch.parse_fusion_switch`."""
    return parse_fusion_switch(source, known_passes() if known is None else known)


#: keyword options of `optimize` that reach the passes as `ctx.options` (any other is a typo)
PASS_OPTIONS = ("ub_rules", "graph_kernel_max_ops", EXCLUDE)
#: every keyword `optimize` takes (for the message naming an unknown one)
OPTIMIZE_OPTIONS = ("fusion_switch", "graph_kernel", "dump_dir", "outputs", "gears",
                    "fold_limit_bytes", "l2_fusion", "verify", "gear_dim", "graph_id",
                    *PASS_OPTIONS)


def check_options(options: Mapping[str, Any]) -> None:
    """ConfigError naming an option no pass reads (a typo such as `graph_kernal` would else
    run the defaults silently)."""
    unknown = [k for k in options if k not in PASS_OPTIONS]
    if not unknown:
        return
    import difflib

    key = unknown[0]
    close = difflib.get_close_matches(str(key), OPTIMIZE_OPTIONS, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else ""
    raise ConfigError(f"unknown fusion/optimize option '{key}'{hint} (valid options: "
                      f"{', '.join(OPTIMIZE_OPTIONS)})")


def optimize(graph: Graph, chip: Chip, cost_model: CostModel | None = None,
             fusion_switch: str | PathLike | Mapping | None = None,
             graph_kernel: bool = False, dump_dir: str | PathLike | None = None,
             outputs: Sequence[str] | None = None, gears: Sequence[int] | None = None,
             fold_limit_bytes: int = 64 * 2**20, l2_fusion: bool = True, verify: bool = True,
             gear_dim: str | None = None, graph_id: int = 0, **options: Any) -> OptimizeResult:
    """Optimise and fuse `graph` as GE/FE do; returns the new graph and the pass log.

    `fusion_switch`: a CANN switch file (JSON or `Pass:off` lines), a dict, or None for the
    defaults. `outputs`: prune to these values. `gears`: sizes of the dynamic dimension
    `gear_dim` (found automatically when the inputs have one symbolic dim); every gear is
    optimised as a static graph, `result.graph` is the gear-selecting graph (If chain over the
    gears), `result.gears` picks one (`graph_for(n)`, `execute`), `result.log` is the log of
    the largest gear (each gear's log: `result.gears.results[g].log`). `fold_limit_bytes`:
    a constant fold that would materialise more is refused (and logged). `chip`: the chip
    the groups are sized for (UB, L2); `cost_model`: simulated time of a graph, for the L2
    batch split (None: that pass refuses the splits it cannot price, saying so in the log;
    the public `ascendsim.optimize` always gives one). `exclude`: single fusion instances
    left out, as "PassName:node" entries (see `exclude`). Other keyword options reach every pass as
    `ctx.options` (e.g. `ub_rules=` for UB fusion, `graph_kernel_max_ops=`).
    """
    if not isinstance(chip, Chip):
        raise ConfigError(f"optimize() needs a Chip, got {type(chip).__name__} (the API layer, "
                          f"ascendsim.optimize, resolves chip names)")
    if "chip" in options:
        raise ConfigError("pass the chip once, as optimize(graph, chip), not as an option")
    check_options(options)
    if not isinstance(graph, Graph):
        raise GraphError(f"optimize() needs a Graph, got {type(graph).__name__}")
    if fold_limit_bytes < 0:
        raise ConfigError(f"fold_limit_bytes must be >= 0, got {fold_limit_bytes}")
    if gears is not None:
        from .gears import build_gears

        gs = build_gears(graph, dim=gear_dim, gears=gears)
        kwargs = dict(chip=chip, cost_model=cost_model, fusion_switch=fusion_switch,
                      graph_kernel=graph_kernel, outputs=outputs,
                      fold_limit_bytes=fold_limit_bytes, l2_fusion=l2_fusion, verify=verify,
                      **options)
        opt = gs.map(lambda i, n, g: optimize(
            g, dump_dir=None if dump_dir is None else Path(dump_dir) / f"gear_{n}",
            graph_id=i, **kwargs))  # type: ignore[arg-type]
        last = opt.results[opt.gears[-1]]
        selecting = opt.selecting_graph()
        if verify:
            verify_graph(selecting, where=f"gear-selecting graph '{selecting.name}': ")
        return OptimizeResult(selecting, last.log, gears=opt, node_counts=last.node_counts)
    stages = default_stages()
    switch = parse_fusion_switch(fusion_switch, known_passes(stages))
    if outputs is not None:
        missing = [o for o in outputs if o not in graph.values]
        if missing:
            raise GraphError(f"optimize(outputs=...): no value(s) {', '.join(missing)} in graph "
                             f"'{graph.name}'")
    if options.get(EXCLUDE) is not None:
        options[EXCLUDE] = parse_exclude(options[EXCLUDE], known_passes(stages))
    ctx = PassContext(chip=chip, cost_model=cost_model, fold_limit_bytes=fold_limit_bytes,
                      outputs=tuple(outputs) if outputs is not None else None, graph_id=graph_id,
                      options=dict(options))
    mgr = PassManager(stages, switch, verify, dump_dir=dump_dir, ctx=ctx,
                      enabled_options={"graph_kernel": graph_kernel, "l2_fusion": l2_fusion})
    return mgr.run(graph)


__all__ = ["optimize", "OptimizeResult", "PassManager", "Stage",
           "default_stages", "STAGE_NAMES", "GE"]

"""Control flow: If, Loop and Scan, whose bodies are closed `Graph`s held in attributes.

The body graphs are attribute values under ONNX's names (`then_branch`, `else_branch`,
`body`). They are *closed*: values a body reads from the enclosing graph are passed as extra
node inputs after the ONNX ones, and appear as the body graph's trailing inputs.

- If(cond, *captured): both branches take the captured values as their inputs (same order).
- Loop(M, cond, *v_initial, *captured): the body takes (iteration_num, cond, *v, *captured)
  and returns (cond, *v_next, *scan_outputs); `num_captured` says how many trailing node inputs
  are captures (an ascendsim attribute: ONNX bodies capture implicitly).
- Scan(*initial_states, *scanned, *captured) (the opset >= 9 form): the body takes
  (*states, *one slice of each scanned input, *captured) and returns (*states, *scan outputs).

All are OPAQUE (nothing fuses across them); the branch and loop decisions are scalar work.
"""

from __future__ import annotations

import numpy as np

from ...errors import GraphError
from ..registry import Category, ControlFlow, OpDef, Unit, register


def _zero_flops(ins, outs, attrs) -> int:
    return 0


def _body(attrs: dict, key: str):
    from ..graph import Graph

    g = attrs.get(key)
    if not isinstance(g, Graph):
        raise GraphError(f"attribute '{key}' must be a Graph, got {type(g).__name__}")
    return g


def _merge(a, b):
    """Shape of a value that may come from either branch: differing dims become symbolic."""
    if len(a) != len(b):
        return a
    return tuple(x if x == y else f"{x}|{y}" for x, y in zip(a, b))


def _if_infer(ins, attrs, consts):
    then_g, else_g = _body(attrs, "then_branch"), _body(attrs, "else_branch")
    for g in (then_g, else_g):
        if len(g.inputs) != len(ins) - 1:
            raise GraphError(f"branch '{g.name}' has {len(g.inputs)} inputs, the If node passes "
                             f"{len(ins) - 1} captured values")
    if len(then_g.outputs) != len(else_g.outputs):
        raise GraphError(f"branches return {len(then_g.outputs)} and {len(else_g.outputs)} "
                         f"outputs")
    outs = []
    for t, e in zip(then_g.outputs, else_g.outputs):
        tv, ev = then_g.values[t], else_g.values[e]
        outs.append((_merge(tv.shape, ev.shape), tv.dtype))
    return outs


def _if_kernel(args: list, attrs: dict, run_body) -> list:
    cond = bool(np.asarray(args[0]).reshape(-1)[0])
    branch = _body(attrs, "then_branch" if cond else "else_branch")
    return run_body(branch, args[1:])


def _loop_counts(ins, attrs):
    body = _body(attrs, "body")
    c = int(attrs["num_captured"])
    n = len(ins) - 2 - c
    k = len(body.outputs) - 1 - n
    if n < 0 or k < 0 or len(body.inputs) != 2 + n + c:
        raise GraphError(f"Loop body '{body.name}' has {len(body.inputs)} inputs and "
                         f"{len(body.outputs)} outputs; the node passes {len(ins)} inputs "
                         f"({c} captured)")
    return body, n, k, c


def _loop_infer(ins, attrs, consts):
    body, n, k, _ = _loop_counts(ins, attrs)
    outs = [(v.shape, v.dtype) for v in ins[2:2 + n]]
    trip = int(np.asarray(consts[0]).reshape(())) if consts[0] is not None else None
    iters = trip if trip is not None and ins[1] is None else f"{body.name}_iters"
    for o in body.outputs[1 + n:]:
        v = body.values[o]
        outs.append(((iters,) + tuple(v.shape), v.dtype))
    return outs


def _loop_kernel(args: list, attrs: dict, run_body) -> list:
    body = _body(attrs, "body")
    c = int(attrs["num_captured"])
    n = len(args) - 2 - c
    trip = None if args[0] is None else int(np.asarray(args[0]).reshape(()))
    cond = True if args[1] is None else bool(np.asarray(args[1]).reshape(()))
    carried = list(args[2:2 + n])
    captured = list(args[2 + n:])
    scans: list[list] = [[] for _ in range(len(body.outputs) - 1 - n)]
    i = 0
    while cond and (trip is None or i < trip):
        outs = run_body(body, [np.array(i, np.int64), np.array(cond), *carried, *captured])
        cond = bool(np.asarray(outs[0]).reshape(()))
        carried = outs[1:1 + n]
        for s, v in zip(scans, outs[1 + n:]):
            s.append(v)
        i += 1
    stacked = []
    for name, s in zip(body.outputs[1 + n:], scans):
        if s:
            stacked.append(np.stack(s))
        else:
            v = body.values[name]
            dims = tuple(d if isinstance(d, int) else 0 for d in v.shape)
            stacked.append(np.zeros((0,) + dims, dtype=v.dtype))
    return [*carried, *stacked]


# ------------------------------------------------------------------ body input types
def _loop_hints(ins: list, attrs: dict) -> list:
    """Loop body inputs: iteration number, condition, then the carried values."""
    from ..tensor import Value

    return [Value("iter", (), "int64"), Value("cond", (), "bool"), *ins[2:]]


def _scan_hints(ins: list, attrs: dict) -> list:
    """Scan body inputs: the states, then one slice of each scanned input."""
    from ..tensor import Value

    m = int(attrs.get("num_scan_inputs", 1))
    n = len(ins) - m
    axes = list(attrs.get("scan_input_axes") or [0] * m)
    hints = list(ins[:n])
    for v, a in zip(ins[n:], axes):
        if v is None:
            hints.append(None)
            continue
        a = _axis(int(a), len(v.shape))
        hints.append(Value(v.name, v.shape[:a] + v.shape[a + 1:], v.dtype))
    return hints


register(OpDef("If", _if_infer, _if_kernel, Category.OPAQUE, unit=Unit.SCALAR,
               inputs=("cond", "*captured"), attrs={"then_branch": None, "else_branch": None},
               flops=_zero_flops, builder="if_",
               control=ControlFlow(("then_branch", "else_branch"), condition=0),
               doc="Runs then_branch or else_branch (closed graphs) on the captured inputs."))
register(OpDef("Loop", _loop_infer, _loop_kernel, Category.OPAQUE, unit=Unit.SCALAR,
               inputs=("M?", "cond?", "*inputs"), attrs={"body": None, "num_captured": 0},
               flops=_zero_flops, needs_const_inputs=(0,), builder="loop",
               control=ControlFlow(("body",), first_carried=2, captured_attr="num_captured",
                                   body_input_hints=_loop_hints),
               doc="Runs body while cond and iteration < M; carries values, stacks scans."))


# ------------------------------------------------------------------ Scan (opset >= 9 form)
def _scan_layout(ins, attrs):
    body = _body(attrs, "body")
    m, c = int(attrs["num_scan_inputs"]), int(attrs["num_captured"])
    n = len(ins) - m - c
    k = len(body.outputs) - n
    if n < 0 or k < 0 or m < 1 or len(body.inputs) != n + m + c:
        raise GraphError(f"Scan body '{body.name}' has {len(body.inputs)} inputs and "
                         f"{len(body.outputs)} outputs; the node passes {len(ins)} inputs "
                         f"({m} scanned, {c} captured)")
    in_axes = list(attrs["scan_input_axes"] or [0] * m)
    out_axes = list(attrs["scan_output_axes"] or [0] * k)
    in_dirs = list(attrs["scan_input_directions"] or [0] * m)
    out_dirs = list(attrs["scan_output_directions"] or [0] * k)
    return body, n, m, k, in_axes, out_axes, in_dirs, out_dirs


def _axis(a: int, rank: int) -> int:
    return a + rank if a < 0 else a


def _scan_infer(ins, attrs, consts):
    body, n, m, k, in_axes, out_axes, _, _ = _scan_layout(ins, attrs)
    first = ins[n]
    steps = first.shape[_axis(in_axes[0], len(first.shape))]
    outs = [(v.shape, v.dtype) for v in ins[:n]]
    for j, o in enumerate(body.outputs[n:]):
        v = body.values[o]
        shape = list(v.shape)
        shape.insert(_axis(out_axes[j], len(shape) + 1), steps)
        outs.append((tuple(shape), v.dtype))
    return outs


def _scan_kernel(args: list, attrs: dict, run_body) -> list:
    body, n, m, k, in_axes, out_axes, in_dirs, out_dirs = _scan_layout(args, attrs)
    states, scanned, captured = list(args[:n]), args[n:n + m], list(args[n + m:])
    axes = [_axis(a, s.ndim) for a, s in zip(in_axes, scanned)]
    steps = scanned[0].shape[axes[0]]
    collected: list[list] = [[] for _ in range(k)]
    for t in range(steps):
        elems = [np.take(s, steps - 1 - t if d else t, axis=a)
                 for s, a, d in zip(scanned, axes, in_dirs)]
        outs = run_body(body, [*states, *elems, *captured])
        states = outs[:n]
        for acc, v in zip(collected, outs[n:]):
            acc.append(v)
    stacked = []
    for j, acc in enumerate(collected):
        if out_dirs[j]:
            acc = acc[::-1]
        v = body.values[body.outputs[n + j]]
        if acc:
            stacked.append(np.stack(acc, axis=_axis(out_axes[j], acc[0].ndim + 1)))
        else:
            dims = [d if isinstance(d, int) else 0 for d in v.shape]
            dims.insert(_axis(out_axes[j], len(dims) + 1), 0)
            stacked.append(np.zeros(dims, v.dtype))
    return [*states, *stacked]


register(OpDef("Scan", _scan_infer, _scan_kernel, Category.OPAQUE, unit=Unit.SCALAR,
               inputs=("*inputs",),
               attrs={"body": None, "num_scan_inputs": 1, "scan_input_axes": None,
                      "scan_input_directions": None, "scan_output_axes": None,
                      "scan_output_directions": None, "num_captured": 0},
               flops=_zero_flops,
               control=ControlFlow(("body",), body_input_hints=_scan_hints),
               doc="Runs body once per slice of the scanned inputs, carrying state."))

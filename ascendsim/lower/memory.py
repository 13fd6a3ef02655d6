"""The memory plan of a lowered graph: its peak live device (HBM) memory, as GE would allocate.

Note on the model
-----------------
GE's memory assigner gives every tensor a block of device memory from the moment its producer
runs until its last consumer has run, and hands a freed block to a later tensor (memory reuse,
on by default; ``ge.exec.disableReuseMemory=1`` turns it off). The peak device memory of a
graph is then what is live at once, which this plan computes on the lowered `Program`:

- activations: every task output lives from its task to the last task that reads it, in launch
  order (a view launches no task: its output is its input's block, `Program.aliases`); the
  bytes are the lowering's (`padded_bytes` in the task's format: NC1HWC0 pads C to C0,
  FRACTAL_NZ pads the last two dims to 16); a converted copy (TransData) is a tensor of its own;
- weights: every constant a task reads, once (two constants with identical contents once, as
  GE's ConstantFuseSamePass merges them), at its ND bytes (weights are converted offline);
- workspace: the GM scratch a task needs while it runs (`Task.workspace_bytes`: the lowering
  states one for mix kernels, whose cube result waits in GM for the vector phase; other tasks
  have no figure and count 0, which `MemoryPlan.notes` says);
- inputs_outputs: the graph's inputs and the tensors holding its outputs, live for the whole
  run (the user allocates them before it starts);
- in place: an op that writes into an input (`OpDef.in_place`: KvCacheAppend writes the new
  tokens into the cache it is given) allocates no block for its output; a graph output
  written in place into a graph input (decode's present keys into its past keys) is that
  input's block, counted once.

`peak_bytes` is the largest sum over tasks of the live activations and that task's workspace,
plus weights and inputs/outputs. Not modelled: GE's block alignment and its size classes (a
freed block is reused only by a tensor that fits it), so the peak is a lower bound of GE's;
streams (several streams keep blocks longer: the plan follows launch order, one stream).
`no_reuse_bytes` is the sum of every tensor (reuse off).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from ..errors import CapacityError
from ..ir.registry import get_op, has_op
from .formats import ND, padded_bytes
from .program import Program

CATEGORIES = ("weights", "activations", "workspace", "inputs_outputs")
#: how many of the tensors live at the peak a plan keeps (largest first)
LARGEST_KEPT = 10
CONST_FORMAT = "const"


@dataclass(frozen=True)
class MemoryPlan:
    """Peak live device memory of a lowered graph (see the module note)."""

    peak_bytes: int
    by_category: dict[str, int]                  # at the peak: weights, activations, ...
    largest: tuple[tuple[str, int], ...]          # tensors live at the peak, largest first
    peak_task: str = ""                           # the task running at the peak ("" if none)
    no_reuse_bytes: int = 0                       # every tensor its own block (reuse off)
    notes: tuple[str, ...] = field(default=())

    def check(self, capacity_bytes: int, chip_name: str = "the chip") -> None:
        """Raise CapacityError when the peak exceeds `capacity_bytes` (the chip's HBM)."""
        if self.peak_bytes <= capacity_bytes:
            return
        top = ", ".join(f"{name} {_size(b)}" for name, b in self.largest[:3])
        where = f" while '{self.peak_task}' runs" if self.peak_task else ""
        cats = ", ".join(f"{k} {_size(v)}" for k, v in self.by_category.items() if v)
        raise CapacityError(
            f"peak live device memory {_size(self.peak_bytes)}{where} exceeds the "
            f"{_size(capacity_bytes)} HBM of {chip_name} ({cats}); largest tensors: {top}. "
            f"Use a smaller batch or shapes, or pass check_capacity=False to simulate anyway")

    def __str__(self) -> str:
        cats = ", ".join(f"{k} {_size(v)}" for k, v in self.by_category.items())
        return f"peak {_size(self.peak_bytes)} ({cats})"


def _size(nbytes: int) -> str:
    for unit, scale in (("PiB", 2**50), ("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20),
                        ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.2f} {unit} ({nbytes:,} B)"
    return f"{nbytes} B"


def const_key(name: str, data) -> tuple:
    """Identical constants share a key (contents for arrays, the recipe for lazy ones)."""
    if isinstance(data, np.ndarray):
        digest = hashlib.blake2b(np.ascontiguousarray(data).data, digest_size=16).hexdigest()
        return ("array", data.dtype.str, data.shape, digest)
    describe = getattr(data, "describe", "")
    if describe:
        return ("lazy", getattr(data, "dtype", ""), tuple(getattr(data, "shape", ())), describe)
    return ("name", name)


def memory_plan(graph, program: Program) -> MemoryPlan:
    """The memory plan of `graph` lowered to `program` (see the module note). Over 60 lines:
    its passes (weights, inputs and outputs, activations, the live set, the peak) fill and
    read the same live intervals, a few lines each."""
    aliases = dict(program.aliases)
    for t in program.tasks:        # an op writing into its input: its output is that block
        pairs = get_op(t.op_type).in_place_pairs() if has_op(t.op_type) else ()
        for o, k in pairs:
            if k < len(t.inputs) and o < len(t.outputs):
                aliases[t.outputs[o].name] = t.inputs[k].name

    def root(name: str) -> str:
        while name in aliases:
            name = aliases[name]
        return name

    tasks = program.tasks
    last = max(len(tasks) - 1, 0)
    nbytes: dict[str, int] = {}
    category: dict[str, str] = {}
    start: dict[str, int] = {}
    end: dict[str, int] = {}

    def live(name: str, size: int, cat: str, t0: int, t1: int) -> None:
        nbytes[name] = max(nbytes.get(name, 0), size)
        category.setdefault(name, cat)
        start[name] = min(start.get(name, t0), t0)
        end[name] = max(end.get(name, t1), t1)

    # weights: each distinct constant read by a task, once
    weight_keys: dict[tuple, str] = {}
    for t in tasks:
        for v, fmt in zip(t.inputs, t.input_formats):
            r = root(v.name)
            if fmt != CONST_FORMAT and r not in graph.constants:
                continue
            key = const_key(r, graph.constants.get(r))
            first = weight_keys.setdefault(key, r)
            if first == r:
                value = graph.values.get(r, v)
                live(r, padded_bytes(value, ND), "weights", 0, last)
    # the graph's inputs and outputs: the whole run
    io = [root(n) for n in (*graph.inputs, *program.output_values)]
    for r in io:
        if r in graph.values and r not in category:
            live(r, padded_bytes(graph.values[r], ND), "inputs_outputs", 0, last)
    graph_inputs = set(graph.inputs)
    produced_io = {r for r in io if r not in graph_inputs}
    # activations: producer to last consumer, in launch order
    for k, t in enumerate(tasks):
        for v, fmt in zip(t.outputs, t.output_formats):
            r = root(v.name)
            if r != v.name:            # written in place: the block it writes lives on
                if category.get(r) == "activations":
                    end[r] = max(end[r], k)
                continue
            cat = "inputs_outputs" if v.name in produced_io else "activations"
            size = padded_bytes(v, fmt)
            if cat == "inputs_outputs":
                size = max(size, nbytes.get(v.name, 0))
            live(v.name, size, cat, k, k if cat == "activations" else last)
        for v in t.inputs:
            r = root(v.name)
            if category.get(r) == "activations":
                end[r] = max(end[r], k)
    workspace = [t.workspace_bytes for t in tasks]

    # the live set at each task (events: +bytes at start, -bytes after end)
    delta = [0] * (len(tasks) + 1)
    for name, cat in category.items():
        if cat == "activations":
            delta[start[name]] += nbytes[name]
            delta[end[name] + 1] -= nbytes[name]
    fixed = sum(nbytes[n] for n, c in category.items() if c != "activations")
    peak, peak_k, acts = fixed, -1, 0
    for k in range(len(tasks)):
        acts += delta[k]
        total = fixed + acts + workspace[k]
        if total > peak:
            peak, peak_k = total, k
    if peak_k < 0 and tasks:
        peak_k = 0

    at_peak = [n for n, c in category.items()
               if c != "activations" or start[n] <= peak_k <= end[n]]
    by_cat = dict.fromkeys(CATEGORIES, 0)
    for n in at_peak:
        by_cat[category[n]] += nbytes[n]
    sized = [(n, nbytes[n]) for n in at_peak]
    if peak_k >= 0 and workspace[peak_k]:
        by_cat["workspace"] = workspace[peak_k]
        sized.append((f"{tasks[peak_k].op_name} (workspace)", workspace[peak_k]))
    sized.sort(key=lambda x: (-x[1], x[0]))
    notes = []
    without = sorted({t.op_type for t in tasks if not t.workspace_bytes})
    if without:
        notes.append(f"workspace 0 for {', '.join(without)}: the lowering states no GM "
                     f"scratch for these tasks")
    return MemoryPlan(peak_bytes=int(peak), by_category=by_cat,
                      largest=tuple(sized[:LARGEST_KEPT]),
                      peak_task=tasks[peak_k].op_name if peak_k >= 0 else "",
                      no_reuse_bytes=int(sum(nbytes.values()) + sum(workspace)),
                      notes=tuple(notes))


__all__ = ["MemoryPlan", "memory_plan", "CATEGORIES"]

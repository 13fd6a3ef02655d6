"""A pipe's instruction queue prepared once for the pipe process (`ascendsim.sim.pipe`).

`queue_entries`: per entry of an expanded queue (`expand_flags`), its fields and what the pipe
derives from its instruction; `timeout_spans`: the runs of plain-timeout instructions a pipe
waits for as one timeout. Both are cached by queue identity (the queues are cached and
read-only), the derived fields per instruction.
"""

from __future__ import annotations

import math

import numpy as np

from .rows import level_name

#: expanded queue (by identity; kept alive beside its spans) -> `timeout_spans`
_SPANS: dict[int, tuple[list, list[int]]] = {}
#: expanded queue (by identity; kept alive beside them) -> `queue_entries`, distinct entry indices
_ENTRIES: dict[int, tuple[list, list[tuple], np.ndarray, list[tuple]]] = {}


#: Instr (by identity; kept alive beside it) -> what `pipe.run_pipe` derives from it (`_derive`)
_INSTRS: dict[int, tuple] = {}
#: a queue shorter than this is prepared in plain Python (numpy's per-call cost dominates)
_SHORT_QUEUE = 64


def _derive(e: tuple) -> tuple:
    """One queue entry's six fields, then what `pipe.run_pipe` derives from its instruction (see
    `queue_entries`) and what `timeout_spans` needs of it."""
    ins = e[0]
    hit = _INSTRS.get(id(ins))
    if hit is None or hit[0] is not ins:
        flow = bool(ins.shared and ins.nbytes)
        own = ins.busy()
        # a plain timeout: not a flow over the shared fabric, integer cycles
        plain = type(ins.cycles) is int and not flow
        if len(_INSTRS) >= 65536:
            _INSTRS.clear()
        hit = _INSTRS[id(ins)] = (ins, (flow, own, ins.cycles, math.ceil(own), ins.kind,
                                        level_name(ins.src, ins.hbm), level_name(ins.dst, ins.hbm)),
                                  plain, ins.cycles if plain else 0)
    plain = hit[2]
    return (*e, *hit[1], plain and not e[2] and not e[4], plain and not e[1] and not e[3],
            hit[3])


def _prepared(queue: list) -> tuple[list[tuple], np.ndarray | None, list[tuple]]:
    """`queue_entries` of `queue`; for a long queue also the index of each entry among its distinct
    entry objects and those distinct entries' derived tuples (else None and the entries).
    Cached by queue identity."""
    hit = _ENTRIES.get(id(queue))
    if hit is not None and hit[0] is queue:
        return hit[1], hit[2], hit[3]
    if len(queue) < _SHORT_QUEUE:
        entries = [_derive(e) for e in queue]
        index, infos = None, entries
    else:
        # entries recur (expand_flags repeats the same objects): each distinct one is
        # derived once, and the queue maps to them by index (C loops: map, dict lookups)
        ids = list(map(id, queue))
        distinct = dict(zip(ids, queue))            # (in order of first appearance)
        at = dict(zip(distinct, range(len(distinct))))
        idx = list(map(at.__getitem__, ids))
        infos = [_derive(e) for e in distinct.values()]
        entries = list(map(infos.__getitem__, idx))
        index = np.array(idx, dtype=np.int64)
    if len(_ENTRIES) >= 1024:        # as many as expand_flags keeps
        _ENTRIES.clear()
    _ENTRIES[id(queue)] = (queue, entries, index, infos)
    return entries, index, infos


def queue_entries(queue: list) -> list[tuple]:
    """Per entry of an expanded pipe queue (`expand_flags`: cached, read-only): its six
    fields followed by what `pipe.run_pipe` derives from its instruction, the same every time it
    runs: whether it is a flow over the shared fabric, its uncontended cycles (`Instr.busy`),
    its fixed cycles and the ceiling of the uncontended ones, its kind, and the trace levels
    of its source and destination (a flow's are decided by the L2 when it starts); then
    whether a merged timeout may go on after it / include it after an earlier one and its
    plain cycles (`timeout_spans`)."""
    return _prepared(queue)[0]


def timeout_spans(queue: list) -> list[int]:
    """Per entry of an expanded pipe queue (`expand_flags`: cached, read-only): the cycles of
    one timeout covering a run of plain-timeout instructions that starts here (0: no run),
    or -1 inside such a run. A run never waits, allocates, frees, sets a flag or changes tile
    between its instructions, so one timeout ends it at the very cycle the instruction-by-
    instruction timeouts would, and every instruction's start and end follow from the run's
    start (integer cycles: the sums are exact)."""
    hit = _SPANS.get(id(queue))
    if hit is not None and hit[0] is queue:
        return hit[1]
    n = len(queue)
    # per entry (`queue_entries`): whether a run may go on after it / may include it after an
    # earlier one (a plain timeout (not a flow over the shared fabric) of integer cycles
    # that sets or frees nothing / waits for or allocates nothing), its tile and its cycles
    # if plain
    entries, index, infos = _prepared(queue)
    if index is None:               # a short queue: the runs in plain Python
        spans = _short_spans(entries)
    else:
        spans = _long_spans(index, infos, n)
    if len(_SPANS) >= 1024:          # as many as expand_flags keeps
        _SPANS.clear()
    _SPANS[id(queue)] = (queue, spans)
    return spans


def _short_spans(entries: list[tuple]) -> list[int]:
    """`timeout_spans` of a short queue from its entries, in plain Python."""
    n = len(entries)
    spans = [0] * n
    k = 0
    while k < n:
        j = k
        while j < n - 1 and entries[j][13] and entries[j + 1][14] \
                and entries[j][5] == entries[j + 1][5]:
            j += 1
        if j > k:
            spans[k] = sum(e[15] for e in entries[k:j + 1])
            spans[k + 1:j + 1] = [-1] * (j - k)
        k = j + 1
    return spans


def _long_spans(index: np.ndarray, infos: list[tuple], n: int) -> list[int]:
    """`timeout_spans` of a long queue of `n` entries from its distinct entries' derived
    tuples (`infos`) and each entry's index among them, with numpy."""
    spans = [0] * n
    goes_on = np.array([x[13] for x in infos], dtype=bool)[index]
    joins_in = np.array([x[14] for x in infos], dtype=bool)[index]
    tiles = np.array([x[5] for x in infos], dtype=np.int64)[index]
    # whether entry j and entry j + 1 can be waited for as one timeout
    joins = goes_on[:-1] & joins_in[1:] & (tiles[:-1] == tiles[1:])
    if not joins.any():             # no two entries join: every span stays 0
        return spans
    cycles = [x[15] for x in infos]
    counts = np.bincount(index, minlength=len(infos)).tolist()
    if sum(c * m for c, m in zip(cycles, counts)) < 2**62:   # (int64 sums are exact)
        inside = np.zeros(n, dtype=bool)   # continues the run of the entry before
        inside[1:] = joins
        first = np.zeros(n, dtype=bool)
        first[:-1] = joins
        first &= ~inside
        last = inside.copy()
        last[:-1] &= ~joins
        total = np.concatenate(([0], np.cumsum(np.array(cycles, dtype=np.int64)[index])))
        starts, ends = np.flatnonzero(first), np.flatnonzero(last)
        out = np.zeros(n, dtype=np.int64)
        out[inside] = -1
        out[starts] = total[ends + 1] - total[starts]
        return out.tolist()
    cycles = [cycles[i] for i in index.tolist()]
    joins = joins.tolist()
    k = 0
    while k < n:
        j = k
        while j < n - 1 and joins[j]:
            j += 1
        if j > k:
            spans[k] = sum(cycles[k:j + 1])
            spans[k + 1:j + 1] = [-1] * (j - k)
        k = j + 1
    return spans


__all__ = ["queue_entries", "timeout_spans"]

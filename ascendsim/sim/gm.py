"""GM accounting: what the L2 makes of each GM move, and the GM bytes of each task.

A GM move asks the run's `L2Cache` (one per run) for its HBM fraction (misses, and the dirty
bytes it evicts) and its per-core path bandwidth at its miss fraction (the msKPP de-rate);
the task's GM traffic is the simulated one (`GmAccount.traffic`). When a task ends, its
fills become ordinary residency and the intermediates it was the last reader of are dead
(their lines stay; a later intermediate's writes overwrite them, else they are written back
when evicted: `L2Cache.retire`); at the end of the graph what is still dirty is written back
(`GmAccount.flush`). See the note on the model in `ascendsim.sim.engine`, "L2 as a cache".
"""

from __future__ import annotations

from ..lower.program import Program
from .l2cache import L2Cache

#: the GM keys of a task's traffic that the simulation decides
GM_KEYS = (("L2", "read"), ("DDR", "read"), ("L2", "write"), ("DDR", "write"))
_L2_READ, _DDR_READ, _, _DDR_WRITE = GM_KEYS


class GmAccount:
    """The run's L2 cache and its GM bookkeeping: per task the GM tensors its moves read and
    write and their roles and sizes (`gm_tensors`), the simulated GM bytes per task
    (`traffic`), the count of GM accesses with side effects made outside the pipes
    (`stateful_accesses`) and, for the fast-forward, the log of the pipes' accesses (`log`,
    None when it is off; sim/fastforward.py)."""

    def __init__(self, program: Program, fast_forward: bool) -> None:
        chip = program.chip
        self.l2 = L2Cache(chip.l2_bytes)
        self.reads, self.writes, self.readers, self.roles, self.sizes = gm_tensors(program)
        self.miss_slowdown = chip.l2_miss_slowdown
        self.traffic: dict[int, dict[tuple[str, str], float]] = {}   # simulated GM bytes
        # GM accesses outside the pipes that changed the L2 (the fast-forward skips no period
        # holding one); the pipes' own are logged for it (`pipe_access`)
        self.stateful_accesses = 0
        self.log: list[tuple] | None = [] if fast_forward else None

    def access(self, tid: int, tensors: tuple, nbytes: float, cold: float, write: bool,
               bw: float, weight: int) -> tuple[float, float]:
        """A GM move of `nbytes` per core on `weight` cores, starting now: the L2 decides its
        HBM fraction (misses, and the dirty bytes it evicts) and the per-core path bandwidth
        at its miss fraction (the lowering's `bw` is de-rated for `cold`). Returns
        (HBM fraction, bandwidth)."""
        self.stateful_accesses += 1      # (the fast-forward skips no period holding one)
        return self.l2_access(self.l2, self.traffic.setdefault(tid, {}), tid, tensors,
                              nbytes, cold, write, bw, weight)

    def pipe_access(self, tid: int, tensors: tuple, nbytes: float, cold: float,
                    write: bool, bw: float, weight: int) -> tuple[float, float]:
        """`access` of a pipe's move, logged with its result: the fast-forward replays a
        period's log on the cache when it skips the period (sim/fastforward.py)."""
        out = self.l2_access(self.l2, self.traffic.setdefault(tid, {}), tid, tensors,
                             nbytes, cold, write, bw, weight)
        log = self.log
        if log is not None:
            log.append((tid, tensors, nbytes, cold, write, bw, weight, out))
        return out

    def l2_access(self, l2: L2Cache, tr: dict, tid: int, tensors: tuple, nbytes: float,
                  cold: float, write: bool, bw: float, weight: int) -> tuple[float, float]:
        """The body of `access` on cache `l2`, adding the task's bytes to `tr` (the
        fast-forward runs it on a copy of the cache to check a period before skipping it)."""
        total = nbytes * weight
        if not tensors:                       # a workspace or a bias: as lowered
            if write:
                _add(tr, ("L2", "write"), total)
                _add(tr, ("DDR", "write"), total * cold)
            else:
                _add(tr, ("L2", "read"), total * (1 - cold))
                _add(tr, ("DDR", "read"), total * cold)
            return cold, bw
        whole = sum(t[1] for t in tensors) if len(tensors) > 1 else tensors[0][1]
        whole = whole or 1
        evicted = 0.0
        if write:
            readers = self.readers
            for name, size, _ in tensors:
                evicted += l2.write(tid, name, size, total * size / whole, name in readers)
            _add(tr, ("L2", "write"), total)
            _add(tr, ("DDR", "write"), evicted)
            return evicted / total, bw
        miss = 0.0
        for name, size, span in tensors:
            others = self.others(l2, tid, name) if l2.first_read(tid, name) else 0.0
            m, wb = l2.read(tid, name, size, total * size / whole, cold, span, others)
            miss += m
            evicted += wb
        # (`_add`, inline)
        hit = total - miss
        if hit:
            tr[_L2_READ] = tr.get(_L2_READ, 0.0) + hit
        if miss:
            tr[_DDR_READ] = tr.get(_DDR_READ, 0.0) + miss
        if evicted:
            tr[_DDR_WRITE] = tr.get(_DDR_WRITE, 0.0) + evicted
        frac = miss / total
        slow = self.miss_slowdown
        base = bw / (1.0 - cold + cold / slow)
        return (miss + evicted) / total, base * (1.0 - frac + frac / slow)

    def others(self, l2: L2Cache, tid: int, name: str) -> float:
        """The bytes task `tid`'s tensors other than `name` will allocate in `l2` as it runs:
        each one's size less what of it is resident (the misses of its inputs, the lines its
        outputs allocate on write; a tensor read and written in place counted once)."""
        total = 0.0
        for other, size in self.sizes.get(tid, {}).items():
            if other != name:
                total += max(size - l2.resident(other), 0.0)
        return total

    def task_done(self, tid: int) -> None:
        """A task ended: its fills become ordinary residency; an intermediate whose last
        reader this was (or that nobody reads) is dead: its lines stay in L2, marked so
        (`L2Cache.retire`)."""
        self.l2.end_task(tid)
        readers = self.readers
        for name in self.reads.get(tid, ()):
            readers[name] -= 1
            if readers[name] == 0:
                self.l2.retire(name)
        for name in self.writes.get(tid, ()):
            if readers.get(name) == 0:
                self.l2.retire(name)

    def flush(self, env, fabric, done: list):
        """End of the graph, once the `done` events of every task have fired: write back what
        is still dirty, as one flow L2 -> HBM of `fabric`."""
        if done:
            yield env.all_of(done)
        last = env.now
        nbytes = self.l2.flush()
        if nbytes > 0:
            yield fabric.transfer(nbytes, fabric.hbm_bw, 1.0)
        self.l2.stats.flush_cycles = int(env.now - last)


def gm_tensors(program: Program) -> tuple[dict, dict, dict, dict, dict]:
    """Per task the GM tensors its moves read and write (`Instr.tensors`), per
    intermediate (a tensor some task writes, not a graph output) how many tasks read it, and
    per task its tensors' roles (name -> order of first appearance in its moves: replay) and
    sizes (name -> the largest size its moves give)."""
    reads: dict[int, set[str]] = {}
    writes: dict[int, set[str]] = {}
    roles: dict[int, dict[str, int]] = {}
    sizes: dict[int, dict[str, int]] = {}
    for t in program.tasks:
        mine: dict[str, int] = {}
        big: dict[str, int] = {}
        for ph in t.phases:
            for g in ph.groups:
                # (the group's distinct tensors in order of first appearance in its moves)
                for name, size, write in g.gm_tensors:
                    (writes if write else reads).setdefault(t.task_id, set()).add(name)
                    mine.setdefault(name, len(mine))
                    if size > big.get(name, -1):
                        big[name] = size
        if mine:
            roles[t.task_id] = mine
            sizes[t.task_id] = big
    outputs = set()
    for name in program.output_values:
        while name in program.aliases:
            name = program.aliases[name]
        outputs.add(name)
    written = set().union(*writes.values()) - outputs
    readers = dict.fromkeys(written, 0)
    for names in reads.values():
        for n in names & written:
            readers[n] += 1
    return ({tid: sorted(n for n in names if n in written) for tid, names in reads.items()},
            {tid: sorted(names & written) for tid, names in writes.items()}, readers, roles,
            sizes)



def _add(acc: dict, key: tuple[str, str], nbytes: float) -> None:
    if nbytes:
        acc[key] = acc.get(key, 0.0) + nbytes


__all__ = ["GM_KEYS", "GmAccount", "gm_tensors"]

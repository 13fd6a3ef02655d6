"""The chip's L2 as a cache in time: what is resident, what is dirty, decided as the program runs.

Note on the model
-----------------
One cache per simulation, shared by every core, stream and engine that moves GM data through
the fabric. Capacity is the chip's `l2_bytes`. No Ascend document found names the L2's
replacement or write policy (`reference/ascend-hardware.md`, "On-chip L2": size and line
only), so the model takes the textbook choice: least recently used replacement, write-back
and write-allocate (a GM write lands in L2 and reaches HBM only when evicted or flushed).

Granularity: whole tensors with partial residency in bytes. A tensor (a GM value, named by
the lowering in `Instr.tensors`) holds `resident` bytes, `dirty` of them not yet in HBM. Byte
ranges are not tracked because the program has none to give: the instructions of one tile are
shared by every tile of a segment, and block detail moves the remaining tiles of a core group
in a few slices, so a move knows how many bytes of which tensor it touches, not where. Within a
tensor, the resident bytes are taken to be spread evenly over it (a read of n bytes finds
n x resident / size of them), and eviction takes the oldest bytes first (those resident
before the current task's own fills).

Reads. A task's read of `nbytes` of a tensor whose lowered miss fraction is `cold` (the
misses of its own access pattern when nothing is resident: first reads, and re-reads the
lowering's reuse rule says miss) misses `nbytes x cold x (1 - prior / size)`, where `prior`
is what was resident before this task's own fills (the task's first pass over a byte still
misses even though an earlier tile of the same task brought a neighbour in). The missed
bytes are filled. One exception, LRU's cliff: a scan of a tensor that finds only part of it
resident misses the rest first, and those fills evict the least recently used bytes; when
the missing part of what the task covers (a batch chunk covers a slice) exceeds the room
below the tensor (free bytes plus older tensors) the resident part is evicted just before
the scan reaches it, so the task finds none of it (a 64 MB tensor written through a 32 MB L2
and read back gets no hits, as strict LRU gives). The task's other allocations take the same
room: the misses of its other inputs and the lines its outputs allocate on write fill as the
scan runs, in step with it, so the resident bytes (spread evenly) are read only while the
room lasts, the fraction room / (missing + others) of them, and the rest are evicted ahead
of the scan (`read`, `others`). Without it a tensor-level LRU keeps a resident input whole
because each touch of it makes the whole tensor the most recent, which line-level LRU does
not: an Add of two 100 MB inputs that a warm-up left in a 192 MB L2 gets 87 MB of hits with
the tensor-level rule alone, 1 MB under line-level LRU and 37 MB with `others`. Reads and
writes both allocate on a miss on the A2 (msprof's L2Cache events, PMU 0x500-0x50a:
`write_cache_miss_allocate`, `r0_read_cache_miss_allocate`, `r1_read_cache_miss_allocate`),
and a streaming kernel's read fills push its own output out of L2: Huawei's Add sample
(mirror-cann/asc-devkit `examples/01_simd_cpp_api/04_best_practices/00_vector_compute/
add_high_performance/README.md` at bd79e76, Case 4 against Case 5) runs 264 us with x and y
allocating and 188 us with them bypassing L2, where z's writes then stay in it.
Writes add `nbytes` resident and dirty (up to the tensor's size: writing it again overwrites
the same lines, which stay dirty once).
Whenever resident bytes exceed the capacity, the least recently used tensors give up bytes,
the one being accessed last; the dirty part of what is evicted (in proportion to the
tensor's dirty share) is written back to HBM. `flush()` writes back everything still dirty
at the end of the graph.

Dead tensors. A cache line knows nothing of liveness: the dirty lines of a tensor whose last
reader has finished stay in L2 and are written back when evicted, like any other. Huawei's
L2 guide for the A2/A3 states that a replaced line is first written back to GM "because of
cache coherence" (asc-devkit `docs/zh/guide/算子实践参考/SIMD算子性能优化/内存访问/
设置合理的L2-CacheMode.md`), and the only L2 control on those chips is a per-tensor
allocation hint (`GlobalTensor::SetL2CacheHint`); modes that drop or clean a line without a
write-back (`NOTALLOC_CLEAN`, `NOTALLOC_DROP`) exist only on the Ascend 950
(`reference/kernel-mechanisms.md` section 6). So `retire(name)` (the engine calls it when the
last task reading an intermediate, not a graph output, has finished) marks the tensor's lines
dead and leaves them where they are in the LRU order. What saves a dead tensor's dirty data
from HBM is GE's memory reuse: the assigner hands the freed block to a later tensor
(`lower/memory.py`), whose writes land on the same addresses and so on the same L2 lines,
overwriting the dirty data in L2. Without addresses the model takes that block to be the
most recently used dead one: a write that allocates new bytes of an intermediate
(`write(..., reuse=True)`) takes them from the dead lines, most recently used first, without
a write-back (`dropped_bytes` counts the dirty bytes overwritten so) and without growing the
occupancy. Dead bytes that no later tensor reuses age to the LRU end and are written back
when evicted (`writeback_bytes`), or at the end of the graph (`flush`).

The decisions happen when a move starts; the engine turns miss and write-back bytes into
fabric flows, so they share HBM bandwidth with everything else in flight.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass


def _lost_share(missing: float, others: float, room: float) -> float:
    """The share of a tensor's resident bytes a scan loses to LRU (module note, "LRU's
    cliff"): all when its own missing bytes overflow the room below it; else the part the
    scan reaches after its own misses and the task's `others` allocations have used that
    room up (the resident bytes spread evenly over the scan)."""
    need = missing + others
    if missing > room * (1 + 1e-9):
        return 1.0
    if need <= room * (1 + 1e-9):
        return 0.0
    return 1.0 - room / need


class _Line:
    """Residency of one tensor: bytes resident, dirty, and filled per task still running."""

    __slots__ = ("size", "resident", "dirty", "fills")

    def __init__(self, size: float) -> None:
        self.size = float(size)
        self.resident = 0.0
        self.dirty = 0.0
        self.fills: dict[int, float] = {}   # task id -> bytes its own reads filled


@dataclass
class L2Stats:
    """Byte totals of one simulation's L2 (all cores and streams)."""

    read_bytes: float = 0.0        # GM reads that went through the cache
    hit_bytes: float = 0.0         # ... served by L2
    miss_bytes: float = 0.0        # ... read from HBM
    write_bytes: float = 0.0       # GM writes (all land in L2)
    writeback_bytes: float = 0.0   # dirty bytes written back to HBM on eviction
    flush_bytes: float = 0.0       # dirty bytes written back at the end of the graph
    dropped_bytes: float = 0.0     # dirty bytes of dead tensors overwritten in L2 by a later
    #                                tensor in their block (never written back)
    flush_cycles: int = 0          # cycles the end-of-graph write-back takes after the last task
    peak_resident: float = 0.0     # most bytes resident at once


class L2Cache:
    """LRU, write-back L2 over whole tensors with partial residency (see the module note)."""

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError(f"L2 capacity must be positive, got {capacity}")
        self.capacity = float(capacity)
        self.lines: OrderedDict[str, _Line] = OrderedDict()   # least recently used first
        self.dead: set[str] = set()          # lines of tensors no task will read again
        self.used = 0.0
        self.stats = L2Stats()
        self._touched: dict[int, set[str]] = {}
        self.log: list[float] | None = None    # increments of `used`, in order (replay)

    # -- accesses --------------------------------------------------------------------------
    def read(self, task: int, name: str, size: int, nbytes: float, cold: float,
             span: int | None = None, others: float = 0.0) -> tuple[float, float]:
        """A read of `nbytes` of tensor `name` (`size` bytes) by task `task`, which covers
        `span` bytes of it (default: all); `cold` = its miss fraction with nothing resident;
        `others` = the bytes the task's other tensors will allocate as it runs (LRU's cliff
        in the module note; read on the task's first read of `name` only).
        Returns (bytes from HBM, dirty bytes evicted)."""
        lines = self.lines
        line = lines.get(name)
        if line is None:
            line = self._line(name, size)
        elif task not in line.fills:
            # the task's first read: the part missing misses first; if it overflows the room
            # below this tensor (free bytes and older tensors), LRU evicts the resident part
            # just before the scan reaches it (the LRU cliff), so none of it is usable
            room = self.capacity - self.used
            for other, ln in lines.items():
                if other == name:
                    break
                room += ln.resident
            line = self._line(name, size)
            cover = min(float(span), line.size) if span else line.size
            missing = cover * (1.0 - line.resident / line.size)
            line.fills[task] = line.resident * _lost_share(missing, others, room)
            self._touched.setdefault(task, set()).add(name)
        else:                              # (`_line`, inline)
            if size > line.size:
                line.size = float(size)
            lines.move_to_end(name)
        resident, lsize = line.resident, line.size
        own = line.fills.get(task, 0.0)
        if resident < own:                 # (the `min`s as `min` picks: the first of equals)
            own = resident
        seen = (resident - own) / lsize
        miss = nbytes * cold * (1.0 - (seen if seen < 1.0 else 1.0))
        fill = miss
        room = lsize - resident
        if room < fill:
            fill = room
        if fill > 0:
            line.resident = resident + fill
            line.fills[task] = own + fill
            self._touched.setdefault(task, set()).add(name)
            self.used += fill
            if self.log is not None:
                self.log.append(fill)
        st = self.stats
        st.read_bytes += nbytes
        st.miss_bytes += miss
        st.hit_bytes += nbytes - miss
        used = self.used                   # (`_evict` when nothing is to evict, inline)
        if used <= self.capacity * (1 + 1e-12):
            if used > st.peak_resident:
                st.peak_resident = min(used, self.capacity)
            return miss, 0.0
        return miss, self._evict(name)

    def write(self, task: int, name: str, size: int, nbytes: float, reuse: bool = False) -> float:
        """A write of `nbytes` of tensor `name` (`size` bytes): resident and dirty in L2.
        `reuse`: the tensor is an intermediate, whose block GE may have taken from a dead
        tensor; its new bytes then overwrite dead lines first (see the module note).
        Returns the dirty bytes evicted to make room."""
        line = self._line(name, size)
        add = line.size - line.resident    # (the `min`s as `min` picks: the first of equals)
        if not add < nbytes:
            add = nbytes
        if reuse and add > 0 and self.dead:
            self._overwrite_dead(add)
        line.resident += add
        dirty = line.dirty + nbytes
        line.dirty = dirty if dirty < line.resident else line.resident
        self.used += add
        if self.log is not None and add:
            self.log.append(add)
        self.stats.write_bytes += nbytes
        return self._evict(name)

    def _overwrite_dead(self, nbytes: float) -> None:
        """Free up to `nbytes` of dead lines, most recently used first, without writing their
        dirty bytes back: a new tensor in a reused block overwrites them in L2."""
        lines, dead, st = self.lines, self.dead, self.stats
        for name in reversed([n for n in lines if n in dead]):
            line = lines[name]
            take = line.resident if line.resident < nbytes else nbytes
            if take < line.resident:
                gone = line.dirty * take / line.resident
                line.dirty -= gone
                line.resident -= take
            else:
                gone = line.dirty
                del lines[name]
                dead.discard(name)
            st.dropped_bytes += gone
            self.used -= take
            if self.log is not None and take:
                self.log.append(-take)
            nbytes -= take
            if nbytes <= 0:
                return

    def end_task(self, task: int) -> None:
        """Forget a finished task's fills: its reads are now ordinary resident bytes."""
        for name in self._touched.pop(task, ()):
            line = self.lines.get(name)
            if line is not None:
                line.fills.pop(task, None)

    def flush(self) -> float:
        """Write back everything still dirty (end of the graph); returns the bytes."""
        total = 0.0
        for line in self.lines.values():
            total += line.dirty
            line.dirty = 0.0
        self.stats.flush_bytes += total
        return total

    def retire(self, name: str) -> None:
        """A tensor no task will read again: its lines stay, dead (see the module note)."""
        if name in self.lines:
            self.dead.add(name)

    # -- replay (sim/engine.py: a task run alone, replayed from an identical earlier one) ----
    def resync(self) -> None:
        """Set the occupancy to the sum of the resident bytes (in LRU order): the running
        total drifts from it by float rounding, which would make equal contents unequal
        states. The engine calls it when a task starts."""
        self.used = sum([ln.resident for ln in self.lines.values()])   # (in order, from 0)

    def state(self, roles: dict[str, int]) -> tuple:
        """The whole cache with names replaced by the task's roles (index of a tensor among
        the task's own, -1 for any other): equal states give an identical task identical
        hits, misses and evictions (nothing else decides them; the occupancy is their sum after
        `resync`). Only between tasks (no fills of a running task pending)."""
        get, dead = roles.get, self.dead
        return tuple([(get(n, -1), ln.size, ln.resident, ln.dirty, n in dead)
                      for n, ln in self.lines.items()])

    def roomy(self, sizes: dict[str, int]) -> bool:
        """Whether a task touching only tensors `sizes` (name -> largest size it names) can
        fill them all without evicting anything (so no line but its own, and the dead lines
        its writes may overwrite (`dead_tail`), can matter)."""
        grow = 0.0
        for n, size in sizes.items():
            ln = self.lines.get(n)
            grow += max(size, ln.size) - ln.resident if ln is not None else max(size, 1)
        return self.used + grow <= self.capacity

    def dead_tail(self, nbytes: float) -> list[str]:
        """The dead lines a task writing at most `nbytes` of intermediates may overwrite:
        most recently used first, until their resident bytes reach `nbytes`."""
        out: list[str] = []
        if nbytes <= 0 or not self.dead:
            return out
        dead, total = self.dead, 0.0
        for n in reversed(self.lines):
            if n in dead:
                out.append(n)
                total += self.lines[n].resident
                if total >= nbytes:
                    break
        return out

    def own_state(self, roles: dict[str, int], tail: list[str] = ()) -> tuple:
        """The task's own tensors by role: (size, resident, dirty) or None when absent; and
        the dead lines of `tail` (`dead_tail`) in order."""
        out = [None] * len(roles)
        for n, r in roles.items():
            ln = self.lines.get(n)
            if ln is not None:
                out[r] = (ln.size, ln.resident, ln.dirty)
        lines = self.lines
        return (tuple(out),
                tuple((lines[n].size, lines[n].resident, lines[n].dirty) for n in tail))

    def own_transition(self, before: list[str], roles: dict[str, int],
                       tail: list[str] = ()) -> tuple | None:
        """After a task that evicted nothing: its own lines (role, size, resident, dirty) in
        their final order at the recent end, the other lines untouched in `before`'s order
        but for the dead lines of `tail` it overwrote ((resident, dirty), or None when gone),
        and the increments of `used` (`log`); None if the cache is not in that form."""
        lines = self.lines
        gone = [n for n in tail if n not in lines]
        others = [n for n in before if n not in roles and n not in gone]
        names = list(lines)
        if names[:len(others)] != others or any(n not in roles for n in names[len(others):]):
            return None
        own = tuple((roles[n], lines[n].size, lines[n].resident, lines[n].dirty)
                    for n in names[len(others):])
        dead = tuple((lines[n].resident, lines[n].dirty) if n in lines else None for n in tail)
        return own, tuple(self.log or ()), dead

    def apply_own(self, transition: tuple, roles: list[str], tail: list[str] = ()) -> None:
        """Replay an `own_transition` (`roles`: the replaying task's own names by role;
        `tail`: its `dead_tail`)."""
        own, increments, dead = transition
        for name, after in zip(tail, dead):
            if after is None:
                del self.lines[name]
                self.dead.discard(name)
            else:
                ln = self.lines[name]
                ln.resident, ln.dirty = after
        for role, size, resident, dirty in own:
            name = roles[role]
            ln = self.lines.pop(name, None) or _Line(size)
            ln.size, ln.resident, ln.dirty = size, resident, dirty
            self.lines[name] = ln
            self.dead.discard(name)
        for d in increments:
            self.used += d
        st = self.stats
        if self.used > st.peak_resident:
            st.peak_resident = min(self.used, self.capacity)

    def transition(self, before: list[str], roles: dict[str, int]) -> tuple | None:
        """The cache now, each line named by its position in `before` (the line order when
        the task started) or by its role; None if a new line is none of the task's own."""
        pos = {n: i for i, n in enumerate(before)}
        out = []
        for n, ln in self.lines.items():
            if n in pos:
                out.append((pos[n], -1, ln.size, ln.resident, ln.dirty))
            elif n in roles:
                out.append((-1, roles[n], ln.size, ln.resident, ln.dirty))
            else:
                return None
        return self.used, tuple(out)

    def apply(self, transition: tuple, roles: list[str]) -> None:
        """Set the cache to a recorded `transition` of the current line order (`roles`: the
        replaying task's own tensor names by role)."""
        before = list(self.lines)
        used, entries = transition
        lines: OrderedDict[str, _Line] = OrderedDict()
        make = _Line.__new__
        for at, role, size, resident, dirty in entries:
            ln = make(_Line)             # (`_Line(size)`: `size` is a float already)
            ln.size, ln.resident, ln.dirty, ln.fills = size, resident, dirty, {}
            lines[before[at] if at >= 0 else roles[role]] = ln
        self.lines, self.used = lines, used
        self.dead &= lines.keys()

    def copy(self) -> L2Cache:
        """An independent copy (lines, fills, occupancy, touched sets, stats; no replay log):
        the fast-forward tries a period's accesses on it before making them for real."""
        new = L2Cache.__new__(L2Cache)
        new.capacity, new.used, new.log = self.capacity, self.used, None
        new.dead = set(self.dead)
        stats = new.stats = L2Stats.__new__(L2Stats)
        stats.__dict__.update(self.stats.__dict__)
        new._touched = {t: set(names) for t, names in self._touched.items()}
        lines: OrderedDict[str, _Line] = OrderedDict()
        make = _Line.__new__
        for name, ln in self.lines.items():
            c = lines[name] = make(_Line)
            c.size, c.resident, c.dirty, c.fills = ln.size, ln.resident, ln.dirty, dict(ln.fills)
        new.lines = lines
        return new

    # -- queries ---------------------------------------------------------------------------
    def first_read(self, task: int, name: str) -> bool:
        """Whether task `task` has not read resident tensor `name` yet (its next read of it
        meets LRU's cliff, `read`)."""
        line = self.lines.get(name)
        return line is not None and task not in line.fills

    def resident(self, name: str) -> float:
        """Bytes of `name` resident now."""
        line = self.lines.get(name)
        return line.resident if line is not None else 0.0

    def dirty(self, name: str) -> float:
        """Bytes of `name` resident and not yet written back."""
        line = self.lines.get(name)
        return line.dirty if line is not None else 0.0

    # -- internals -------------------------------------------------------------------------
    def _line(self, name: str, size: int) -> _Line:
        line = self.lines.get(name)
        if name in self.dead:              # (a name met again: live once more)
            self.dead.discard(name)
        if line is None:
            line = self.lines[name] = _Line(max(size, 1))
        else:
            if size > line.size:      # a batch chunk saw a slice first; the whole came later
                line.size = float(size)
            self.lines.move_to_end(name)
        return line

    def _evict(self, keep: str) -> float:
        """Evict least recently used bytes until the capacity holds; `keep` (just accessed,
        the most recent) goes last. Returns the dirty bytes written back."""
        st = self.stats
        used = self.used
        if used > st.peak_resident:
            st.peak_resident = min(used, self.capacity)
        if used <= self.capacity * (1 + 1e-12):
            return 0.0                      # (nothing to evict: writeback_bytes + 0.0 as is)
        written = 0.0
        while self.used > self.capacity * (1 + 1e-12):
            name, line = next(iter(self.lines.items()))
            take = self.used - self.capacity
            if line.resident < take:        # (`min`: the first of equals)
                take = line.resident
            if take < line.resident:        # part of the oldest tensor goes
                dirty = line.dirty * take / line.resident
                line.dirty -= dirty
                line.resident -= take
                self.used -= take
                written += dirty
                break
            written += line.dirty           # all of it goes
            self.used -= line.resident
            if name == keep:                # (only when nothing else is left)
                line.resident = line.dirty = 0.0
                line.fills.clear()
                break
            del self.lines[name]
            self.dead.discard(name)
        st.writeback_bytes += written
        return written

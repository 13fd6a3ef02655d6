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
and read back gets no hits, as strict LRU gives). Writes add `nbytes` resident and dirty (up
to the tensor's size: writing it again overwrites the same lines, which stay dirty once).
Whenever resident bytes exceed the capacity, the least recently used tensors give up bytes,
the one being accessed last; the dirty part of what is evicted (in proportion to the
tensor's dirty share) is written back to HBM. `flush()` writes back everything still dirty
at the end of the graph.

Dead tensors. `drop(name)` forgets a tensor without writing it back; the engine calls it when
the last task reading an intermediate (not a graph output) has finished. GE's memory
assigner hands a freed block to a later tensor (`lower/memory.py`), whose writes overwrite
those lines, so a dead tensor's dirty data never reaches HBM; the model frees the lines at
once instead of at the overwrite (a freed block that is not reused before it would be
evicted is the case this gets wrong: it would be written back).

The decisions happen when a move starts; the engine turns miss and write-back bytes into
fabric flows, so they share HBM bandwidth with everything else in flight.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass


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
    dropped_bytes: float = 0.0     # dirty bytes of dead tensors, never written back
    flush_cycles: int = 0          # cycles the end-of-graph write-back takes after the last task
    peak_resident: float = 0.0     # most bytes resident at once


class L2Cache:
    """LRU, write-back L2 over whole tensors with partial residency (see the module note)."""

    def __init__(self, capacity: int) -> None:
        if capacity <= 0:
            raise ValueError(f"L2 capacity must be positive, got {capacity}")
        self.capacity = float(capacity)
        self.lines: OrderedDict[str, _Line] = OrderedDict()   # least recently used first
        self.used = 0.0
        self.stats = L2Stats()
        self._touched: dict[int, set[str]] = {}
        self.log: list[float] | None = None    # increments of `used`, in order (replay)

    # -- accesses --------------------------------------------------------------------------
    def read(self, task: int, name: str, size: int, nbytes: float, cold: float,
             span: int | None = None) -> tuple[float, float]:
        """A read of `nbytes` of tensor `name` (`size` bytes) by task `task`, which covers
        `span` bytes of it (default: all); `cold` = its miss fraction with nothing resident.
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
            lost = cover * (1.0 - line.resident / line.size) > room * (1 + 1e-9)
            line.fills[task] = line.resident if lost else 0.0
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

    def write(self, task: int, name: str, size: int, nbytes: float) -> float:
        """A write of `nbytes` of tensor `name` (`size` bytes): resident and dirty in L2.
        Returns the dirty bytes evicted to make room."""
        line = self._line(name, size)
        add = line.size - line.resident    # (the `min`s as `min` picks: the first of equals)
        if not add < nbytes:
            add = nbytes
        line.resident += add
        dirty = line.dirty + nbytes
        line.dirty = dirty if dirty < line.resident else line.resident
        self.used += add
        if self.log is not None and add:
            self.log.append(add)
        self.stats.write_bytes += nbytes
        return self._evict(name)

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

    def drop(self, name: str) -> None:
        """Forget a dead tensor: its lines are free, its dirty bytes never written back."""
        line = self.lines.pop(name, None)
        if line is not None:
            self.used -= line.resident
            self.stats.dropped_bytes += line.dirty

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
        get = roles.get
        return tuple([(get(n, -1), ln.size, ln.resident, ln.dirty)
                      for n, ln in self.lines.items()])

    def roomy(self, sizes: dict[str, int]) -> bool:
        """Whether a task touching only tensors `sizes` (name -> largest size it names) can
        fill them all without evicting anything (so no line but its own can matter)."""
        grow = 0.0
        for n, size in sizes.items():
            ln = self.lines.get(n)
            grow += max(size, ln.size) - ln.resident if ln is not None else max(size, 1)
        return self.used + grow <= self.capacity

    def own_state(self, roles: dict[str, int]) -> tuple:
        """The task's own tensors by role: (size, resident, dirty) or None when absent."""
        out = [None] * len(roles)
        for n, r in roles.items():
            ln = self.lines.get(n)
            if ln is not None:
                out[r] = (ln.size, ln.resident, ln.dirty)
        return tuple(out)

    def own_transition(self, before: list[str], roles: dict[str, int]) -> tuple | None:
        """After a task that evicted nothing: its own lines (role, size, resident, dirty) in
        their final order at the recent end, the other lines untouched in `before`'s order,
        and the increments of `used` (`log`); None if the cache is not in that form."""
        others = [n for n in before if n not in roles]
        names = list(self.lines)
        if names[:len(others)] != others or any(n not in roles for n in names[len(others):]):
            return None
        own = tuple((roles[n], self.lines[n].size, self.lines[n].resident, self.lines[n].dirty)
                    for n in names[len(others):])
        return own, tuple(self.log or ())

    def apply_own(self, transition: tuple, roles: list[str]) -> None:
        """Replay an `own_transition` (`roles`: the replaying task's own names by role)."""
        own, increments = transition
        for role, size, resident, dirty in own:
            name = roles[role]
            ln = self.lines.pop(name, None) or _Line(size)
            ln.size, ln.resident, ln.dirty = size, resident, dirty
            self.lines[name] = ln
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

    def copy(self) -> L2Cache:
        """An independent copy (lines, fills, occupancy, touched sets, stats; no replay log):
        the fast-forward tries a period's accesses on it before making them for real."""
        new = L2Cache.__new__(L2Cache)
        new.capacity, new.used, new.log = self.capacity, self.used, None
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
        st.writeback_bytes += written
        return written

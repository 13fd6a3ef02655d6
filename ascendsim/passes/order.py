"""Re-sorting a fusion pass's graph after a commit, as `Graph.toposort` would, in time
proportional to the part of the order that changes.

`Graph.toposort` is Kahn's algorithm with a first-in first-out ready queue, a node's readers
taken in the current order. Its result P from an order O is characterised by one number per
node, its *release* R: the position of its latest producer (-1 for a node that reads no
node's output). The queue holds nodes in the order they became ready, i.e. by (R in P,
position in O). Hence (proof below):

* O is its own re-sort (Kahn(O) = O) exactly when O is topological (R(i) < i) and R never
  decreases along O (no later node was released before an earlier one).
* Kahn(O) starts with O's prefix up to the first position j0 where one of the two fails.

A commit changes R only for the fused node and its readers, so after a commit the order is
mostly its own re-sort. `IncrementalOrder` keeps R in a segment tree over the positions (min,
max, "an inversion inside", max of R(i) - i, live count), finds j0 in O(log n), runs Kahn from
the state at j0 (the ready queue is every node at or after j0 released before j0, by (R,
position)) until the nodes placed are exactly the live nodes of a position range [j0, k),
permutes that range, and repeats from the next violation, which lies at or after k. When
there is none, the order is Kahn's: positions outside the changed ranges keep their nodes.

Why the windows compose: after the window the state of Kahn run on O (the nodes placed, the
pending counts, the queue) equals that of Kahn run on the permuted order O' at step k; the
queue and every later tie are nodes at positions >= k, whose position is the same in O and O'.
So Kahn(O) = Kahn(O'), and Kahn(O') keeps O' up to its first violation, which is after k.

Positions are the FusionGraph's indices (with the holes commits leave), never renumbered.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import deque
from collections.abc import Iterable

import numpy as np

from ..errors import GraphError

#: "no value" in the tree (larger/smaller than every position)
INF = 1 << 62


class ReleaseTree:
    """Segment tree over positions: per subtree the min and max release, whether some
    position has a later position with a smaller release inside it, max(R(i) - i) and the
    number of live positions. A hole has no release."""

    def __init__(self, rel: list[int | None]) -> None:
        n = len(rel)
        size = 1
        while size < max(n, 1):
            size *= 2
        self.size = size
        live = np.zeros(2 * size, dtype=bool)
        r = np.zeros(2 * size, dtype=np.int64)
        present = [i for i, x in enumerate(rel) if x is not None]
        live[np.asarray(present, dtype=np.int64) + size] = True
        r[np.asarray(present, dtype=np.int64) + size] = [rel[i] for i in present]
        mn = np.where(live, r, INF)
        mx = np.where(live, r, -INF)
        tp = np.where(live, r - (np.arange(2 * size) - size), -INF)
        cnt = live.astype(np.int64)
        inv = np.zeros(2 * size, dtype=bool)
        h = size // 2
        while h >= 1:
            lo, hi = 2 * h, 4 * h
            mn[h:2 * h] = np.minimum(mn[lo:hi:2], mn[lo + 1:hi:2])
            mx[h:2 * h] = np.maximum(mx[lo:hi:2], mx[lo + 1:hi:2])
            tp[h:2 * h] = np.maximum(tp[lo:hi:2], tp[lo + 1:hi:2])
            cnt[h:2 * h] = cnt[lo:hi:2] + cnt[lo + 1:hi:2]
            inv[h:2 * h] = inv[lo:hi:2] | inv[lo + 1:hi:2] | (mx[lo:hi:2] > mn[lo + 1:hi:2])
            h //= 2
        self.mn, self.mx, self.tp = mn.tolist(), mx.tolist(), tp.tolist()
        self.cnt, self.inv = cnt.tolist(), inv.tolist()

    def set(self, changes: dict[int, int | None]) -> None:
        """Give positions new releases (None: a hole) and update their ancestors."""
        size, mn, mx, tp, cnt, inv = self.size, self.mn, self.mx, self.tp, self.cnt, self.inv
        parents = set()
        for i, r in changes.items():
            k = size + i
            if r is None:
                mn[k], mx[k], tp[k], cnt[k] = INF, -INF, -INF, 0
            else:
                mn[k], mx[k], tp[k], cnt[k] = r, r, r - i, 1
            parents.add(k >> 1)
        while parents and 0 not in parents:
            up = set()
            for k in parents:
                a, b = 2 * k, 2 * k + 1
                mn[k] = mn[a] if mn[a] < mn[b] else mn[b]
                mx[k] = mx[a] if mx[a] > mx[b] else mx[b]
                tp[k] = tp[a] if tp[a] > tp[b] else tp[b]
                cnt[k] = cnt[a] + cnt[b]
                inv[k] = inv[a] or inv[b] or mx[a] > mn[b]
                up.add(k >> 1)
            parents = up

    def first_violation(self) -> int | None:
        """The first position that is not topological (R(i) >= i) or has a later position
        with a smaller release; None when the order is its own re-sort."""
        size, mn, mx, inv, tp = self.size, self.mn, self.mx, self.inv, self.tp
        best = None
        if inv[1]:
            k, m = 1, INF                # m: the smallest release right of node k
            while k < size:
                a, b = 2 * k, 2 * k + 1
                mb = mn[b] if mn[b] < m else m
                if inv[a] or mx[a] > mb:
                    k, m = a, mb
                else:
                    k = b
            best = k - size
        if tp[1] >= 0:
            k = 1
            while k < size:
                k = 2 * k if tp[2 * k] >= 0 else 2 * k + 1
            if best is None or k - size < best:
                best = k - size
        return best

    def released_before(self, start: int) -> list[int]:
        """Live positions >= start whose release is < start, ascending."""
        size, mn = self.size, self.mn
        out: list[int] = []
        stack = [(1, 0, size)]
        while stack:
            k, lo, hi = stack.pop()
            if hi <= start or mn[k] >= start:
                continue
            if k >= size:
                out.append(lo)
                continue
            mid = (lo + hi) // 2
            stack.append((2 * k + 1, mid, hi))
            stack.append((2 * k, lo, mid))
        return out

    def count(self, lo: int, hi: int) -> int:
        """Live positions in [lo, hi]."""
        size, cnt = self.size, self.cnt
        a, b = lo + size, hi + size + 1
        total = 0
        while a < b:
            if a & 1:
                total += cnt[a]
                a += 1
            if b & 1:
                b -= 1
                total += cnt[b]
            a >>= 1
            b >>= 1
        return total


class IncrementalOrder:
    """The release tree of a `FusionGraph` and the windowed re-sort (see the module note).
    `fg` provides `nodes` (with holes), `index`, `producer`, `readers`, `succ`."""

    def __init__(self, fg) -> None:
        self.fg = fg
        rel: list[int | None] = [None if n is None else -1 for n in fg.nodes]
        for i, s in enumerate(fg.succ):
            for u in s:             # ascending i: the last write is the latest producer
                rel[u] = i
        self.rel = rel
        self.tree = ReleaseTree(rel)
        self._dirty: set[int] = set()

    def _release(self, node) -> int:
        producer = self.fg.producer
        return max((producer[v] for v in node.inputs if v in producer), default=-1)

    def touch(self, positions: Iterable[int]) -> None:
        """These positions changed node or producers (a commit); updated before the next use."""
        self._dirty.update(positions)

    def _flush(self) -> None:
        if not self._dirty:
            return
        nodes, rel = self.fg.nodes, self.rel
        changes: dict[int, int | None] = {}
        for i in self._dirty:
            r = None if nodes[i] is None else self._release(nodes[i])
            if r != rel[i] or nodes[i] is None:
                rel[i] = r
                changes[i] = r
        self._dirty.clear()
        if changes:
            self.tree.set(changes)

    def resort(self) -> bool:
        """Re-order `fg` as Kahn's algorithm would; False when the graph has a cycle (nothing
        was changed then: the caller asks `Graph.toposort` for the error)."""
        self._flush()
        done = 0                      # positions before this are Kahn's (module note)
        while True:
            j0 = self.tree.first_violation()
            if j0 is None:
                return True
            if j0 < done:
                raise GraphError(f"internal error in the incremental re-sort: position {j0} "
                                 f"is out of order after the range up to {done} was placed")
            window = self._kahn_from(j0)
            if window is None:
                return False
            self._apply(window)
            self._flush()
            done = max(window) + 1

    def _kahn_from(self, j0: int) -> list[int] | None:
        """Kahn's order of the nodes from position j0 on, run until the nodes placed are the
        live positions of a range [j0, k); their old positions in the new order."""
        fg, tree, rel = self.fg, self.tree, self.rel
        nodes, succ, producer = fg.nodes, fg.succ, fg.producer
        ready = tree.released_before(j0)
        ready.sort(key=rel.__getitem__)           # stable: (release, position)
        queue = deque(ready)
        pending: dict[int, int] = {}
        out: list[int] = []
        last = j0 - 1
        while queue:
            u = queue.popleft()
            out.append(u)
            if u > last:
                last = u
            for s in succ[u]:
                p = pending.get(s)
                if p is None:           # first producer of s placed: count the others
                    p = len({producer[v] for v in nodes[s].inputs
                             if v in producer and producer[v] >= j0})
                p -= 1
                pending[s] = p
                if p == 0:
                    queue.append(s)
            if len(out) == tree.count(j0, last):
                return out
        return None

    def _apply(self, order: list[int]) -> None:
        """Place the nodes at old positions `order` into those positions, sorted, in order."""
        fg = self.fg
        nodes, succ, producer, readers, index = fg.nodes, fg.succ, fg.producer, fg.readers, \
            fg.index
        slots = sorted(order)
        new = {o: s for o, s in zip(order, slots) if o != s}
        if not new:
            return
        moved = [(o, nodes[o], succ[o]) for o in new]
        at = new.get
        # lists that name a moved position: the moved nodes' own successor lists, their
        # producers' successor lists, the reader lists of the values they read
        producer_before = {v: producer[v] for _, n, _ in moved for v in n.inputs
                           if v in producer}
        for o, n, _ in moved:
            p = new[o]
            nodes[p] = n
            fg.place(p, n)
            index[n.name] = p
            for v in n.outputs:
                if v:
                    producer[v] = p
        for o, _, s in moved:
            succ[new[o]] = sorted(at(x, x) for x in s)
        # a list naming a moved reader holds its old position once (lists are sorted and
        # duplicate-free): replace those entries in place (bisect), not the whole list
        # re-mapped and re-sorted (a value read by hundreds of nodes)
        pred_moves: dict[int, list[int]] = {}
        value_moves: dict[str, list[int]] = {}
        for o, n, _ in moved:
            ins = {v for v in n.inputs if v}
            for v in ins:
                value_moves.setdefault(v, []).append(o)
            for q in {producer_before[v] for v in ins if v in producer_before}:
                if q not in new:
                    pred_moves.setdefault(q, []).append(o)
        for q, olds in pred_moves.items():
            _replace_sorted(succ[q], olds, new)
        for v, olds in value_moves.items():
            _replace_sorted(readers[v], olds, new)
        # releases: the moved nodes and the readers of what they write
        self._dirty.update(new.values())
        for _, n, _ in moved:
            self._dirty.update(succ[index[n.name]])


def _replace_sorted(positions: list[int], olds: list[int], new: dict[int, int]) -> None:
    """In a sorted duplicate-free list holding each of `olds` once, replace every old position
    by `new[old]`, keeping the list sorted (what re-mapping and re-sorting it gives)."""
    for o in olds:
        del positions[bisect_left(positions, o)]
    for o in olds:
        insort(positions, new[o])


__all__ = ["IncrementalOrder", "ReleaseTree"]

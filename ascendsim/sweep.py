"""Design-space sweeps: every point of a chip grid x fusion options x graphs, on any executor.

`sweep(graphs, chip, grid={"ub_bytes": [...], ...}, fusion=[True, False])` simulates each point
(`ascendsim.api.optimize` then `ascendsim.api.simulate` of the optimised graph as given, exactly
what `simulate(graph, chip, fusion=...)` does) and returns a `SweepResult` of records.

Note on reuse
-------------
Optimising a graph is a large part of a run, and most chip figures cannot change what the
passes decide. Which figures can is found by watching, not by a hand-kept list: the graph is
optimised for a chip that records every figure read through it (by the passes via
`ctx.chip`, and by the L2 pass's cost model, which lowers and simulates candidates on that
chip). The optimised graph is then reused for any later point whose chip has the same values
for all those figures. That is sound because the passes are deterministic functions of the
graph, the options and the figures they read: a chip that agrees on everything read takes the
same path and produces the same graph. A graph is only reused inside one worker process (a
small cache per worker), so reuse never crosses machines and never changes a number: the test
suite compares reused points with fresh `simulate` runs.

Identity and resume
-------------------
A point's id is a hash of the graph's structure (nodes, attributes, shapes, dtypes, constant
descriptions), every chip figure (not the sources), the fusion option, the detail and the launch
mode. Rows are appended to `out` (CSV) as points finish, each flushed whole, so a sweep stopped
half-way (Ctrl-C, or killed) and started again with the same arguments runs only the points
missing from the file. A last line a kill cut short is dropped (its point runs again); a corrupt
line elsewhere (wrong field count, a result that is not a number, a point written twice) is a
ConfigError naming the file and the line.

Executors
---------
`executor` is any `concurrent.futures.Executor`; the default is a local process pool with
`os.cpu_count()` workers. On a Dask cluster pass `client.get_executor()`. Graphs and chips are
sent to the workers by pickling (`Chip` and lazy constants pickle; so must the user's graphs).
"""

from __future__ import annotations

import csv
import dataclasses
import difflib
import hashlib
import io
import itertools
import json
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Executor, Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .api import DEFAULT_CHIP, DEFAULT_DETAIL, DEFAULT_MODE
from .errors import AscendSimError, ConfigError, GraphError
from .hw import Chip, get_chip
from .ir import Graph
from .ir.identity import canon as _canon
from .ir.identity import graph_key

#: result columns every row carries after the point's identity, grid and fusion columns
RESULT_COLUMNS = ("time_us", "cycles", "tasks", "nodes", "ddr_bytes", "l2_bytes",
                  "ddr_read_bytes", "ddr_write_bytes", "l2_read_bytes", "l2_write_bytes")
_INT_RESULTS = frozenset(RESULT_COLUMNS) - {"time_us"}
#: optimised graphs a worker process keeps for reuse (a few models x fusion options)
WORKER_CACHE_SIZE = 4
#: the CSV a sweep appends to unless told otherwise
DEFAULT_OUT = "sweep.csv"


# ----------------------------------------------------------------------------- identity
def chip_key(chip: Chip) -> str:
    """A stable hash of every chip figure (name and description included, sources not)."""
    figures = tuple((f.name, _canon(getattr(chip, f.name))) for f in dataclasses.fields(chip)
                    if f.name != "sources")
    return hashlib.sha256(repr(figures).encode()).hexdigest()


def fusion_label(fusion: Any) -> str:
    """How a fusion option is written in the CSV: "True", "False", JSON of a dict, or a path."""
    if isinstance(fusion, bool):
        return str(fusion)
    if isinstance(fusion, Mapping):
        return json.dumps(fusion, sort_keys=True, default=str)
    return str(fusion)


def _fusion_key(fusion: Any) -> str:
    label = fusion_label(fusion)
    if isinstance(fusion, (str, os.PathLike)) and Path(fusion).is_file():
        label += ":" + hashlib.sha256(Path(fusion).read_bytes()).hexdigest()
    return label


def point_id(graph_hash: str, chip: Chip, fusion: Any, detail: str, mode: str) -> str:
    """The identity of one sweep point (16 hex digits)."""
    raw = repr((graph_hash, chip_key(chip), _fusion_key(fusion), detail, mode))
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


# ----------------------------------------------------------------------------- the worker
class _ReadRecorder(Chip):
    """A `Chip` that records the names of the figures read through it (see Note on reuse)."""

    def __getattribute__(self, name: str) -> Any:
        reads = object.__getattribute__(self, "__dict__").get("_reads")
        if reads is not None and name in _FIELD_NAMES:
            reads.add(name)
        return object.__getattribute__(self, name)


_FIELD_NAMES = frozenset(f.name for f in dataclasses.fields(Chip)) - {"sources"}


def recording_chip(chip: Chip) -> _ReadRecorder:
    """A copy of `chip` that records which figures are read (`reads_of(copy)`)."""
    figures = {f.name: getattr(chip, f.name) for f in dataclasses.fields(chip)
               if f.name != "sources"}
    rec = _ReadRecorder(**figures, sources=dict(chip.sources))
    object.__setattr__(rec, "_reads", set())
    return rec


def reads_of(rec: _ReadRecorder) -> frozenset[str]:
    return frozenset(object.__getattribute__(rec, "__dict__")["_reads"])


@dataclass(frozen=True)
class _Job:
    """One point: its id, chip and fusion option."""

    point: str
    chip: Chip
    fusion: Any


@dataclass(frozen=True)
class _Batch:
    """Points of one graph a worker runs one after the other (pickled to the worker), so
    that points whose chips differ only in figures the passes do not read share one
    optimised graph."""

    graph: Graph
    graph_hash: str
    detail: str
    mode: str
    jobs: tuple[_Job, ...]


# per worker process: (graph hash, fusion key, detail, mode) -> [(figures read, graph), ...]
_OPT_CACHE: OrderedDict[tuple, list[tuple[dict[str, Any], Graph]]] = OrderedDict()
_CACHE_LOCK = threading.Lock()      # thread-pool executors share the cache


def _cached(key: tuple, chip: Chip) -> Graph | None:
    with _CACHE_LOCK:
        for figures, graph in _OPT_CACHE.get(key, []):
            if all(getattr(chip, k) == v for k, v in figures.items()):
                _OPT_CACHE.move_to_end(key)
                return graph
    return None


def _remember(key: tuple, figures: dict[str, Any], graph: Graph) -> None:
    with _CACHE_LOCK:
        _OPT_CACHE.setdefault(key, []).append((figures, graph))
        _OPT_CACHE.move_to_end(key)
        while sum(len(v) for v in _OPT_CACHE.values()) > WORKER_CACHE_SIZE:
            oldest = next(iter(_OPT_CACHE))
            _OPT_CACHE[oldest].pop(0)
            if not _OPT_CACHE[oldest]:
                del _OPT_CACHE[oldest]


def _optimised(batch: _Batch, job: _Job, options: dict[str, Any]) -> tuple[Graph, bool]:
    """The optimised graph for the job's chip, from this worker's cache when every figure the
    passes read has the same value on this chip; otherwise optimised now (and cached)."""
    from .api import optimize

    key = (batch.graph_hash, _fusion_key(job.fusion), batch.detail, batch.mode)
    graph = _cached(key, job.chip)
    if graph is not None:
        return graph, True
    rec = recording_chip(job.chip)
    opt = optimize(batch.graph, rec, detail=batch.detail, mode=batch.mode, **options)
    _remember(key, {k: getattr(job.chip, k) for k in reads_of(rec)}, opt.graph)
    return opt.graph, False


def run_point(batch: _Batch, job: _Job) -> dict[str, Any]:
    """Simulate one point; returns its result columns (plus "reused": whether the optimised
    graph came from this worker's cache, and "error" when it failed with an AscendSimError)."""
    from .api import fusion_options, simulate

    try:
        options = fusion_options(job.fusion)
        graph, reused = ((batch.graph, False) if options is None
                         else _optimised(batch, job, options))
        res = simulate(graph, job.chip, fusion=False, detail=batch.detail, mode=batch.mode)
    except AscendSimError as e:
        return {"point": job.point, "error": f"{type(e).__name__}: {e}"}
    traffic: dict[tuple[str, str], int] = {}
    for task in res.trace.tasks:
        for k, b in task.traffic.items():
            traffic[k] = traffic.get(k, 0) + int(b)
    row = {"point": job.point, "time_us": res.time_us, "cycles": res.cycles,
           "tasks": len(res.trace.tasks), "nodes": len(graph.nodes)}
    for level in ("DDR", "L2"):
        r, w = traffic.get((level, "read"), 0), traffic.get((level, "write"), 0)
        row[f"{level.lower()}_read_bytes"], row[f"{level.lower()}_write_bytes"] = r, w
        row[f"{level.lower()}_bytes"] = r + w
    row["reused"] = reused
    return row


def run_batch(batch: _Batch) -> list[dict[str, Any]]:
    """Run a batch's points in order (module-level so that executors can pickle it)."""
    return [run_point(batch, job) for job in batch.jobs]


# ----------------------------------------------------------------------------- the result
@dataclass
class SweepResult:
    """The rows of a sweep (one record per point, in grid order) and where they were written.

    Columns: point, graph, one per grid field, fusion, then `RESULT_COLUMNS`."""

    rows: list[dict[str, Any]]
    columns: list[str]
    grid: dict[str, list[Any]]
    out: str | None = None
    errors: dict[str, str] = field(default_factory=dict)   # point -> message (not written)
    reused: int = 0                                         # points with a reused graph
    resumed: int = 0                                        # points read back from `out`

    def __len__(self) -> int:
        return len(self.rows)

    def _check_column(self, col: str) -> None:
        if col not in self.columns:
            raise ConfigError(f"unknown sweep column {col!r}; columns are "
                              f"{', '.join(self.columns)}")

    def to_pandas(self):
        """The rows as a pandas DataFrame (pandas is the optional extra `ascendsim[sweep]`)."""
        try:
            import pandas as pd
        except ImportError:
            raise ConfigError("SweepResult.to_pandas() needs pandas: pip install "
                              "'ascendsim[sweep]' (or pandas); .rows has the same records"
                              ) from None
        return pd.DataFrame(self.rows, columns=self.columns)

    def pareto(self, x_col: str, y_col: str,
               minimize: tuple[bool, bool] = (True, True)) -> list[dict[str, Any]]:
        """The rows no other row beats on both columns (each minimised or maximised), by x."""
        for col in (x_col, y_col):
            self._check_column(col)
        sx, sy = (1 if m else -1 for m in minimize)
        pts = sorted(self.rows, key=lambda r: (sx * float(r[x_col]), sy * float(r[y_col])))
        front, best = [], float("inf")
        for r in pts:
            y = sy * float(r[y_col])
            if y < best:
                front.append(r)
                best = y
        return front

    def plot_pareto(self, x_col: str, y_col: str, path: str | None = None,
                    minimize: tuple[bool, bool] = (True, True)):
        """Every point as a dot and the Pareto front over two result (or grid) columns."""
        from matplotlib.figure import Figure

        front = self.pareto(x_col, y_col, minimize)
        fig = Figure(figsize=(6.5, 4.5), dpi=110, layout="constrained")
        ax = fig.add_subplot()
        ax.scatter([float(r[x_col]) for r in self.rows], [float(r[y_col]) for r in self.rows],
                   s=14, color="0.6", label="points")
        ax.plot([float(r[x_col]) for r in front], [float(r[y_col]) for r in front], "o-",
                color="tab:red", label="Pareto front")
        ax.set_xlabel(x_col)
        ax.set_ylabel(y_col)
        ax.legend(fontsize="small")
        ax.set_title(f"{len(self.rows)} points, {len(front)} on the front", fontsize="medium")
        if path:
            fig.savefig(path)
        return fig

    def plot_heatmap(self, x: str, y: str, value: str = "time_us", path: str | None = None):
        """`value` over two columns, one panel per combination of the other varying columns
        (e.g. fusion on and off side by side)."""
        from matplotlib.figure import Figure

        for col in (x, y, value):
            self._check_column(col)
        fixed = ["graph", "fusion", *self.grid]
        others = [c for c in fixed if c not in (x, y)
                  and len({_label(r[c]) for r in self.rows}) > 1]
        panels: dict[tuple, list[dict]] = {}
        for r in self.rows:
            panels.setdefault(tuple(_label(r[c]) for c in others), []).append(r)
        xs = _ordered({_label(r[x]): r[x] for r in self.rows})
        ys = _ordered({_label(r[y]): r[y] for r in self.rows})
        vals = [float(r[value]) for r in self.rows]
        lo, hi = min(vals), max(vals)
        fig = Figure(figsize=(1.2 + 4.6 * len(panels), 4.2), dpi=110, layout="constrained")
        axes = fig.subplots(1, len(panels), squeeze=False)[0]
        image = None
        for ax, (key, rows) in zip(axes, panels.items()):
            grid = np.full((len(ys), len(xs)), np.nan)
            for r in rows:
                grid[ys.index(_label(r[y])), xs.index(_label(r[x]))] = float(r[value])
            image = ax.imshow(grid, origin="lower", aspect="auto", cmap="viridis",
                              vmin=lo, vmax=hi)
            ax.set_xticks(range(len(xs)), [_short(v) for v in xs], rotation=45, fontsize=7)
            ax.set_yticks(range(len(ys)), [_short(v) for v in ys], fontsize=7)
            ax.set_xlabel(x)
            ax.set_ylabel(y)
            if len(xs) * len(ys) <= 144:
                for (i, j), v in np.ndenumerate(grid):
                    if np.isfinite(v):
                        text = f"{v:.0f}" if abs(v) >= 100 else f"{v:.3g}"
                        ax.text(j, i, text, ha="center", va="center", fontsize=6,
                                color="white" if v < (lo + hi) / 2 else "black")
            ax.set_title(", ".join(f"{c}={k}" for c, k in zip(others, key)) or value,
                         fontsize="medium")
        if image is not None:
            fig.colorbar(image, ax=list(axes), label=value)
        if path:
            fig.savefig(path)
        return fig


def _label(v: Any) -> str:
    return fusion_label(v) if isinstance(v, (bool, Mapping)) else str(v)


def _short(text: str) -> str:
    try:
        v = float(text)
    except ValueError:
        return text
    return f"{v:.3g}"


def _ordered(labels: dict[str, Any]) -> list[str]:
    """Axis labels in numeric order when the values are numbers, else in first-seen order."""
    try:
        return [k for k, _ in sorted(labels.items(), key=lambda kv: float(kv[1]))]
    except (TypeError, ValueError):
        return list(labels)


# ----------------------------------------------------------------------------- the sweep
def _check_grid(chip: Chip, grid: Mapping[str, Sequence[Any]]) -> dict[str, list[Any]]:
    if not isinstance(grid, Mapping):
        raise ConfigError(f"grid must be a dict of Chip field -> list of values, got "
                          f"{type(grid).__name__}")
    valid = [f.name for f in dataclasses.fields(chip) if f.name not in ("sources", "name")]
    out: dict[str, list[Any]] = {}
    for key, values in grid.items():
        if key not in valid:
            close = difflib.get_close_matches(str(key), valid, n=3, cutoff=0.5)
            hint = f"did you mean {', '.join(close)}? " if close else ""
            raise ConfigError(f"sweep grid: unknown Chip field {key!r}; {hint}valid fields are "
                              f"{', '.join(valid)}")
        if isinstance(values, (str, bytes)) or not isinstance(values, Iterable):
            raise ConfigError(f"sweep grid: {key} must be a list of values, got {values!r}")
        values = list(values)
        if not values:
            raise ConfigError(f"sweep grid: {key} has no values")
        out[key] = values
    return out


def _check_graphs(graphs: Graph | Mapping[str, Graph]) -> dict[str, Graph]:
    if isinstance(graphs, Graph):
        return {graphs.name: graphs}
    if isinstance(graphs, Mapping) and graphs:
        for name, g in graphs.items():
            if not isinstance(g, Graph):
                raise GraphError(f"sweep graphs[{name!r}] is a {type(g).__name__}, not a Graph")
        return {str(k): v for k, v in graphs.items()}
    raise GraphError(f"sweep() needs a Graph or a non-empty dict name -> Graph, got "
                     f"{type(graphs).__name__}")


def _value_text(v: Any) -> str:
    if isinstance(v, (bool, Mapping)):
        return fusion_label(v)
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return json.dumps(dataclasses.asdict(v), sort_keys=True)
    return str(v)


def _read_done(out: Path, columns: list[str]) -> dict[str, dict[str, str]]:
    """Rows already in `out`, by point id. A last line without its newline is what a run
    killed mid-write leaves: it is cut off the file (that point runs again). ConfigError,
    naming the file and line, when the file is another sweep's or a line is corrupt (wrong
    field count, a result that is not a number, a point written twice)."""
    if not out.exists() or out.stat().st_size == 0:
        return {}
    data = out.read_bytes()
    if not data.endswith(b"\n"):
        cut = data.rfind(b"\n") + 1
        with out.open("r+b") as fh:
            fh.truncate(cut)
        data = data[:cut]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise ConfigError(f"sweep out file {str(out)!r} line {line}: not UTF-8 text: a "
                          f"corrupt file; remove it or pass another out=") from None
    reader = csv.reader(io.StringIO(text))
    header = next(reader, None)
    if header is None:
        return {}
    if header != columns:
        raise ConfigError(f"sweep out file {str(out)!r} has columns {header}, this sweep "
                          f"writes {columns}: pass another out= or remove the file")
    done: dict[str, dict[str, str]] = {}
    for rec in reader:
        where = f"sweep out file {str(out)!r} line {reader.line_num}"
        if not rec:
            continue
        if len(rec) != len(columns):
            raise ConfigError(f"{where}: {len(rec)} fields, the header has {len(columns)}: "
                              f"a corrupt line; remove it (its point runs again) or the file")
        row = dict(zip(columns, rec))
        for c in RESULT_COLUMNS:
            try:
                value = int(row[c]) if c in _INT_RESULTS else float(row[c])
            except ValueError:
                value = math.nan
            if not math.isfinite(value):
                raise ConfigError(f"{where}: {c} = {row[c]!r} is not a finite number: a "
                                  f"corrupt line; remove it (its point runs again) or the file")
        if rec[0] in done:
            raise ConfigError(f"{where}: point {rec[0]} is written twice: a corrupt file; "
                              f"remove one of the lines")
        done[rec[0]] = row
    return done


def sweep(graphs: Graph | Mapping[str, Graph], chip: str | Chip = DEFAULT_CHIP,
          grid: Mapping[str, Sequence[Any]] | None = None,
          fusion: Sequence[Any] = (True, False), executor: Executor | None = None,
          out: str | os.PathLike | None = DEFAULT_OUT, detail: str = DEFAULT_DETAIL,
          mode: str = DEFAULT_MODE, progress: bool = True) -> SweepResult:
    """Simulate every point of `grid` (exact `Chip` field names -> values) x `fusion` options
    x `graphs` (one Graph, or a dict name -> Graph) on `chip`.

    executor: any concurrent.futures.Executor (Dask: `client.get_executor()`); None = a local
    process pool with os.cpu_count() workers. out: CSV the rows are appended to as points
    finish; points already in it are not rerun (None: no file). fusion: options as
    `simulate(fusion=...)` takes them. Raises ConfigError on an unknown grid field or a value
    the chip rejects, naming it; a point that fails with an AscendSimError is reported in
    `SweepResult.errors` (and not written, so it reruns next time)."""
    from .api import fusion_options
    from .hw.names import DETAILS, MODES

    graphs = _check_graphs(graphs)
    base = get_chip(chip)
    grid = _check_grid(base, grid or {})
    if isinstance(fusion, (bool, Mapping, str, os.PathLike)):
        fusion = [fusion]
    fusion = list(fusion)
    if not fusion:
        raise ConfigError("sweep: fusion needs at least one option (e.g. [True, False])")
    for f in fusion:
        fusion_options(f)                       # ConfigError on a bad option
    detail = detail or DEFAULT_DETAIL
    if detail not in DETAILS:
        raise ConfigError(f"detail={detail!r}: valid values are {', '.join(DETAILS)}")
    if mode not in MODES:
        raise ConfigError(f"mode={mode!r}: valid values are {', '.join(MODES)}")

    keys = list(grid)
    columns = ["point", "graph", *keys, "fusion", *RESULT_COLUMNS]
    chips: list[tuple[tuple, Chip]] = []      # grid values may be dicts (group fields)
    for combo in itertools.product(*grid.values()):
        changes = dict(zip(keys, combo))
        try:
            chips.append((combo, base.replace(**changes) if changes else base))
        except ConfigError as e:
            raise ConfigError(f"sweep grid point {changes}: {e}") from None
    hashes = {name: graph_key(g) for name, g in graphs.items()}
    points: list[tuple[dict[str, Any], str, _Job]] = []      # (row, graph name, job)
    for name in graphs:
        for combo, c in chips:
            for f in fusion:
                pid = point_id(hashes[name], c, f, detail, mode)
                row = {"point": pid, "graph": name, **dict(zip(keys, combo)), "fusion": f}
                points.append((row, name, _Job(pid, c, f)))
    ids = [row["point"] for row, _, _ in points]
    if len(set(ids)) != len(ids):
        raise ConfigError("sweep: two points are the same (repeated grid values, fusion "
                          "options or graphs); remove the duplicates")

    out_path = Path(out) if out is not None else None
    done = _read_done(out_path, columns) if out_path is not None else {}
    results: dict[str, dict[str, Any]] = {}
    for pid in ids:
        if pid in done:
            results[pid] = {c: (int(done[pid][c]) if c in _INT_RESULTS else float(done[pid][c]))
                            for c in RESULT_COLUMNS}
    resumed = len(results)
    todo = [(name, job) for row, name, job in points if row["point"] not in results]
    errors: dict[str, str] = {}
    reused = 0
    if todo:
        workers = _workers(executor)
        batches = _batches(todo, graphs, hashes, detail, mode, workers)
        reused = _run(batches, executor, workers, out_path, columns,
                      {r["point"]: r for r, _, _ in points}, results, errors, progress)
    rows = [{**row, **results[row["point"]]} for row, _, _ in points if row["point"] in results]
    return SweepResult(rows=rows, columns=columns, grid={k: list(v) for k, v in grid.items()},
                       out=str(out_path) if out_path is not None else None, errors=errors,
                       reused=reused, resumed=resumed)


def _workers(executor: Executor | None) -> int:
    """How many points the executor runs at once (a guess for executors that do not say)."""
    if executor is None:
        return os.cpu_count() or 1
    client = getattr(executor, "_client", None)       # dask.distributed ClientExecutor
    if client is not None:
        try:
            return max(1, sum(client.nthreads().values()))
        except Exception:       # a client that cannot answer: fall back to this machine
            return os.cpu_count() or 1
    return getattr(executor, "_max_workers", None) or os.cpu_count() or 1


def _batches(todo: list[tuple[str, _Job]], graphs: dict[str, Graph], hashes: dict[str, str],
             detail: str, mode: str, workers: int) -> list[_Batch]:
    """Points grouped per graph and fusion option (in grid order, so neighbours differ in the
    last grid field), cut into batches small enough to keep every worker busy: about four
    batches per worker."""
    size = max(1, -(-len(todo) // (4 * workers)))
    groups: dict[tuple[str, str], list[_Job]] = {}
    for name, job in todo:
        groups.setdefault((name, _fusion_key(job.fusion)), []).append(job)
    out: list[_Batch] = []
    for (name, _), jobs in groups.items():
        for i in range(0, len(jobs), size):
            out.append(_Batch(graphs[name], hashes[name], detail, mode,
                              tuple(jobs[i:i + size])))
    return out


def _run(batches: list[_Batch], executor: Executor | None, workers: int,
         out_path: Path | None, columns: list[str], point_rows: dict[str, dict[str, Any]],
         results: dict[str, dict[str, Any]], errors: dict[str, str], progress: bool) -> int:
    """Submit every batch, append each finished row to the CSV; returns how many points
    reused an optimised graph."""
    from tqdm.auto import tqdm

    own = executor is None
    if own:
        executor = ProcessPoolExecutor(max_workers=min(workers, len(batches)))
    fh = writer = None
    if out_path is not None:
        new = not out_path.exists() or out_path.stat().st_size == 0
        fh = out_path.open("a", newline="")
        writer = csv.writer(fh)
        if new:
            writer.writerow(columns)
            fh.flush()
    reused = 0
    futures: list[Future] = []
    total = sum(len(b.jobs) for b in batches)
    try:
        futures = [executor.submit(run_batch, b) for b in batches]
        with tqdm(total=total, desc="sweep", unit="point", disable=not progress) as bar:
            for fut in as_completed(futures):
                for res in fut.result():
                    pid = res.pop("point")
                    bar.update()
                    if "error" in res:
                        errors[pid] = res["error"]
                        continue
                    reused += bool(res.pop("reused"))
                    results[pid] = res
                    if writer is not None:
                        row = {**point_rows[pid], **res}
                        writer.writerow([row[c] if c in RESULT_COLUMNS else _value_text(row[c])
                                         for c in columns])
                        fh.flush()
    except BaseException:          # Ctrl-C or a failure: rows so far are in `out` already
        for f in futures:
            f.cancel()
        if own:
            executor.shutdown(wait=False, cancel_futures=True)
            own = False
        raise
    finally:
        if fh is not None:
            fh.close()
        if own:
            executor.shutdown(wait=True)
    return reused


__all__ = ["sweep", "SweepResult", "graph_key", "chip_key", "point_id", "run_batch",
           "recording_chip", "reads_of", "RESULT_COLUMNS", "DEFAULT_OUT"]

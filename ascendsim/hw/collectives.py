"""Costs of HCCL's collectives on an `Interconnect`: the alpha-beta stages of each algorithm.

These sit in `hw` (beside the link figures they read) so that both data-parallel training
(`ascendsim.multichip`) and the parallel inference plans (`ascendsim.plan`) time their
communication with the same model.

Note on the model
-----------------
*All-reduce* (HCCL's algorithms, with the alpha-beta costs of HCCL's algorithm docs;
reduction compute (gamma) is not modelled): inside a server, Mesh for chips of one full-mesh
group (2 steps of n/p bytes on every link at once) and a ring over the 910's 8 chips (HCCL's
"8P ring": 2(p-1) steps of n/p, paced by its slowest hop); between servers, HCCL's
hierarchical scheme (intra-server ReduceScatter, inter-server AllReduce of each chip's n/p
slice over its own NIC, intra-server AllGather), the inter-server AllReduce being recursive
halving-doubling when the server count is a power of two and a ring otherwise.
`algorithm="ring"` or `"halving_doubling"` run that algorithm flat over all chips instead.

*ReduceScatter, AllGather, AllToAll, Send/Recv* (the inference plans' collectives, inside one
server): on a mesh group, one step in which every chip exchanges n/p bytes with each of the
p - 1 others over their own links at once (`n` is the full buffer: the reduced input of a
ReduceScatter, the gathered output of an AllGather, a chip's whole send buffer of an
AllToAll); on the 910's 4 + 4 server a ring of p - 1 steps of n/p. Send/Recv is one step of n
bytes over one link (HCCS inside a server, RoCE between servers).

*The task chain of a mesh stage.* HCCL expands a collective into stream tasks (the HCCL user
guide's section on communication operators in profiling data: an operator is a schedule of
notify synchronisation tasks and memory-copy tasks, one stream per plane). On a mesh group it
uses the main stream and p - 2 slave streams, one per peer, and the main stream runs a fixed
chain per stage (hicann/hccl src, AllReduceMeshExecutor on the 910B: ReduceScatterMeshAtomic
then AllGatherMeshAtomic):
  ReduceScatter: p - 2 posts that start the slaves, TxAck + RxAck with its peer, p - 2 waits
  and p - 2 posts that pair with the slaves, one Reduce_Inline, TxDataSignal + RxDataSignal,
  an empty task, p - 2 waits for the slaves' ends, an empty task, the copy to the output:
  4(p - 2) + 8 tasks;
  AllGather: the same start and end handshakes with the slaves (2(p - 2)), TxAck + RxAck,
  p - 2 waits, a zero-byte attach copy, p - 2 posts, the data copy, TxDataSignal +
  RxDataSignal and an empty task: 4(p - 2) + 7 tasks.
Each task costs the interconnect's `stream_task_us` (when the file gives one), so a stage takes
latency + tasks x stream_task_us + bytes / bandwidth: at 16 KB the chain, not the bytes, is what
a decode step's all-reduce pays. The AllToAll chain (not read) and the 910's ring (its own
executor) pay none; nor does the op-base small-count executor (AllReduceMeshSmallCountExecutor,
eager calls of <= 256 KB) differ here from the graph-mode chain.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from ..errors import ConfigError
from .interconnect import Interconnect

ALGORITHMS = ("hierarchical", "ring", "halving_doubling")
LANE_INTRA, LANE_INTER = "HCCS", "RoCE"
#: the collectives of the inference plans (`collective_phases`)
KINDS = ("AllReduce", "ReduceScatter", "AllGather", "AllToAll", "SendRecv")
#: mesh stage -> (a, b): its main stream runs a (p - 2) + b HCCL tasks on a mesh group of p
#: (module note; D from hicann/hccl ReduceScatterMeshAtomic::RunAsync / RunReduceScatter and
#: AllGatherMeshAtomic::RunAllGather)
MESH_STAGE_TASKS = {"ReduceScatter": (4, 8), "AllGather": (4, 7)}


@dataclass(frozen=True)
class CommPhase:
    """One stage of a collective on one lane: `steps` steps, each moving `step_bytes` on every
    link it uses, and `tasks` HCCL stream tasks in a chain on the main stream; `seconds` =
    steps * latency + tasks * task_s + bytes_per_link / bandwidth."""

    lane: str
    what: str
    steps: int
    bytes_per_link: float
    bandwidth: float          # bytes/s of the pacing link
    latency_s: float          # per step
    tasks: int = 0            # HCCL stream tasks in a chain (module note)
    task_s: float = 0.0       # per task

    @property
    def seconds(self) -> float:
        return (self.steps * self.latency_s + self.tasks * self.task_s
                + self.bytes_per_link / self.bandwidth)


def mesh_stage_tasks(stage: str, p: int) -> int:
    """HCCL stream tasks that the main stream of a mesh `stage` ("ReduceScatter" or
    "AllGather") runs in a chain on a mesh group of p chips (module note)."""
    a, b = MESH_STAGE_TASKS[stage]
    return a * (p - 2) + b if p > 1 else 0


def _mesh(lane: str, stage: str, what: str, nbytes: float, p: int, bw: float, lat: float,
          ic: Interconnect) -> CommPhase:
    """One mesh stage of n/p bytes per link, with its task chain where `ic` prices one."""
    task_s = (ic.stream_task_us or 0.0) * 1e-6
    tasks = mesh_stage_tasks(stage, p) if task_s and stage in MESH_STAGE_TASKS else 0
    return CommPhase(lane, what, 1, nbytes / p, bw, lat, tasks, task_s)


def server_layout(world_size: int, ic: Interconnect) -> tuple[int, int]:
    """(servers, chips per server) of a job, checked against the server's rules."""
    if isinstance(world_size, bool) or not isinstance(world_size, int) or world_size < 1:
        raise ConfigError(f"world_size={world_size!r}: must be a positive integer")
    cps = ic.chips_per_server
    if world_size <= cps:
        per = world_size
        if per > ic.mesh_group_size and per != cps:
            raise ConfigError(f"world_size={world_size} on {ic.name}: a server runs up to "
                              f"{ic.mesh_group_size} chips of one mesh group or all {cps}")
        return 1, per
    if world_size % cps:
        raise ConfigError(f"world_size={world_size} on {ic.name}: jobs over several servers "
                          f"use whole servers ({cps} chips each)")
    return world_size // cps, cps


def _intra(ic: Interconnect, p: int) -> tuple[str, float, float, int]:
    """(algorithm, pacing bandwidth, step latency, links used at once) inside one server."""
    if p <= ic.mesh_group_size:
        return "mesh", ic.hccs_bandwidth_bytes_per_s, ic.hccs_latency_us * 1e-6, p - 1
    # the 910's 8P ring: hops inside a group over HCCS, across groups over the PCIe link
    bw = min(ic.hccs_bandwidth_bytes_per_s, ic.group_link_bandwidth_bytes_per_s)
    lat = max(ic.hccs_latency_us, ic.group_link_latency_us) * 1e-6
    return "ring", bw, lat, 1


def _ring(lane: str, nbytes: float, p: int, bw: float, lat: float, what: str) -> list[CommPhase]:
    """Ring ReduceScatter + AllGather: 2(p-1) steps of n/p bytes (HCCL Ring.md)."""
    return [CommPhase(lane, f"{what} ring ReduceScatter", p - 1, (p - 1) * nbytes / p, bw, lat),
            CommPhase(lane, f"{what} ring AllGather", p - 1, (p - 1) * nbytes / p, bw, lat)]


def _rhd(lane: str, nbytes: float, p: int, bw: float, lat: float, what: str) -> list[CommPhase]:
    """Recursive halving-doubling (HCCL RHD.md): log2(p) halving + log2(p) doubling steps
    moving (p-1)/p n each way; a non-power-of-two p first folds 2r ranks into r (one step of
    n), runs on p' = 2^floor(log2 p) ranks and unfolds (one more step of n)."""
    k = int(math.floor(math.log2(p)))
    pp = 2 ** k
    out = []
    if pp != p:
        out.append(CommPhase(lane, f"{what} RHD fold", 1, nbytes, bw, lat))
    out += [CommPhase(lane, f"{what} RHD ReduceScatter", k, (pp - 1) * nbytes / pp, bw, lat),
            CommPhase(lane, f"{what} RHD AllGather", k, (pp - 1) * nbytes / pp, bw, lat)]
    if pp != p:
        out.append(CommPhase(lane, f"{what} RHD unfold", 1, nbytes, bw, lat))
    return out


def allreduce_phases(nbytes: float, world_size: int, interconnect: Interconnect,
                     algorithm: str | None = None) -> list[CommPhase]:
    """The stages of an all-reduce of `nbytes` on `world_size` chips (see the Note on the
    model); None = HCCL's own choice ("hierarchical")."""
    ic = interconnect
    algorithm = algorithm or "hierarchical"
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"algorithm={algorithm!r}: valid values are {', '.join(ALGORITHMS)}")
    if nbytes < 0:
        raise ConfigError(f"all-reduce of {nbytes} bytes: must be >= 0")
    servers, per = server_layout(world_size, ic)
    if world_size == 1 or nbytes == 0:
        return []
    nic_bw, nic_lat = ic.nic_bandwidth_bytes_per_s, ic.nic_latency_us * 1e-6
    if algorithm != "hierarchical":
        if servers > 1:
            bw, lat, lane = nic_bw, nic_lat, LANE_INTER
        else:
            _, bw, lat, _ = _intra(ic, per)
            lane = LANE_INTRA
        if algorithm == "ring":
            return _ring(lane, nbytes, world_size, bw, lat, f"{world_size}-chip")
        return _rhd(lane, nbytes, world_size, bw, lat, f"{world_size}-chip")
    phases: list[CommPhase] = []
    slice_bytes = nbytes
    if per > 1:
        alg, bw, lat, _ = _intra(ic, per)
        what = f"intra-server ({per} chips)"
        if alg == "mesh":
            rs = _mesh(LANE_INTRA, "ReduceScatter", f"{what} mesh ReduceScatter", nbytes, per,
                       bw, lat, ic)
            ag = _mesh(LANE_INTRA, "AllGather", f"{what} mesh AllGather", nbytes, per, bw,
                       lat, ic)
        else:
            rs, ag = _ring(LANE_INTRA, nbytes, per, bw, lat, what)
        phases.append(rs)
        slice_bytes = nbytes / per
    if servers > 1:
        what = f"inter-server ({servers} servers)"
        if servers & (servers - 1) == 0:
            phases += _rhd(LANE_INTER, slice_bytes, servers, nic_bw, nic_lat, what)
        else:
            phases += _ring(LANE_INTER, slice_bytes, servers, nic_bw, nic_lat, what)
    if per > 1:
        phases.append(ag)
    return phases


def allreduce_seconds(nbytes: float, world_size: int, interconnect: Interconnect,
                      algorithm: str | None = None) -> float:
    """Time of one all-reduce alone on idle links."""
    return sum(p.seconds for p in allreduce_phases(nbytes, world_size, interconnect, algorithm))


def collective_phases(kind: str, nbytes: float, group: int, interconnect: Interconnect,
                      cross_server: bool = False) -> list[CommPhase]:
    """The stages of one inference-plan collective of `kind` (KINDS) over `group` chips, `nbytes`
    as the module note defines it per kind. AllReduce is `allreduce_phases`; the others run
    inside one server, except a SendRecv with `cross_server` (a pipeline stage boundary
    between servers), which crosses the RoCE network."""
    ic = interconnect
    if kind not in KINDS:
        raise ConfigError(f"collective {kind!r}: valid kinds are {', '.join(KINDS)}")
    if nbytes < 0:
        raise ConfigError(f"{kind} of {nbytes} bytes: must be >= 0")
    if kind == "AllReduce":
        return allreduce_phases(nbytes, group, ic)
    if kind == "SendRecv":
        if cross_server:
            return [CommPhase(LANE_INTER, "Send/Recv between servers", 1, nbytes,
                              ic.nic_bandwidth_bytes_per_s, ic.nic_latency_us * 1e-6)]
        return [CommPhase(LANE_INTRA, "Send/Recv", 1, nbytes, ic.hccs_bandwidth_bytes_per_s,
                          ic.hccs_latency_us * 1e-6)]
    servers, per = server_layout(group, ic)
    if servers > 1:
        raise ConfigError(f"{kind} over {group} chips on {ic.name}: a plan's {kind} runs "
                          f"inside one server ({ic.chips_per_server} chips); spanning servers "
                          f"is not modelled")
    if group == 1 or nbytes == 0:
        return []
    alg, bw, lat, _ = _intra(ic, per)
    what = f"{kind} ({per} chips, {alg})"
    if alg == "mesh":
        return [_mesh(LANE_INTRA, kind, what, nbytes, per, bw, lat, ic)]
    return [CommPhase(LANE_INTRA, what, per - 1, (per - 1) * nbytes / per, bw, lat)]


__all__ = ["ALGORITHMS", "KINDS", "LANE_INTRA", "LANE_INTER", "MESH_STAGE_TASKS", "CommPhase",
           "server_layout", "mesh_stage_tasks", "allreduce_phases", "allreduce_seconds",
           "collective_phases"]

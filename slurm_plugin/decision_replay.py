"""Replay the live hook's recorded decisions through the replay's own deadline queue.

The service and the replay place jobs with the same code (the planner, its green budget,
:func:`greenslurm.allocation.green.green_request`).  This module checks it on real decisions: each
recorded submission becomes a job submitted at the decision's time with its CPUs, nodes, GPUs, time
limit (run for its whole limit) and deadline; the replay's deadline queue then plans them on the
same cluster and forecast, and its start times and nodes are set against the recorded ones.  For a
cluster that ran only these jobs (the jobs of the hook's walkthrough), they agree exactly.
"""

from __future__ import annotations

from dataclasses import dataclass

from greenslurm.allocation.selection import make_selection, parse_selection
from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.clustermodel.renewable import SupplySeries


@dataclass(frozen=True)
class Replayed:
    """One decision and the replay's answer for the same job (start None: rejected there)."""

    decision: int
    recorded_start_s: float | None
    recorded_nodes: tuple[str, ...]
    replay_start_s: float | None
    replay_nodes: tuple[str, ...]

    @property
    def same(self) -> bool:
        return self.recorded_start_s == self.replay_start_s and self.recorded_nodes == self.replay_nodes


def job_of(row: dict) -> JobSpec:
    """The job of one recorded decision, submitted at the decision's time, run for its time limit.

    >>> job_of({"id": 3, "time_s": 10.0, "time_limit_s": 60.0, "cpus": 4, "nodes": 1, "gpus_per_node": 0.0,
    ...         "deadline_s": 500.0, "user": "ana"}).deadline_s
    500.0
    """
    limit = float(row["time_limit_s"])
    return JobSpec(str(row["id"]), float(row["time_s"]), limit, runtime_s=limit, cpus=int(row["cpus"]),
                   nodes=int(row["nodes"] or 0), gpus_per_node=float(row["gpus_per_node"] or 0.0),
                   deadline_s=row["deadline_s"], user=row.get("user") or "")


def replay_decisions(rows: list[dict], cluster: Cluster, supply: SupplySeries | None, *, renewable: str = "grid",
                     acceptance: str = "greedy", select: str = "bestfit",
                     no_deadline_shift_s: float = 0.0) -> list[Replayed]:
    """Each decision of ``rows`` (the record's decisions, in order) with the replay's answer."""
    from greenslurm.sim.engine.replay import Replay

    jobs = [job_of(row) for row in rows]
    options = {"acceptance": acceptance, "supply": supply, "renewable": renewable if supply is not None else "grid",
               "no_deadline_shift_s": no_deadline_shift_s}
    replay = Replay(jobs, cluster, "deadline", make_selection(parse_selection(select, "select")),
                    strategy_options=options)
    result = replay.run()
    names = cluster.names if hasattr(cluster, "names") else [node.name for node in cluster.nodes]
    started = {r.job_id: (r.start_s, tuple(names[i] for i in r.node_indices)) for r in result.records}
    out = []
    for row in rows:
        start, nodes = started.get(str(row["id"]), (None, ()))
        planned = tuple(n for n in (row.get("planned_nodes") or "").split(",") if n)
        out.append(Replayed(int(row["id"]), row.get("planned_start_s"), planned, start, nodes))
    return out

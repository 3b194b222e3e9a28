"""The live hook's decisions inside a replay: greenslurm's admission in front of the replay's queue.

Live, ``job_submit.lua`` sends each submission to the decision service, which decides on its view
of the cluster (the plan built from Slurm's last snapshot) and answers accept, reject, or modify (a
node list the job is pinned to, a begin time in greener hours); then Slurm schedules the job.  Here
the replay plays Slurm's part: at each submission the cluster as the replay holds it (its nodes,
the running jobs with the ends Slurm knows, their time limits, and the jobs still waiting) becomes a
:class:`~greenslurm.slurm_plugin.view.Snapshot`, the service's own
:meth:`~greenslurm.slurm_plugin.decisions.DecisionService.decide` answers a request built as
``job_submit.lua`` builds it, and the queue receives the job as Slurm would: rejected (counted with
the hook's reason, as Slurm's job_submit chain returns it to the user), or with its required nodes
and begin time.

The service plans afresh from every submission's snapshot (live, a sync every few seconds): exact,
and its cost grows with the jobs running and waiting at each submission.
"""

from __future__ import annotations

import math

import numpy as np

from greenslurm.clustermodel import Cluster
from greenslurm.sim.engine.admission import Admitted
from greenslurm.slurm_plugin.config import HookConfig
from greenslurm.slurm_plugin.record import DecisionRecord
from greenslurm.slurm_plugin.decisions import DecisionService
from greenslurm.slurm_plugin.view import LiveNode, NodeUse, PendingJob as LivePending, RunningJob, Snapshot


def limit_s(requested_s: float) -> float:
    """A time limit as Slurm holds it: whole minutes, rounded up (never below the job's).

    >>> limit_s(100.0), limit_s(120.0)
    (120.0, 120.0)
    """
    return 60.0 * max(1, math.ceil(requested_s / 60.0))


def request_of(spec, now_s: float) -> dict:
    """The request ``job_submit.lua`` sends for a job of the replay: its CPUs (as ``-n``), its node
    count when it names one, its time limit in whole minutes (Slurm's unit; rounded up, as Slurm
    keeps a limit it is given in seconds: never below the job's), its GPUs per node, partition, user
    and deadline (whole seconds: Slurm keeps no fraction).

    >>> from greenslurm.clustermodel import JobSpec
    >>> request_of(JobSpec("7", 0.0, 90.0, cpus=4, nodes=2, deadline_s=700.5, user="ana"), 100.0)["deadline"]
    'now+600'
    >>> request_of(JobSpec("7", 0.0, 90.0, cpus=4), 100.0)["time_limit"]
    2
    """
    request: dict = {"op": "submit", "id": spec.job_id, "user": spec.user or "", "submit_time": now_s,
                     "min_cpus": int(spec.cpus), "num_tasks": int(spec.cpus),
                     "time_limit": int(limit_s(spec.requested_time_s) // 60)}
    if spec.nodes:
        request["min_nodes"] = int(spec.nodes)
    if spec.partition:
        request["partition"] = spec.partition
    if spec.gpus_per_node:
        request["tres_per_node"] = f"gres:gpu:{int(spec.gpus_per_node)}"
    if spec.memory_mb_per_node:
        request["pn_min_memory"] = int(spec.memory_mb_per_node)
    if spec.constraint:
        request["features"] = spec.constraint
    if spec.deadline_s is not None:
        request["deadline"] = f"now+{max(0, math.floor(spec.deadline_s - now_s))}"
    return request


class HookAdmission:
    """The hook's decisions for a replay of ``cluster``, configured by a hook.toml (``config``)."""

    name = "hook"

    def __init__(self, config: HookConfig, cluster: Cluster) -> None:
        self.config = config
        self.cluster = cluster
        self.names = [node.name for node in cluster.nodes]
        self.index = {name: i for i, name in enumerate(self.names)}     # node name -> its index
        self.service = DecisionService(config, DecisionRecord(":memory:"))
        self.answers: dict[str, dict] = {}          # job id -> the service's answer (for reports and tests)

    def decide(self, spec, now_s: float, running, waiting) -> Admitted:
        """The service's decision on ``spec`` submitted at ``now_s``, on the replay's cluster."""
        return self.admit(spec, now_s, self.snapshot(now_s, running, waiting))

    def snapshot(self, now_s: float, running, waiting) -> Snapshot:
        """The cluster as Slurm shows it at ``now_s``: ``running``, the replay's running jobs (Slurm
        knows their time limits, not their run times); ``waiting``, its queued jobs (each with the
        begin time and the nodes it was given)."""
        cluster, names = self.cluster, self.names
        used = np.zeros(cluster.size)
        jobs = []
        for job in running:
            nodes = job.node_indices
            demand = np.broadcast_to(job.demand, (len(nodes), len(job.demand) if job.demand.ndim == 1
                                                  else job.demand.shape[1]))
            uses = tuple(NodeUse(names[n], float(row[0]), float(row[1]), whole_gpus=int(row[2]))
                         for n, row in zip(nodes, demand))
            used[nodes] += demand[:, 0]
            jobs.append(RunningJob(job.job.job_id, tuple(names[n] for n in nodes),
                                   job.start_s + job.configuring_s + limit_s(job.requested_s), uses))
        nodes = [LiveNode(node.name, node.cpus, node.memory_mb, node.gpus, features=tuple(node.features),
                          partitions=tuple(node.partitions),
                          state="idle" if used[i] == 0 else ("allocated" if used[i] >= node.cpus else "mixed"))
                 for i, node in enumerate(cluster.nodes)]
        pending = [LivePending(job.job.job_id, job.job, job.begin_s, required_nodes=tuple(names[n] for n in job.pinned))
                   for job in waiting]
        return Snapshot(now_s, nodes, jobs, pending, default_partition=cluster.default_partition)

    def admit(self, spec, now_s: float, snapshot: Snapshot) -> Admitted:
        """The service's decision on ``spec`` submitted at ``now_s``, on ``snapshot``."""
        service = self.service
        service.view = service.install_view(snapshot, now_s)
        answer = service.decide(request_of(spec, now_s), now_s=now_s)
        self.answers[spec.job_id] = answer
        action = answer.get("action")
        if action == "reject":
            row = service.record.db.execute("SELECT policy, reason FROM decisions WHERE id = ?",
                                            (answer["decision"],)).fetchone()
            return Admitted(False, row[0] or self.name, row[1] or "", answer.get("message", ""))
        if action == "error":          # the service could not decide: the hook fails open (its default)
            return Admitted(True)
        pinned = ()
        if answer.get("req_nodes"):
            pinned = tuple(self.index[name] for name in answer["req_nodes"].split(","))
        begin = answer.get("begin_time")
        return Admitted(True, pinned=pinned, begin_s=None if begin is None else float(begin))

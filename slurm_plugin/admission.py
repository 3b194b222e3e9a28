"""The live hook's decisions inside a replay: greenslurm's admission in front of the replay's queue.

Live, ``job_submit.lua`` sends each submission to the decision service, which decides on its view
of the cluster (the plan built from Slurm's last snapshot) and answers accept, reject, or modify (a
node list the job is pinned to, a begin time in greener hours); then Slurm schedules the job.  Here
the replay plays Slurm's part: at each submission the cluster as the replay holds it (its nodes,
the running jobs with the ends Slurm knows, their time limits, and the jobs still waiting) becomes a
:class:`~greenslurm.slurm_plugin.snapshot.Snapshot`, the service's own
:meth:`~greenslurm.slurm_plugin.decisions.DecisionService.decide` answers a request built as
``job_submit.lua`` builds it, and the queue receives the job as Slurm would: rejected (counted with
the hook's reason, as Slurm's job_submit chain returns it to the user), or with its required nodes
and begin time.

The service plans afresh from every submission's snapshot (live, a sync every few seconds): exact,
and its cost grows with the jobs running and waiting at each submission.

**The forecast.**  A hook.toml's ``supply_file`` is read and parsed once by the service's own code
(:func:`~greenslurm.slurm_plugin.forecast.read_file`, :func:`~greenslurm.slurm_plugin.forecast.parse_forecast`,
``supply_scale`` applied), and the service plans every decision with it as live
(:meth:`~greenslurm.slurm_plugin.decisions.DecisionService.install_view`: ``renewable``, the horizon,
the green planner).  Its clock is the replay's: live, the forecast's times (Unix epoch seconds) are
read against the wall clock at the decision; here against the replay's time at the submission,
which for a sacct export is the jobs' own Submit in Unix epoch seconds: the same mapping, so a
forecast of last year's hours shifts last year's jobs.  The forecast counts as just produced at
every decision (a replay of past jobs has no record of a site's refreshes failing: the staleness
rule, ``supply_max_age_s``, never applies).  ``supply_command`` prints a forecast of the hours
ahead of now, not of the replay's past, and is refused; a forecast that ends before the first
submission or starts beyond the planning horizon (``supply_horizon_s``) after the last one is
refused too (its times are not on the jobs' clock).
"""

from __future__ import annotations

import math

import numpy as np

from greenslurm.clustermodel import Cluster, InputError
from greenslurm.clustermodel.renewable import SupplySeries
from greenslurm.sim.engine.admission import Admitted
from greenslurm.slurm_plugin.config import HookConfig
from greenslurm.slurm_plugin.forecast import Forecast, parse_forecast, read_file
from greenslurm.slurm_plugin.record import DecisionRecord
from greenslurm.slurm_plugin.decisions import DecisionService
from greenslurm.slurm_plugin.live_nodes import features_of
from greenslurm.slurm_plugin.snapshot import LiveNode, NodeUse, PendingJob as LivePending, RunningJob, Snapshot


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

    def __init__(self, config: HookConfig, cluster: Cluster, jobs=()) -> None:
        """``jobs``: the replay's jobs (the forecast must overlap their submissions)."""
        refuse_unreplayed(config)
        self.config = config
        self.cluster = cluster
        self.names = [node.name for node in cluster.nodes]
        self.index = {name: i for i, name in enumerate(self.names)}     # node name -> its index
        self.service = DecisionService(config, DecisionRecord(":memory:"))
        self.supply = read_supply(config, [job.submit_s for job in jobs])
        self.answers: dict[str, dict] = {}          # job id -> the service's answer (for reports and tests)
        self.moves_s: dict[str, float] = {}         # job id -> how much later than its earliest start it begins
        # the machine of the hook's power saving, when it is on (it sets itself here): the nodes' power flags
        self.power_view = None

    def green_moves(self) -> dict | None:
        """What the forecast made the hook do (None without one): the forecast file, the jobs given
        a begin time later than their earliest start, and their mean move in seconds."""
        if self.supply is None:
            return None
        moves = list(self.moves_s.values())
        return {"forecast": self.config.supply_file, "jobs_moved": len(moves),
                "mean_move_s": math.fsum(moves) / len(moves) if moves else 0.0}

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
        # the hook's power saving (greenslurm.slurm_plugin.power_replay): each node's power flags and reason
        power = self.power_view.node_flags() if self.power_view is not None else [("", "")] * cluster.size
        nodes = [LiveNode(node.name, node.cpus, node.memory_mb, node.gpus, features=tuple(node.features),
                          partitions=tuple(node.partitions),
                          state=("idle" if used[i] == 0 else ("allocated" if used[i] >= node.cpus else "mixed"))
                          + power[i][0], reason=power[i][1])
                 for i, node in enumerate(cluster.nodes)]
        pending = [LivePending(job.job.job_id, job.job, job.begin_s, features_of(job.job.constraint),
                               required_nodes=tuple(names[n] for n in job.pinned))
                   for job in waiting]
        return Snapshot(now_s, nodes, jobs, pending, default_partition=cluster.default_partition)

    def admit(self, spec, now_s: float, snapshot: Snapshot) -> Admitted:
        """The service's decision on ``spec`` submitted at ``now_s``, on ``snapshot``."""
        service = self.service
        if self.supply is not None:           # as just produced: see the module's note on the forecast
            service.forecast = Forecast(self.supply, now_s, self.config.supply_file)
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
        if begin is not None:
            earliest = service.record.db.execute("SELECT earliest_start_s FROM decisions WHERE id = ?",
                                                 (answer["decision"],)).fetchone()[0]
            if earliest is not None and float(begin) > earliest + 1.0:       # moved into greener hours
                self.moves_s[spec.job_id] = float(begin) - earliest
        return Admitted(True, pinned=pinned, begin_s=None if begin is None else float(begin))


def refuse_unreplayed(config: HookConfig) -> None:
    """Refuse, in one line naming the setting, what the replay cannot do as the live hook would."""
    if config.supply_command:
        raise InputError("prints a forecast of the hours ahead of now, not of the replayed jobs' past: save a "
                         "forecast of the jobs' hours to a file and name it as supply_file", path=config.path,
                         field="supply_command")


def read_supply(config: HookConfig, submits_s) -> SupplySeries | None:
    """The forecast of ``supply_file`` read by the service's own code (None without one); an
    InputError when it cannot be read, is not a forecast, ends before the first of ``submits_s``
    (Unix epoch seconds, as the jobs' submissions) or starts more than ``supply_horizon_s`` after
    the last: then it is on another clock."""
    if not config.supply_file:
        return None
    try:
        data, _ = read_file(config.supply_file)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=config.supply_file) from None
    series = parse_forecast(data, config.supply_file, config.supply_scale)
    if submits_s:
        first, last = min(submits_s), max(submits_s)
        times = series.times_s
        # a forecast that ends before the first submission, or starts beyond the planning horizon
        # after the last one, is on another clock (trace seconds from 0 against Unix epoch seconds)
        if times[0] > last + config.supply_horizon_s or (times.size > 1 and times[-1] < first):
            raise InputError(f"the forecast covers {times[0]:.0f} to {times[-1]:.0f} s (Unix epoch) but the jobs "
                             f"are submitted from {first:.0f} to {last:.0f} s: its times must be on the jobs' clock",
                             path=config.supply_file)
    return series

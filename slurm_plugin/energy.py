"""Live energy accounting: every job's estimated energy and its renewable part, from the replay's
power model and with the replay's ledger.

The service records each job that started (its nodes, the CPUs and GPUs it held on each, its start
and end as Slurm says them) and, once it ended, its estimated energy: on each node its share of the
node's busy power, ``busy_w * CPUs / node CPUs + gpu_max_w * GPUs``
(:func:`greenslurm.clustermodel.power.job_share_power_w`), times its run time.  ``greenslurm hook
report`` replays those runs, in time order, through the replay's own
:class:`~greenslurm.sim.accounting.ledger.EnergyLedger` (which charges each job the same share and
integrates the cluster's power, idle nodes included; with power saving, the replay's
:class:`~greenslurm.sim.machines.power_states.PowerStateLedger` over the power states the service
saw) and splits the cluster's power against the
recorded forecast (:func:`~greenslurm.clustermodel.renewable.split_energy`); a job's renewable
part is its share of the renewable power on every piece of time it ran
(:func:`~greenslurm.clustermodel.renewable.job_renewable_j`).  Where Slurm measured a job's energy
(an ``AcctGatherEnergyType`` plugin, read with ``sacct``), the report shows it beside the estimate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np

from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.clustermodel.cluster import CPU, GPU
from greenslurm.clustermodel.power import job_share_power_w
from greenslurm.clustermodel.renewable import EnergySplit, SupplySeries, job_renewable_j, split_energy
from greenslurm.slurm_plugin.slurm_json import natural_order


def run_energy_j(cpus: tuple[float, ...], gpus: tuple[float, ...], node_cpus: tuple[float, ...], busy_w: float,
                 gpu_max_w: float, run_s: float) -> float:
    """A job's estimated energy: per node its share of the busy power times its run time.

    2 of 4 CPUs on one node and 4 of 4 on another, 350 W busy, for an hour:

    >>> run_energy_j((2.0, 4.0), (0.0, 0.0), (4.0, 4.0), 350.0, 300.0, 3600.0) / 3.6e6   # (175 + 350) W * 1 h
    0.525
    """
    power = sum(job_share_power_w(busy_w, c, n, gpu_max_w, g) for c, g, n in zip(cpus, gpus, node_cpus))
    return power * max(run_s, 0.0)


@dataclass(frozen=True)
class RunEnergy:
    """One job's run and its energy (joules); ``open``: still running (charged up to the report's
    time) or its end was never seen (charged up to when it was last seen)."""

    job_id: str
    user: str
    account: str
    start_s: float
    end_s: float
    energy_j: float
    renewable_j: float
    recorded_j: float | None = None
    measured_j: float | None = None
    open: bool = False

    @property
    def used_j(self) -> float:
        """The energy the report counts: Slurm's measurement where there is one, else the estimate."""
        return self.measured_j if self.measured_j is not None else self.energy_j

    @property
    def used_renewable_j(self) -> float:
        """The renewable part of :attr:`used_j`, at the estimate's renewable share."""
        return self.renewable_j * (self.used_j / self.energy_j) if self.energy_j > 0 else 0.0


@dataclass
class EnergyReport:
    runs: list[RunEnergy]
    split: EnergySplit | None          # the cluster's energy against the forecast (None: no forecast)
    total_j: float                     # the cluster's energy, idle included, over the report's span
    jobs_j: float                      # the jobs' part of it (the ledger's sum)
    start_s: float
    end_s: float
    skipped: int = 0
    groups: dict = field(default_factory=dict)


def energy_report(runs: list[dict], nodes: dict[str, dict], power, supply: SupplySeries | None,
                  now_s: float, power_states: list[tuple[float, str, int]] = (), off_w: float = 10.0) -> EnergyReport:
    """The report of the recorded ``runs`` (rows of the record's ``runs`` table) on the recorded
    ``nodes`` (name -> cpus, gpus), with the service's power model ``power``
    (:class:`~greenslurm.slurm_plugin.live_nodes.NodePower`) and the recorded forecast.  ``power_states``:
    (time, node, state) when a node's power state changed (power saving): the replay's
    :class:`~greenslurm.sim.machines.power_states.PowerStateLedger` then draws ``off_w`` for a node
    that is off, its idle power while it boots."""
    from greenslurm.sim.machines.machine import PendingJob
    from greenslurm.sim.machines.node_states import ON
    from greenslurm.sim.machines.power_states import PowerStateLedger

    names = sorted(nodes, key=natural_order)
    cluster = Cluster(power.node(name, max(int(nodes[name]["cpus"] or 1), 1), 0.0, int(nodes[name]["gpus"] or 0))
                      for name in names) if names else None
    index = {name: i for i, name in enumerate(names)}
    usable, skipped = [], 0
    for row in runs:
        node_list = [n for n in (row["nodes"] or "").split(",") if n]
        if cluster is None or not node_list or any(n not in index for n in node_list):
            skipped += 1
            continue
        end, is_open = row["end_s"], False
        if end is None:
            end, is_open = (now_s if row["last_seen_s"] >= now_s - 1e-9 else row["last_seen_s"]), True
        usable.append((row, node_list, float(row["start_s"]), max(float(end), float(row["start_s"])), is_open))
    if not usable:
        return EnergyReport([], None, 0.0, 0.0, now_s, now_s, skipped)
    start = min(u[2] for u in usable)
    end = max(max(u[3] for u in usable), start)
    ledger = PowerStateLedger(cluster, start, off_w, cluster.idle_w + cluster.gpu_idle_w * cluster.capacity[:, GPU])
    jobs: dict[int, object] = {}
    events = []
    # each node's power state at the start, then its changes within the span (end, state, start order)
    state_at_start: dict[int, int] = {}
    for t, name, state in sorted(power_states):
        if name not in index:
            continue
        if t <= start:
            state_at_start[index[name]] = int(state)
        elif t < end:
            events.append((t, 1, -1 - index[name], int(state)))
    for node, state in state_at_start.items():
        if state != ON:
            ledger.on_state(node, state, start)
    for k, (row, node_list, s, e, _) in enumerate(usable):
        per_node = np.zeros((len(node_list), 3))
        per_node[:, CPU] = _floats(row["cpus"], len(node_list))
        per_node[:, GPU] = _floats(row["gpus"], len(node_list))
        spec = JobSpec(str(row["job_id"]), s, max(e - s, 0.0), cpus=int(math.ceil(per_node[:, CPU].sum())) or 1)
        job = PendingJob(index=k, job=spec, nodes=len(node_list), demand=per_node, cpus_total=float(per_node[:, CPU].sum()),
                         requested_s=e - s)
        job.node_indices = np.array([index[n] for n in node_list])
        jobs[k] = job
        events.append((s, 2, k, 0))
        events.append((e, 0, k, 0))     # at equal times: ends, then power states, then starts
    events.sort()
    energy = {}
    for t, kind, k, state in events:
        if kind == 2:
            ledger.on_start(jobs[k], t)
        elif kind == 1:
            ledger.on_state(-1 - k, state, t)
        else:
            energy[k] = ledger.on_end(jobs[k], t)
    totals = ledger.close(end)
    times = np.frombuffer(ledger.times_s, dtype=float) if len(ledger.times_s) else np.array([start])
    series = np.frombuffer(ledger.series_power_w, dtype=float) if len(ledger.series_power_w) else \
        np.array([ledger.power_w])
    split = split_energy(times, series, end, supply) if supply is not None else None
    out = []
    for k, (row, node_list, s, e, is_open) in enumerate(usable):
        run_s = e - s
        job_power = energy[k] / run_s if run_s > 0 else 0.0
        renewable = job_renewable_j(s, e, job_power, times, series, supply) if supply is not None else 0.0
        out.append(RunEnergy(str(row["job_id"]), row["user"] or "", row["account"] or "", s, e, energy[k], renewable,
                             row.get("energy_j"), row.get("measured_j"), is_open))
    return EnergyReport(out, split, totals.total_j, totals.jobs_j, start, end, skipped)


def group_runs(runs: list[RunEnergy], by: str) -> list[dict]:
    """Sums per user, account or day (the local day a job ended), largest energy first; a job's
    energy is Slurm's measurement where there is one, else the estimate.

    >>> rs = [RunEnergy("1", "ana", "a", 0.0, 10.0, 100.0, 25.0), RunEnergy("2", "ana", "a", 0.0, 10.0, 300.0, 0.0)]
    >>> group_runs(rs, "user")
    [{'user': 'ana', 'jobs': 2, 'energy_kwh': 0.000111, 'renewable_kwh': 7e-06, 'renewable_share': 0.0625}]
    """
    groups: dict[str, list[float]] = {}
    for run in runs:
        key = {"user": run.user, "account": run.account,
               "day": datetime.fromtimestamp(run.end_s).strftime("%Y-%m-%d")}[by]
        total = groups.setdefault(key, [0, 0.0, 0.0])
        total[0] += 1
        total[1] += run.used_j
        total[2] += run.used_renewable_j
    rows = [{by: key, "jobs": n, "energy_kwh": round(e / 3.6e6, 6), "renewable_kwh": round(r / 3.6e6, 6),
             "renewable_share": round(r / e, 4) if e > 0 else None} for key, (n, e, r) in groups.items()]
    return sorted(rows, key=lambda row: (-row["energy_kwh"], str(row[by])))


def _floats(text: str | None, count: int) -> list[float]:
    values = [float(v) for v in (text or "").split(",") if v]
    return values if len(values) == count else [0.0] * count




def parse_sacct_energy(text: str) -> dict[str, float]:
    """Measured energies of ``sacct -n -P -X -o JobID,ConsumedEnergyRaw`` output (joules); a job
    with no measurement (empty, 0, or a value that is no number) is left out.

    >>> parse_sacct_energy("12|5400\\n13|\\n14|0\\n15|x\\n16_3|120\\n")
    {'12': 5400.0, '16_3': 120.0}
    """
    out: dict[str, float] = {}
    for line in text.splitlines():
        job_id, _, value = line.strip().partition("|")
        try:
            joules = float(value)
        except ValueError:
            continue
        if job_id and math.isfinite(joules) and joules > 0:
            out[job_id] = joules
    return out


def load_report(database: str, power, now_s: float, off_w: float = 10.0) -> EnergyReport:
    """The report of a service's record, read without writing to it (the service keeps writing)."""
    import sqlite3

    from greenslurm.clustermodel import InputError
    from greenslurm.slurm_plugin.record import read_only_uri

    try:
        db = sqlite3.connect(read_only_uri(database), uri=True, timeout=10)
    except sqlite3.Error as exc:
        raise InputError(f"cannot open the record: {exc}", path=database) from None
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if "decisions" not in tables:
            raise InputError("not a decision record of greenslurm hook serve", path=database)
        if "runs" not in tables:
            return EnergyReport([], None, 0.0, 0.0, now_s, now_s)
        cursor = db.execute("SELECT * FROM runs ORDER BY start_s, job_id")
        names = [d[0] for d in cursor.description]
        runs = [dict(zip(names, r)) for r in cursor]
        nodes = {r[0]: {"cpus": r[1], "gpus": r[2]} for r in db.execute("SELECT name, cpus, gpus FROM nodes")}
        samples = db.execute("SELECT time_s, watts FROM supply ORDER BY time_s").fetchall() \
            if "supply" in tables else []
        states = db.execute("SELECT time_s, name, state FROM node_power ORDER BY time_s").fetchall() \
            if "node_power" in tables else []
    except sqlite3.Error as exc:
        raise InputError(f"cannot read the record: {exc}", path=database) from None
    finally:
        db.close()
    supply = SupplySeries([t for t, _ in samples], [w for _, w in samples], "recorded forecast") if samples else None
    return energy_report(runs, nodes, power, supply, now_s, [tuple(r) for r in states], off_w)

"""What-if's baseline against reality: the **recorded** column (the schedule the export itself
recorded, measured with the replay's metric code) and how far the current policy's replay is from it.

The recorded column is :func:`greenslurm.sim.engine.recorded_schedule.recorded_schedule` put through
the same row as every policy (:func:`greenslurm.sweep_cell.figures`); figures it cannot know are ``None``
(energy without the jobs' nodes, rejections and power states it has no record of).  The distance is
:func:`greenslurm.sim.studies.slurm_fidelity.compare_schedules` over the jobs in both schedules,
compared by job id (jobs sharing their id with another job are left out of it, counted).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Mapping, Sequence

from greenslurm.clustermodel import Cluster, JobSpec

if TYPE_CHECKING:
    from greenslurm.sim.studies.slurm_fidelity import Fidelity

DEFAULT_TOLERANCE_S = 60.0
LABEL = "recorded"
# Figures of the row that need energy (the ledger's, and the supply's split of it).
SUPPLY_KEYS = ("renewable_kwh", "grid_kwh", "curtailed_kwh", "renewable_share")
# Figures the record has nothing to say about: admission, power states, replay-only counts.
NOT_RECORDED = ("rejected", "boots", "suspends", "saved_vs_idle_kwh", "refused_starts")


@dataclass
class Recorded:
    """The recorded column: its row (None when not available, with the reason)."""

    row: dict | None
    reason: str | None                            # why there is no column
    jobs: int = 0                                 # jobs in the column
    unusable: dict[str, int] = field(default_factory=dict)
    energy_missing: str | None = None
    starts: dict[str, tuple[float, float]] = field(default_factory=dict)   # job id -> (submit, start)


def recorded_column(jobs: Sequence[JobSpec], cluster: Cluster, supply=None,
                    reader_skipped: Mapping[str, int] | None = None) -> Recorded:
    """The recorded column of ``jobs`` (the jobs every policy replays) on ``cluster``."""
    from greenslurm.sim.engine.recorded_schedule import ENERGY_KEYS, recorded_schedule
    from greenslurm.sweep_cell import figures

    schedule = recorded_schedule(jobs, cluster)
    if not schedule.available:
        reasons = ", ".join(f"{reason}: {count:,}" for reason, count in sorted(schedule.unusable.items()))
        return Recorded(None, f"no job has a usable record ({reasons})", unusable=schedule.unusable)
    with_energy = schedule.energy_missing is None
    row = figures(schedule.result, jobs, supply if with_energy else None, reader_skipped=reader_skipped)
    for key in NOT_RECORDED + (() if with_energy else ENERGY_KEYS + SUPPLY_KEYS):
        row[key] = None
    if (row.get("utilization") or 0.0) > 1.0 + 1e-9:
        # the record holds more CPUs than this cluster has (it ran elsewhere, or the cluster file is
        # not the site's): a share of this cluster's capacity means nothing then
        row["utilization"] = None
    return Recorded(row, None, len(schedule.result.records), schedule.unusable, schedule.energy_missing,
                    schedule.starts())


@dataclass(frozen=True)
class Distance:
    """How far a replay is from the record (``fidelity`` None: no job in common, with the reason)."""

    policy: str
    tolerance_s: float
    fidelity: Fidelity | None
    reason: str | None = None
    not_replayed: int = 0          # recorded jobs the replay did not run (skipped, rejected)
    id_not_unique: int = 0         # jobs left out for sharing their id with another

    def as_dict(self) -> dict:
        data = {"policy": self.policy, "tolerance_s": self.tolerance_s, "available": self.fidelity is not None,
                "reason": self.reason, "not_replayed": self.not_replayed, "id_not_unique": self.id_not_unique}
        if self.fidelity is not None:
            figures = self.fidelity.as_dict()
            data["disagreeing_jobs"] = len(figures.pop("disagreeing"))
            data.update(figures)
        return data


def shared_ids(jobs: Sequence[JobSpec]) -> set[str]:
    """The job ids that more than one job carries (such jobs cannot be matched between schedules).

    >>> sorted(shared_ids([JobSpec("1", 0.0, 1.0), JobSpec("2", 0.0, 1.0), JobSpec("1", 5.0, 1.0)]))
    ['1']
    """
    seen: set[str] = set()
    shared: set[str] = set()
    for job in jobs:
        (shared if job.job_id in seen else seen).add(job.job_id)
    return shared


def distance(recorded: Recorded, policy: str, replayed: Mapping[str, tuple[float, float]], jobs: Sequence[JobSpec],
             tolerance_s: float) -> Distance:
    """The distance of a replay (job id -> (submit, start)) of ``jobs`` from their record."""
    from greenslurm.sim.studies.slurm_fidelity import compare_schedules

    if recorded.row is None:
        return Distance(policy, tolerance_s, None, "no recorded column")
    shared = shared_ids(jobs)
    id_not_unique = sum(1 for job in jobs if job.job_id in shared)
    ours = {job_id: times for job_id, times in recorded.starts.items() if job_id not in shared}
    theirs = {job_id: times for job_id, times in replayed.items() if job_id not in shared}
    not_replayed = len(ours.keys() - theirs.keys())
    if not ours.keys() & theirs.keys():
        return Distance(policy, tolerance_s, None, "no job is in both schedules", not_replayed, id_not_unique)
    return Distance(policy, tolerance_s, compare_schedules(ours, theirs, tolerance_s), None, not_replayed,
                    id_not_unique)


def baseline_text(recorded: Recorded, far: Distance, reader_skipped: Mapping[str, int], show_time):
    """The lines before the table (a rich renderable): the distance first, then what the recorded column
    holds.  A line indented under its heading keeps its indent when it wraps (see :func:`indented_lines`)."""
    from rich.markup import escape

    lines = []
    f = far.fidelity
    if f is None:
        lines.append(f"[bold]how far the current policy ({escape(far.policy)}) is from what the export recorded:[/] "
                     f"not known: {escape(far.reason or '')}")
    else:
        lines.append(
            f"[bold]how far the current policy ({escape(far.policy)}) is from what the export recorded[/], "
            f"over {f.jobs:,} jobs:\n"
            f"  mean wait {show_time(f.mean_wait_replayed_s)} replayed vs {show_time(f.mean_wait_recorded_s)} "
            f"recorded ({_relative(f.mean_wait_difference)}); start order agreement "
            f"{100.0 * f.order_agreement:.1f}% of jobs, pair concordance {100.0 * f.pair_concordance:.1f}% "
            f"(starts within {far.tolerance_s:g} s: in no order)\n"
            f"  start error median {show_time(f.start_error_median_abs_s)}, p90 {show_time(f.start_error_p90_abs_s)}; "
            f"{100.0 * f.within_tolerance:.1f}% of jobs started within {far.tolerance_s:g} s of their record")
        left = [f"{far.not_replayed:,} recorded jobs the replay did not run"] if far.not_replayed else []
        left += [f"{far.id_not_unique:,} jobs sharing a job id"] if far.id_not_unique else []
        if left:
            lines.append("  not compared: " + "; ".join(left))
    if recorded.row is None:
        lines.append(f"recorded column: not available: {escape(recorded.reason or '')}")
    else:
        total = recorded.jobs + sum(recorded.unusable.values())
        text = f"recorded column: {recorded.jobs:,} of {total:,} jobs, at their own recorded start and end"
        if recorded.unusable:
            text += " (left out: " + ", ".join(f"{escape(reason)}: {count:,}"
                                                for reason, count in sorted(recorded.unusable.items())) + ")"
        text += ("; energy: not available: " + escape(recorded.energy_missing) if recorded.energy_missing
                 else "; energy: the cluster's power model on the recorded nodes")
        lines.append(text)
    skipped = {reason: count for reason, count in reader_skipped.items() if count}
    if skipped:
        lines.append(f"in no column, as in every replay: {sum(skipped.values()):,} of the export's records ("
                     + ", ".join(f"{escape(reason)}: {count:,}" for reason, count in sorted(skipped.items())) + ")")
    return indented_lines("\n".join(lines))


def indented_lines(markup: str):
    """Lines of rich markup as one renderable in which a line's leading spaces indent every line it
    wraps to, not only its first (a wrapped "  ... pair" / "  concordance", never "concordance" at the
    margin)."""
    from rich.console import Group
    from rich.padding import Padding
    from rich.text import Text

    parts = []
    for line in markup.split("\n"):
        indent = len(line) - len(line.lstrip(" "))
        text = Text.from_markup(line[indent:])
        parts.append(Padding(text, (0, 0, 0, indent)) if indent else text)
    return Group(*parts)


def recorded_json(recorded: Recorded, reader_skipped: Mapping[str, int]) -> dict:
    """The recorded column in ``whatif --json``."""
    return {"available": recorded.row is not None, "reason": recorded.reason, "jobs": recorded.jobs,
            "unusable_by_reason": dict(sorted(recorded.unusable.items())),
            "reader_skipped_by_reason": dict(sorted((k, v) for k, v in reader_skipped.items() if v)),
            "energy_available": recorded.row is not None and recorded.energy_missing is None,
            "energy_missing": recorded.energy_missing, "figures": recorded.row}


def _relative(share: float) -> str:
    """A relative difference as a signed percentage.

    >>> _relative(-0.787), _relative(0.0), _relative(float("inf"))
    ('-78.7%', '+0.0%', 'the record has no wait')
    """
    if share == float("inf"):
        return "the record has no wait"
    return f"{100.0 * share:+.1f}%"

"""Green begin-time shifts: the hook inside the replay against the live hook on real daemons.

A forecast (``supply_file``, Unix epoch seconds) says no renewable power until ``GREEN_AFTER_S``
after the submissions, then plenty; hook.toml asks for green placement (``renewable = "green"``).
Four jobs are submitted, as an ordinary user, to real Slurm 22.05 with greenslurm's job_submit.lua
and decision service; the live hook moves the jobs with a deadline into the green hours (a
``begin_time``) and Slurm holds them until then.  The same jobs are replayed with the same hook.toml
in front of the slurm queue (read from the cluster's own slurm.conf): the replay must make the same
decisions (the same pinned nodes, the same begin times, to the second) and start the jobs when
Slurm did, within Slurm's latencies.

The cluster's main scheduler makes a full pass every ``SCHED_INTERVAL_S`` (10 s, not the test
clusters' 1 s), so that the recording also shows *when* Slurm starts a job whose begin time came:
at the main scheduler's first periodic pass at or after it (``_slurmctld_background``:
``difftime(now, last_full_sched_time) >= sched_interval``), as the slurm queue models it from
Slurm's source; neither at the begin time itself nor at a backfill cycle.  Expected values come
from the daemons, never from the replay.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path

import pytest

from greenslurm.clustermodel import JobSpec
from greenslurm.traces.slurm_conf import expand_hostlist
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from hook_replay_live import live_hook_run, replay_recorded  # noqa: E402
from slurm_cluster import NodeDef, skip_reason  # noqa: E402
from slurm_power_reference import log_epoch  # noqa: E402 (bench/: slurmctld's log, to the millisecond)

REASON = skip_reason()
pytestmark = [pytest.mark.slurm, pytest.mark.skipif(REASON is not None, reason=REASON or ""),
              pytest.mark.timeout(400)]

NODES = (NodeDef("n1", 4, 4000), NodeDef("n2", 4, 4000))
SCHED_INTERVAL_S = 10
GREEN_AFTER_S = 20          # the forecast's green hours begin this long after the cluster is up
GREEN_W = 5000.0            # more than both nodes draw busy (2 x 350 W): every job there is all green
# A job given a begin time starts at Slurm's first full pass or backfill cycle at or after it: the replay's passes
# count from its first submission, Slurm's from slurmctld's start (a phase the replay does not know),
# so the two may pick passes up to one sched_interval apart; plus a second for the background
# thread's wake-up and 0.5 s for a machine under load.
BEGIN_TOLERANCE_S = SCHED_INTERVAL_S + 1.0 + 0.5
# A job that starts at once, or follows another on its nodes: one second per scheduler step, as in
# tests/test_hook_replay_live.py.
STEP_TOLERANCE_S = 1.0
LOAD_SLACK_S = 0.5
BATCH_SCHED_DELAY_S = 3         # Slurm 22.05's default

_FULL_PASS = re.compile(r"^\[([^\]]+)\] (?:debug: +)?sched: Running job scheduler for full queue")
_BACKFILL_CYCLE = re.compile(r"^\[([^\]]+)\] (?:debug: +)?sched/backfill: _attempt_backfill: beginning")
_MAIN_START = re.compile(r"^\[([^\]]+)\] sched: Allocate JobId=(\d+) ")


def script(seconds: int, deadline: str | None = None) -> str:
    return "#!/bin/sh\n" + (f"#SBATCH --deadline={deadline}\n" if deadline else "") + f"sleep {seconds}\n"


# With the forecast (0 W now, GREEN_W from +20 s) and the limits the hook plans (whole minutes):
# j1 (1 CPU, no deadline) is left alone (no_deadline = untouched): pinned, started at once (first, so
# that no pass before it shifts the phase of the replay's passes against Slurm's); j2 and j3 (4 CPUs,
# 1 min, due in 10 min) are moved into the green hours.  Measured: the live hook plans them one after
# the other on j1's node (from the end of j1's limit, then of j2's) rather than one on the free node
# at +20 (the same renewable share): two begin times, the second one a limit after the first.
WORKLOAD = [
    (("-t", "1", "-n", "1"), script(3)),
    (("-t", "1", "-n", "4"), script(4, "now+600")),
    (("-t", "1", "-n", "4"), script(4, "now+600")),
]

def full_passes(log: str) -> list[float]:
    """The main scheduler's full-queue passes (SlurmctldDebug=debug), epoch seconds."""
    return [log_epoch(m.group(1)) for m in map(_FULL_PASS.match, log.splitlines()) if m]


def backfill_cycles(log: str) -> list[float]:
    """The backfill thread's cycles (SlurmctldDebug=debug), epoch seconds."""
    return [log_epoch(m.group(1)) for m in map(_BACKFILL_CYCLE.match, log.splitlines()) if m]


def main_scheduler_starts(log: str) -> set[str]:
    """The jobs the main scheduler started (``sched: Allocate``; backfill logs ``_start_job``)."""
    return {m.group(2) for m in map(_MAIN_START.match, log.splitlines()) if m}


@pytest.fixture(scope="module")
def recorded():
    def supply_file(root):
        return dict(renewable="green", supply_file=str(root / "supply.csv"))

    def write_forecast(root):
        # slurmctld's background thread serves a submission's request batch_sched_delay (3 s) after its
        # own start at the earliest; the replay knows no such start: submit once that time has passed
        time.sleep(BATCH_SCHED_DELAY_S + 1)
        t0 = int(time.time())           # written before the service starts: it decides with it from the first job
        supply = root / "supply.csv"
        supply.write_text(f"time_s,watts\n{t0 - 3600},0\n{t0 + GREEN_AFTER_S},{GREEN_W:g}\n")
        supply.chmod(0o644)
        return dict(t0=t0)

    with live_hook_run("greenslurm-hook-green-replay-", NODES, WORKLOAD, settings=supply_file, prepare=write_forecast,
                       extra_conf=(f"SchedulerParameters=sched_interval={SCHED_INTERVAL_S},bf_interval=30",),
                       timeout_s=GREEN_AFTER_S + 180) as run:
        run.update(passes=full_passes(run["log"]), cycles=backfill_cycles(run["log"]),
                   main_starts=main_scheduler_starts(run["log"]))
        yield run


def replayed(recorded):
    """The recorded submissions replayed with the hook (and its forecast) in front of the slurm queue."""
    slurm = list(recorded["jobs"].values())
    specs = []
    for row, job in zip(recorded["decisions"], slurm):
        times = recorded["times"][job["JobId"]]
        specs.append(JobSpec(f"d{row['id']}", float(row["time_s"]), float(row["time_limit_s"]),
                             runtime_s=times["end"] - times["start"], cpus=int(row["cpus"]),
                             nodes=int(row["nodes"] or 0), deadline_s=row["deadline_s"], user=row["user"] or ""))
    return replay_recorded(recorded, specs), specs


def test_the_live_hook_moved_jobs_into_the_green_hours(recorded):
    """The workload does what it is for: every job accepted, the two with a deadline moved into the
    green hours (begin times set, planned all green), the one without a deadline not."""
    assert [code for code, _, _ in recorded["submitted"]] == [0, 0, 0]
    rows = recorded["decisions"]
    green_from = recorded["t0"] + GREEN_AFTER_S
    assert rows[0]["begin_set_s"] is None
    for row in rows[1:]:            # moved: its begin time in the green hours, later than its earliest start
        assert row["begin_set_s"] >= green_from > row["earliest_start_s"] + 1, row
        assert row["renewable_share_earliest"] < row["renewable_share"] == 1.0, row
    for row, job in zip(rows, recorded["jobs"].values()):
        assert expand_hostlist(job["NodeList"]) == row["planned_nodes"].split(",")


def test_slurm_starts_a_job_whose_begin_time_came_at_its_next_pass(recorded):
    """The recording behind the slurm queue's rule: a job held by its begin time starts at the first
    pass after the begin time that looks at it: the main scheduler's periodic full pass (every
    sched_interval) or a backfill cycle (due after something changed), whichever comes first;
    never at the begin time itself (no event marks it)."""
    passes, cycles = recorded["passes"], recorded["cycles"]
    assert len(passes) >= 3
    gaps = [b - a for a, b in zip(passes, passes[1:])]
    assert min(gaps) > SCHED_INTERVAL_S - 1               # periodic: every sched_interval (whole seconds compared)
    for row, job in zip(recorded["decisions"], recorded["jobs"].values()):
        if row["begin_set_s"] is None:
            continue
        start = recorded["times"][job["JobId"]]["start"]
        by_main = job["JobId"] in recorded["main_starts"]
        first = min(p for p in (passes if by_main else cycles) if p >= row["begin_set_s"])
        other = min((p for p in (cycles if by_main else passes) if p >= row["begin_set_s"]), default=float("inf"))
        assert 0 <= start - first < 0.5, (job["JobId"], by_main, start - row["begin_set_s"], start - first)
        assert first <= other, (job["JobId"], by_main, first, other)
        assert start - row["begin_set_s"] <= SCHED_INTERVAL_S + 1


def test_the_replay_makes_the_live_hooks_green_decisions(recorded):
    outcome, specs = replayed(recorded)
    answers = outcome.replay.admission.answers
    assert not outcome.result.rejected
    for row, spec in zip(recorded["decisions"], specs):
        answer = answers[spec.job_id]
        assert answer.get("req_nodes") == row["planned_nodes"], (row, answer)
        begin = answer.get("begin_time")
        assert (None if begin is None else float(begin)) == row["begin_set_s"], (row, answer)
    # whatif's figures: two jobs moved, each by GREEN_AFTER_S less the time to its decision
    moves = outcome.replay.admission.moves_s
    assert sorted(moves) == sorted(spec.job_id for row, spec in zip(recorded["decisions"], specs)
                                   if row["begin_set_s"] is not None)


def test_the_replay_starts_the_jobs_when_slurm_did(recorded):
    outcome, specs = replayed(recorded)
    starts = {r.job_id: (r.start_s, r.node_indices) for r in outcome.result.records}
    names = [node.name for node in outcome.cluster.nodes]
    for row, spec, job in zip(recorded["decisions"], specs, recorded["jobs"].values()):
        start, nodes = starts[spec.job_id]
        slurm_start = recorded["times"][job["JobId"]]["start"]
        if row["begin_set_s"] is not None:
            assert start >= row["begin_set_s"]
            tolerance = BEGIN_TOLERANCE_S
        else:
            tolerance = STEP_TOLERANCE_S + LOAD_SLACK_S
        assert abs(start - slurm_start) <= tolerance, (spec.job_id, start - slurm_start, tolerance)
        assert [names[i] for i in nodes] == expand_hostlist(job["NodeList"])

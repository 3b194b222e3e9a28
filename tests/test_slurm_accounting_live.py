"""QOS and fair-share on real Slurm 22.05 with slurmdbd, and the replay of the same run.

One recording (module-scoped, about 95 s: ``bench/slurm_reference_accounts.py``'s check workload,
see its docstring for the jobs and the real-time layout) on real daemons: a private mariadbd,
slurmdbd, slurmctld with accounting, users, accounts and QOS made with sacctmgr, every job submitted
by its own ordinary Unix user.  The tests check what Slurm did (so that a change in Slurm or in the
harness shows), then replay the recording (its slurm.conf, sacctmgr dumps and fair-share passes,
time scaled by 60) and check that the replay did the same.

Margins: Slurm stamps whole seconds (60 trace seconds here) and starts a job up to about a second
after the resources free (its next scheduling cycle), which the replay does not model; the chains
of jobs waiting one for another here are at most four long (qblk, qh, ql, qn), so a replayed start
may be up to 4 real seconds (240 trace seconds) from the recorded one.  Orders and priorities are
compared exactly.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from slurm_cluster import accounting_skip_reason  # noqa: E402

import bench_slurm_fidelity as fidelity  # noqa: E402
import slurm_reference_accounts as accounts_ref  # noqa: E402
from greenslurm.sim.engine.slurm_fairshare import FairShareTree  # noqa: E402

REASON = accounting_skip_reason()
pytestmark = [pytest.mark.slurm, pytest.mark.skipif(REASON is not None, reason=REASON or ""),
              pytest.mark.timeout(400)]

TRACE_PER_REAL_S = accounts_ref.SPEEDUP
CHAIN_MARGIN_S = 4 * TRACE_PER_REAL_S        # see the module's docstring


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """(recorded jobs by name, the recording, replayed records by name, the replay's queue)."""
    from slurm_reference import VARIANTS, record

    out = tmp_path_factory.mktemp("accounting")
    recording = record(accounts_ref.check_workload(), VARIANTS["backfill-fine"], out, speedup=TRACE_PER_REAL_S,
                       nodes=accounts_ref.NODES, partitions=accounts_ref.PARTITIONS,
                       priority=accounts_ref.PRIORITY, accounting=accounts_ref.ACCOUNTING, timeout_s=240)
    data = recording.to_json()
    result, queue, _ = fidelity.replay_recording(data)
    return ({r["name"]: r for r in recording.jobs}, data, {r.job_id: r for r in result.records}, queue)


def order(starts: dict, names: list[str]) -> list[str]:
    """``names`` by start time (ties by name, so that equal starts compare as sets)."""
    return sorted(names, key=lambda n: (starts[n], n))


def recorded_starts(jobs: dict) -> dict:
    return {name: r["start_trace_s"] for name, r in jobs.items()}


def replayed_starts(records: dict) -> dict:
    return {name: r.start_s for name, r in records.items()}


# -- what Slurm did ---------------------------------------------------------------------------------
def test_slurm_orders_by_qos_priority(run):
    jobs = run[0]
    # qh (high, 100000 x 100/100), ql (low, 100000 x 20/100) and qn (normal, 0) were submitted in the
    # order n, l, h in one second; their fair-share factors were equal (no usage before the first pass)
    assert order(recorded_starts(jobs), ["qn", "ql", "qh"]) == ["qh", "ql", "qn"]
    assert (jobs["qh"]["priority"], jobs["ql"]["priority"], jobs["qn"]["priority"]) == (110000, 30000, 10000)
    assert jobs["qh"]["start_epoch"] >= jobs["qblk"]["end_epoch"]
    assert jobs["ql"]["start_epoch"] >= jobs["qh"]["end_epoch"] and jobs["qn"]["start_epoch"] >= jobs["ql"]["end_epoch"]


def test_slurm_holds_back_a_users_jobs_beyond_max_jobs_per_user(run):
    jobs = run[0]
    m1, m2, m3, m4 = (jobs[n] for n in ("m1", "m2", "m3", "m4"))
    # 8 CPUs were free for the 4 x 2 CPUs: m1 and gsa-q2's m4 start within Slurm's cycle (2 s); only
    # the limit (one job of gsa-q1 at a time) serialises m1, m2, m3
    assert m1["start_epoch"] <= m1["submit_epoch"] + 2 and m4["start_epoch"] <= m4["submit_epoch"] + 2
    assert m2["start_epoch"] >= m1["end_epoch"] and m3["start_epoch"] >= m2["end_epoch"]


def test_slurm_caps_the_cpus_of_a_qos_at_its_grptres(run):
    jobs = run[0]
    g1, g2, g3, g4, g5 = (jobs[n] for n in ("g1", "g2", "g3", "g4", "g5"))
    assert all(g["start_epoch"] <= g["submit_epoch"] + 2 for g in (g1, g2))
    # g3 (2 CPUs) and g4 (1 CPU) waited with 4 CPUs free: 4 held + theirs > cpu=4
    assert min(g3["start_epoch"], g4["start_epoch"]) >= min(g1["end_epoch"], g2["end_epoch"])
    # g5 (normal QOS) behind them in the queue started at once: blocked jobs do not hold back the partition
    assert g5["start_epoch"] < g3["start_epoch"] and g5["start_epoch"] <= g5["submit_epoch"] + 2


def test_slurm_ranks_the_fair_share_contenders_by_fair_tree(run):
    jobs = run[0]
    contenders = ["f-p1", "f-p2", "f-c1", "f-c2"]
    # chem (u2 2 CPUs x 20 s, u3 1 x 10 s) used less than phys (u1 4 x 40 s): both chem users go
    # first, c2 (less usage) before c1; then phys: p2 (no usage) before p1
    assert order(recorded_starts(jobs), contenders) == ["f-c2", "f-c1", "f-p2", "f-p1"]
    # 8 user associations (root's own user included): ranks 7, 6, 4, 3 of 8 times 10000
    assert [jobs[n]["priority"] for n in ("f-c2", "f-c1", "f-p2", "f-p1")] == [8750, 7500, 5000, 3750]
    passes = run[1]["fairshare_passes"]
    assert len(passes) >= 2 and passes[1]["trace_s"] - passes[0]["trace_s"] == 3600


# -- the replay of it ---------------------------------------------------------------------------------
def test_the_replay_gives_every_job_slurms_priority(run):
    jobs, _, replayed, queue = run
    assert set(replayed) == set(jobs) and not queue.rejected
    # QOS and fair-share factors (fair-share moved between submission and start for f-*) exactly
    assert {n: queue.priority_at_start[n] for n in jobs} == {n: r["priority"] for n, r in jobs.items()}


@pytest.mark.parametrize("group", [["qblk", "qn", "ql", "qh"], ["m1", "m2", "m3", "m4"],
                                   ["g1", "g2", "g3", "g4", "g5"], ["f-p1", "f-p2", "f-c1", "f-c2"]])
def test_the_replay_starts_each_group_in_slurms_order(run, group):
    jobs, _, replayed, _ = run
    recorded, replay = recorded_starts(jobs), replayed_starts(replayed)
    # every pair Slurm started more than one real second apart (its stamps and cycles blur less)
    ordered = [(a, b) for a in group for b in group if recorded[a] + TRACE_PER_REAL_S < recorded[b]]
    assert ordered and [(a, b) for a, b in ordered if not replay[a] < replay[b]] == []


def running_at(records: list, t: float) -> list:
    return [r for r in records if r.start_s <= t < r.end_s]


def test_the_replay_holds_the_limits_as_slurm_did(run):
    jobs, _, replayed, _ = run
    limited = [replayed[n] for n in ("m1", "m2", "m3", "m4")]
    capped = [replayed[n] for n in ("g1", "g2", "g3", "g4")]
    for r in limited:                   # MaxJobsPerUser=1: never two of one user's limited jobs at once
        users = [jobs[x.job_id]["user"] for x in running_at(limited, r.start_s)]
        assert len(users) == len(set(users)), r.start_s
    for r in capped:                    # GrpTRES=cpu=4
        assert sum(x.cpus for x in running_at(capped, r.start_s)) <= 4, r.start_s
    # the limits, not the nodes, held m2, m3 and g3 or g4 back; the others of the groups did not wait
    # (the replay starts a job at its submission when nothing holds it: no scheduling latency here)
    waited = {n for n in ("m1", "m2", "m3", "m4", "g1", "g2", "g3", "g4", "g5") if replayed[n].wait_s > 0}
    assert {"m2", "m3"} <= waited and waited & {"g3", "g4"} and not waited & {"m4", "g5"}


def test_replayed_starts_are_within_the_chain_margin(run):
    jobs, _, replayed, _ = run
    errors = {n: replayed[n].start_s - r["start_trace_s"] for n, r in jobs.items()}
    assert max(abs(e) for e in errors.values()) <= CHAIN_MARGIN_S, errors


def test_fair_share_usage_and_levels_equal_slurms_at_every_pass(run):
    """Fed with the starts and ends Slurm recorded, the fair-share model's level fair-share of every
    association equals what slurmctld logged at each pass (its decay, r x d^r per run, end usage)."""
    jobs, data, _, _ = run
    assoc = fidelity.recorded_accounts(data)
    passes = data["fairshare_passes"]
    tree = FairShareTree(assoc.associations, half_life_s=2 * 3600.0, calc_period_s=3600.0,
                         time_scale=TRACE_PER_REAL_S, origin_s=float(passes[0]["trace_s"]))
    events = sorted([(r["start_trace_s"], 1, r) for r in jobs.values()]
                    + [(r["end_trace_s"], 0, r) for r in jobs.values()], key=lambda e: (e[0], e[1]))
    compared = 0
    for p in passes:
        for t, starting, r in [e for e in events if e[0] <= p["trace_s"]]:
            if starting:
                tree.job_started(r["name"], r["user"], r["account"], r["cpus"], 1.0, t)
            else:
                tree.job_ended(r["name"], t)
        events = [e for e in events if e[0] > p["trace_s"]]
        tree.advance(p["trace_s"])
        for key, logged in p["level_fs"].items():
            account, user = key.split("/")
            assert tree.level_fs(account, user) == pytest.approx(float(logged), rel=1e-9), (p["trace_s"], key)
            compared += 1
    assert compared >= 24          # 12 associations at two passes at least

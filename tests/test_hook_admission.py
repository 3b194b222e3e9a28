"""The live hook's decisions inside the replay (greenslurm.slurm_plugin.admission): the hook service's
own decide() answers each submission on the cluster as the replay holds it, in front of the slurm
queue, which honours what it answers (a rejection with its reason, the nodes a job is pinned to, a
begin time).  Exact small cases with the arithmetic in comments, a property, and the scenario/CLI."""

from __future__ import annotations

import subprocess
import sys

from hypothesis import given, settings, strategies as st

from greenslurm.clustermodel import Cluster, JobSpec
from greenslurm.sim.engine.replay import Replay
from greenslurm.slurm_plugin.admission import HookAdmission
from greenslurm.slurm_plugin.config import HookConfig

# Two nodes of 4 CPUs.  Slurm holds time limits in whole minutes: 100 s -> 2 min, 60 s -> 1 min.
JOBS = [JobSpec("a", 0.0, 100.0, runtime_s=100.0, cpus=4),
        JobSpec("b", 10.0, 100.0, runtime_s=50.0, cpus=8, deadline_s=150.0),
        JobSpec("c", 20.0, 60.0, runtime_s=30.0, cpus=2),
        JobSpec("d", 30.0, 60.0, runtime_s=30.0, cpus=4, deadline_s=200.0)]


def replay(jobs=JOBS, cluster=None, **settings):
    cluster = cluster or Cluster.homogeneous(2, cpus=4)
    config = HookConfig(**settings)
    config.check()
    admission = HookAdmission(config, cluster)
    run = Replay(jobs, cluster, "slurm", admission=admission)
    return run.run(), admission


def test_the_hook_rejects_pins_and_the_slurm_queue_honours_it_exact():
    """a (t=0) starts on n0 at once, pinned there; Slurm shows it running until its limit, 0 + 120.
    b (t=10, 8 CPUs: both nodes, limit 120 s) can start at 120 at the earliest and end at 240 >
    deadline 150: rejected by greedy, never queued.  c (t=20, 2 CPUs) is pinned to the free n1 and
    runs 20-50.  d (t=30, 4 CPUs, limit 60 s, deadline 200): the hook's best fit plans it on n0 from
    120 (a's limit; ends 180 <= 200) and pins it there, so although n1 is free from 50 it waits for
    n0, which a frees at 100 (its run time): d runs 100-130 on n0."""
    result, admission = replay()
    assert sorted((r.job_id, r.start_s, r.end_s, r.node_indices) for r in result.records) == [
        ("a", 0.0, 100.0, (0,)), ("c", 20.0, 50.0, (1,)), ("d", 100.0, 130.0, (0,))]
    [rejected] = result.rejected
    assert (rejected.job_id, rejected.policy, rejected.reason) == ("b", "greedy", "cannot end by its deadline")
    assert "earliest end 240 s > deadline 150 s" in rejected.detail
    assert [admission.answers[j]["action"] for j in "abcd"] == ["modify", "reject", "modify", "modify"]
    assert [admission.answers[j].get("req_nodes") for j in "acd"] == ["n0", "n1", "n0"]


def test_without_the_hook_the_job_that_cannot_meet_its_deadline_holds_the_others_back():
    """Without the hook b is queued first (FIFO) and waits for both nodes; the main scheduler stops
    at it (its partition, every node, is blocked) and nothing backfills with SchedulerType's default
    here, so b runs 100-150 on both nodes (past its deadline 150? it ends at 150: just met) and c and d
    wait for it: both run 150-180."""
    result = Replay(JOBS, Cluster.homogeneous(2, cpus=4), "slurm").run()
    assert sorted((r.job_id, r.start_s, r.end_s) for r in result.records) == [
        ("a", 0.0, 100.0), ("b", 100.0, 150.0), ("c", 150.0, 180.0), ("d", 150.0, 180.0)]
    assert not result.rejected


def test_a_begin_time_the_hook_sets_holds_the_job_until_slurms_periodic_pass():
    """With set_begin_time the hook gives d the begin time of its planned start, 120.  n0 is free
    from 100 (a ends), but d is not eligible before 120; no event comes at 120 and Slurm's periodic
    pass (every sched_interval, 60 s from the first submission: 60, 120) starts it: d runs 120-150."""
    result, admission = replay(set_begin_time=True)
    assert admission.answers["d"]["begin_time"] == 120
    starts = {r.job_id: (r.start_s, r.end_s, r.node_indices) for r in result.records}
    assert starts["d"] == (120.0, 150.0, (0,))


def test_shadow_mode_decides_and_changes_nothing():
    """In shadow mode the hook records what it would do and answers accept: every job runs as
    without the hook."""
    shadow, _ = replay(shadow=True)
    plain = Replay(JOBS, Cluster.homogeneous(2, cpus=4), "slurm").run()
    assert sorted((r.job_id, r.start_s, r.node_indices) for r in shadow.records) == sorted(
        (r.job_id, r.start_s, r.node_indices) for r in plain.records)


@settings(max_examples=40)
@given(st.lists(st.tuples(st.integers(0, 300), st.integers(1, 8), st.integers(1, 5), st.integers(1, 300),
                          st.one_of(st.none(), st.integers(0, 900))), min_size=1, max_size=10))
def test_every_job_runs_or_is_rejected_with_a_reason_and_runs_are_repeatable(rows):
    jobs = [JobSpec(str(i), float(t), 60.0 * limit_min, runtime_s=float(min(run, 60 * limit_min)), cpus=cpus,
                    deadline_s=None if slack is None else float(t + slack))
            for i, (t, cpus, limit_min, run, slack) in enumerate(rows)]
    result, admission = replay(jobs)
    ran = {r.job_id for r in result.records}
    rejected = {r.job_id for r in result.rejected}
    assert ran | rejected == {j.job_id for j in jobs} and not ran & rejected
    assert all(r.reason for r in result.rejected)
    for record in result.records:          # a pinned job ran on its pinned nodes
        pinned = admission.answers[record.job_id].get("req_nodes")
        if pinned:
            assert tuple(f"n{i}" for i in record.node_indices) == tuple(pinned.split(","))
    again, _ = replay(jobs)
    assert [(r.job_id, r.start_s, r.node_indices) for r in again.records] == [
        (r.job_id, r.start_s, r.node_indices) for r in result.records]


def test_the_hook_goes_in_front_of_the_slurm_queue_only(tmp_path):
    hook = tmp_path / "hook.toml"
    hook.write_text('[hook]\nacceptance = "greedy"\n')
    trace = tmp_path / "t.swf"
    trace.write_text("; MaxProcs: 8\n1 0 0 10 1 -1 -1 1 20 -1 1 1 1 -1 1 -1 -1 -1\n")

    def replay_with(*options):
        return subprocess.run([sys.executable, "-m", "greenslurm", "replay", str(trace), *options, "--hook", str(hook)],
                              capture_output=True, text=True, timeout=120)
    easy = replay_with("--queue", "easy")
    assert easy.returncode == 2 and "Traceback" not in easy.stderr
    assert "--hook" in easy.stderr and "slurm queue" in easy.stderr and len(easy.stderr.strip().splitlines()) == 1
    slurm = replay_with("--queue", "slurm")
    assert slurm.returncode == 0, slurm.stderr
    assert "jobs completed" in slurm.stdout

"""When the slurm queue starts a job whose begin time came (a begin time the hook sets, or ``sbatch
--begin``): the rule recorded on real Slurm 22.05 (``tests/test_hook_replay_green_live.py``, with
``sched_interval=10``): no event marks a begin time; the job starts at the first pass at or after it
that looks at it: the main scheduler's periodic full pass (every ``sched_interval``) or a backfill
cycle (every ``bf_interval`` at most, and only after a job, node or partition changed: backfill.c
``_more_work``), whichever comes first.  Recorded: a job whose begin time was 14:01:10 started at
the full pass of 14:01:19.19; one whose begin time was 14:00:10 at the backfill cycle of
14:00:19.72, 0.16 s before the next full pass (a job had ended since the last cycle).

The table's times count from the first submission, where the slurm queue's timers start: full
passes at 0, 10, 20, ...; with ``bf_interval=25``, backfill cycles at 0 and 25 (if something changed
since the last one), ...
"""

from __future__ import annotations

import pytest

from greenslurm.clustermodel import JobSpec
from greenslurm.sim.engine.admission import Admitted
from greenslurm.sim.engine.replay import Replay
from greenslurm.sim.engine.slurm_accounting import strategy_options
from greenslurm.sim.engine.slurm_model import SlurmScheduling
from greenslurm.traces.slurm_conf import cluster_from_slurm_conf, parse_slurm_conf


class BeginTimes:
    """Admission that accepts every job with the begin time given for it (as ``sbatch --begin``)."""

    name = "begin"

    def __init__(self, begins: dict[str, float]) -> None:
        self.begins = begins

    def decide(self, spec, now_s, running, waiting) -> Admitted:
        return Admitted(True, begin_s=self.begins.get(spec.job_id))


def starts(tmp_path, jobs, begins) -> dict[str, float]:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=t\nSchedulerType=sched/backfill\n"
                    "SchedulerParameters=sched_interval=10,bf_interval=25\n"
                    "NodeName=n[1-2] CPUs=4 RealMemory=4000\n"
                    "PartitionName=p Nodes=n[1-2] Default=YES MaxTime=UNLIMITED\n")
    parsed = parse_slurm_conf(conf)
    replay = Replay(jobs, cluster_from_slurm_conf(parsed), "slurm",
                    strategy_options=strategy_options(SlurmScheduling.from_conf(parsed), None),
                    admission=BeginTimes(begins))
    return {record.job_id: record.start_s for record in replay.run().records}


HELD = JobSpec("held", 0.0, 60.0, runtime_s=5.0, cpus=4)
# a 1-CPU job that ends at 3 s: a change, so the backfill thread cycles at 25 (its last cycle at 0 + 25)
ENDS_AT_3 = JobSpec("short", 0.0, 60.0, runtime_s=3.0, cpus=1)


@pytest.mark.parametrize("begin_s, start_s", [
    (5.0, 10.0),      # the full pass at 10
    (10.0, 10.0),     # the begin time on a pass: that pass starts it (Slurm: begin_time > now is false)
    (13.0, 20.0),     # never at the begin time itself: the next full pass
    (20.5, 30.0),     # a fraction past a pass: the next one
    (21.0, 30.0),     # no backfill cycle at 25: nothing changed since the one at the submission
])
def test_a_held_job_starts_at_the_first_full_pass_at_or_after_its_begin_time(tmp_path, begin_s, start_s):
    assert starts(tmp_path, [HELD], {"held": begin_s}) == {"held": start_s}


@pytest.mark.parametrize("begin_s, start_s", [
    (21.0, 25.0),     # the backfill cycle at 25 (due after the end at 3) comes before the full pass at 30
    (25.0, 25.0),
    (26.0, 30.0),     # after that cycle nothing changed: the full pass at 30
])
def test_a_backfill_cycle_after_a_change_may_start_it_first(tmp_path, begin_s, start_s):
    held = JobSpec("held", 0.5, 60.0, runtime_s=5.0, cpus=4)
    assert starts(tmp_path, [ENDS_AT_3, held], {"held": begin_s}) == {"short": 0.0, "held": start_s}

"""What real Slurm 22.05 with slurmdbd does with QOS and fair-share: the reference for the replay's
accounting (QOS priority, MaxJobsPerUser, GrpTRES=cpu, fair tree with usage decay).

The site: four nodes of 4 CPUs, partition ``qos`` = n1-n2 (default) and ``fs`` = n3-n4.  Accounts
under root (each ``Fairshare=1``): ``phys`` (users gsa-p1, gsa-p2), ``chem`` (gsa-c1, gsa-c2), ``ops``
(gsa-ops) and ``qosacct`` (gsa-q1, gsa-q2), all ordinary Unix users (created if missing) that submit
their own jobs.  QOS: ``normal`` (priority 0, everyone's default), ``low`` (20), ``high`` (100),
``limited`` (MaxJobsPerUser=1) and ``capped`` (GrpTRES=cpu=4).  Priority: fair-share weight 10000,
QOS weight 100000 (so that QOS orders before fair-share: 100000 x 20/100 > 10000), nothing else;
PriorityCalcPeriod one minute (Slurm's least), PriorityDecayHalfLife two minutes.

Time is compressed 60 times as in ``bench/slurm_reference.py`` (a trace hour is a real minute), but
the fair-share passes run every real minute from slurmctld's start, so the workloads are laid out
in real seconds around them: usage made before a pass orders the jobs that wait across it.

    python bench/slurm_reference_accounts.py --out /tmp/acct-check                  # the test's 21 jobs, ~90 s
    python bench/slurm_reference_accounts.py --validation 150 --out /tmp/acct-v150   # about 7 min
    python bench/bench_slurm_fidelity.py /tmp/acct-v150

Needs root and the Debian packages ``munge slurmctld slurmd slurm-client mariadb-server slurmdbd``.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "bench"))

from slurm_cluster import Accounting, NodeDef  # noqa: E402

import slurm_reference as ref  # noqa: E402

SPEEDUP = 60.0
NODES = tuple(NodeDef(f"n{i}", 4, 4000) for i in range(1, 5))
PARTITIONS = ("PartitionName=qos Nodes=n[1-2] Default=YES MaxTime=INFINITE State=UP",
              "PartitionName=fs Nodes=n[3-4] MaxTime=INFINITE State=UP")
PRIORITY = ("PriorityType=priority/multifactor", "PriorityWeightAge=0", "PriorityWeightFairshare=10000",
            "PriorityWeightJobSize=0", "PriorityWeightPartition=0", "PriorityWeightQOS=100000",
            "PriorityFavorSmall=NO", "PriorityCalcPeriod=1", "PriorityDecayHalfLife=2")
ACCOUNTS = {"phys": ("gsa-p1", "gsa-p2"), "chem": ("gsa-c1", "gsa-c2"), "ops": ("gsa-ops",),
            "qosacct": ("gsa-q1", "gsa-q2")}
QOS = (("low", "Priority=20"), ("high", "Priority=100"), ("limited", "MaxJobsPerUser=1"),
       ("capped", "GrpTRES=cpu=4"))
USERS = tuple(user for users in ACCOUNTS.values() for user in users)
ACCOUNT_OF = {user: account for account, users in ACCOUNTS.items() for user in users}
# one sacctmgr command per QOS, one for the accounts, one per account's users (each takes 0.4-0.8 s)
ACCOUNTING = Accounting(
    users=USERS,
    commands=(*(("add", "qos", name, limit) for name, limit in QOS),
              ("add", "account", ",".join(ACCOUNTS), "Fairshare=1"),
              *(("add", "user", ",".join(users), f"Account={account}", "Fairshare=1",
                 "QOS=normal,low,high,limited,capped", "DefaultQOS=normal") for account, users in ACCOUNTS.items())))


def job(name: str, real_submit: float, partition: str, user: str, tasks: int, real_runtime: float,
        qos: str = "", nodes: int = 0) -> ref.RefJob:
    """A job laid out in real seconds (limit one real minute: one trace hour)."""
    return ref.RefJob(name=name, submit_s=SPEEDUP * real_submit, partition=partition, tasks=tasks, nodes=nodes,
                      time_limit_s=3600.0, runtime_s=SPEEDUP * real_runtime, user=user,
                      account=ACCOUNT_OF[user], qos=qos)


def check_workload() -> list[ref.RefJob]:
    """21 jobs, about 70 real seconds, each group showing one effect (real seconds; the first
    fair-share pass after slurmctld's start comes about 59 s after the first submission).  Events
    that must keep their order are 2 s apart: Slurm stamps whole seconds, so 1 s apart could look
    simultaneous.

    - QOS priority (qos partition): qblk holds both nodes until ~9 s; qn (normal), ql (low), qh
      (high), submitted in that order at 2 s, each wanting both nodes, start qh, ql, qn.
    - MaxJobsPerUser=1 (qos): gsa-q1's m1, m2, m3 and gsa-q2's m4 (2 CPUs each) at 20 s on 8 free
      CPUs: m1 and m4 start, m2 after m1, m3 after m2.
    - GrpTRES=cpu=4 (qos): g1, g2 (2 CPUs, 6 s), g3 (2 CPUs), g4 (1 CPU) in QOS capped at 31 s:
      g1 and g2 hold the 4 CPUs; g3 and g4 wait although 4 CPUs are free, and the normal g5 behind
      them starts at once (a blocked job does not hold back its partition).
    - Fair-share (fs partition): u1 (gsa-p1, 4 CPUs x 40 s), u2 (gsa-c1, 2 x 20 s), u3 (gsa-c2,
      1 x 10 s) make usage from 0 s; fb (gsa-ops) holds both fs nodes 48-61 s; f-p1, f-p2, f-c1, f-c2
      (both nodes each, 2 s), submitted in that order at 50 s with equal priority (no usage at the
      first pass), are ranked at the pass at ~59 s by fair tree: chem used less than phys, so c2, c1
      (chem's users by their usage) start before p2 (no usage at all) and p1.
    """
    q1, q2 = "gsa-q1", "gsa-q2"
    return [
        job("qblk", 0, "qos", q1, 8, 8, nodes=2),
        job("qn", 2, "qos", q1, 8, 3, "normal", 2), job("ql", 2, "qos", q2, 8, 3, "low", 2),
        job("qh", 2, "qos", q1, 8, 3, "high", 2),
        job("m1", 20, "qos", q1, 2, 3, "limited"), job("m2", 20, "qos", q1, 2, 3, "limited"),
        job("m3", 20, "qos", q1, 2, 3, "limited"), job("m4", 20, "qos", q2, 2, 3, "limited"),
        job("g1", 31, "qos", q1, 2, 6, "capped"), job("g2", 31, "qos", q2, 2, 6, "capped"),
        job("g3", 31, "qos", q1, 2, 3, "capped"), job("g4", 31, "qos", q2, 1, 3, "capped"),
        job("g5", 31, "qos", q2, 4, 3),
        job("u1", 0, "fs", "gsa-p1", 4, 40), job("u2", 0, "fs", "gsa-c1", 2, 20), job("u3", 0, "fs", "gsa-c2", 1, 10),
        job("fb", 48, "fs", "gsa-ops", 8, 13, nodes=2),
        *(job(f"f-{user[-2:]}", 50, "fs", user, 8, 2, nodes=2) for user in ("gsa-p1", "gsa-p2", "gsa-c1", "gsa-c2")),
    ]


def validation_workload(count: int = 150, seed: int = 22) -> list[ref.RefJob]:
    """``count`` jobs over about count x 2 real seconds: every user submits, one job in five in QOS
    high or low, one in eight in limited or capped, sizes 1-8 CPUs (whole-partition jobs pinned to
    both nodes), runtimes 3-25 real seconds; a queue builds on both partitions, so priorities
    (fair-share ranks moving with every pass, usage decaying) decide who starts.  Deterministic."""
    rng = random.Random(seed)
    jobs, t = [], 0.0
    for i in range(count):
        t += rng.choice((0, 1, 2, 2, 3, 4))
        user = rng.choice(USERS)
        draw = rng.random()
        qos = ("high" if draw < 0.1 else "low" if draw < 0.2 else "limited" if draw < 0.26
               else "capped" if draw < 0.32 else "")
        tasks = rng.choice((1, 1, 2, 2, 3, 4, 4, 8))
        if qos == "capped":
            tasks = min(tasks, 4)
        jobs.append(job(f"a{i:03d}", t, rng.choice(("qos", "fs")), user, tasks, rng.randint(3, 25), qos,
                        nodes=2 if tasks == 8 else 0))
    return jobs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--validation", type=int, metavar="N", default=0,
                        help="N jobs of the validation workload (default: the test's workload)")
    parser.add_argument("--seed", type=int, default=22, help="seed of the validation workload")
    parser.add_argument("--out", type=Path, required=True, help="folder for schedule.json/.csv, slurm.conf, "
                                                                "assoc.txt, qos.txt")
    args = parser.parse_args(argv)
    jobs = validation_workload(args.validation, args.seed) if args.validation > 0 else check_workload()
    recording = ref.record(jobs, ref.VARIANTS["backfill-fine"], args.out, speedup=SPEEDUP, nodes=NODES,
                           partitions=PARTITIONS, priority=PRIORITY, accounting=ACCOUNTING,
                           timeout_s=max(300.0, 4 * max(j.submit_s + j.runtime_s for j in jobs) / SPEEDUP))
    print(f"{len(recording.jobs)} jobs in {recording.wall_s:.1f} s wall, {len(recording.fairshare_passes)} "
          f"fair-share passes -> {args.out}")
    for r in recording.jobs:
        print(f"  {r['name']:>6} {r['partition']:>4} {r['user']:>8} {r['qos'] or 'normal':>8} "
              f"submit={r['submit_trace_s']:>6} start={r['start_trace_s']:>6} end={r['end_trace_s']:>6} "
              f"by={r['scheduler']} prio={r['priority']} fs={r['priority_factors'].get('fairshare')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

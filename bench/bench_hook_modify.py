"""The check of a user's change to a pending job (``scontrol update``, job_submit.lua's
slurm_job_modify) inside the decision service's answering loop, at site scale.

The service compares a plan of the cluster with the change against one without it.  The plan without
the change is the same for every change until the next sync or the next accepted job, so the service
keeps it: a change then costs one plan.  Both are timed in one run on the same seeded snapshot (see
bench/bench_hook_view.py): ``baseline``, the kept plan forgotten before each change (two plans, as
every change cost before), and ``kept``; their ratio is the figure.

    python bench/bench_hook_modify.py                      # 300 nodes, 300 running, 300 pending
    python bench/bench_hook_modify.py --nodes 1000 --running 1000 --pending 1000 --changes 10
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_hook_view import NOW, snapshot  # noqa: E402
from greenslurm.slurm_plugin.config import HookConfig  # noqa: E402
from greenslurm.slurm_plugin.record import DecisionRecord  # noqa: E402
from greenslurm.slurm_plugin.service import DecisionService  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--running", type=int, default=300)
    parser.add_argument("--pending", type=int, default=300)
    parser.add_argument("--changes", type=int, default=20, help="changes timed each way")
    args = parser.parse_args(argv)
    snap = snapshot(args.nodes, args.running, args.pending)
    with tempfile.TemporaryDirectory() as folder:
        record = DecisionRecord(str(Path(folder) / "record.sqlite"))
        service = DecisionService(HookConfig(socket=str(Path(folder) / "s"), database=str(Path(folder) / "d")), record)
        service.swap_view(service.install_view(snap, NOW), NOW)
        # the last pending job's deadline was checked; the others' time limits change
        checked = snap.pending[-1]
        service.checked_deadlines = {checked.job_id: NOW + 30 * 86400.0}
        ids = [p.job_id for p in snap.pending[:-1]]
        took = {"baseline": [], "kept": []}
        for k in range(2 * args.changes):
            way = "baseline" if k % 2 == 0 else "kept"          # interleaved: the same load on both
            request = {"op": "modify", "id": k, "uid": 1000, "job_id": ids[k % len(ids)], "new_time_limit": 30,
                       "untrusted": {}}
            if way == "baseline":
                service.forget_plans()
            else:
                service.modify(dict(request, job_id=ids[(k + 1) % len(ids)]))   # the kept plan is there
            started = time.perf_counter()
            answer = service.modify(request)
            took[way].append(time.perf_counter() - started)
            assert answer.get("action") in ("accept", "reject"), answer
        record.close()
    base, kept = (np.median(took[w]) * 1e3 for w in ("baseline", "kept"))
    print(f"{args.nodes} nodes, {args.running} running, {args.pending} pending; {args.changes} changes each way")
    print(f"  baseline (both plans): median {base:.1f} ms")
    print(f"  kept plan (one plan):  median {kept:.1f} ms")
    print(f"  ratio kept / baseline: {kept / base:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Node lists a user writes (``-w``, ``-x``, ``scontrol update ExcNodeList=``) matched against the
cluster's node names by the hook (:class:`greenslurm.traces.slurm_hostlist.HostNames`), never expanded;
timed against expanding them (``expand_hostlist``, what the hook did before) in the same run.

The lists: the reproduction ``n[1-60000],m[1-39999]`` (99,999 names), ``n[1-99999999]``, and the
worst a 4 KiB field holds: 450 overlapping one-bracket items, then 450 two-bracket items (each tried
name by name).  The cluster: ``--nodes`` names ``n1`` ... (default 4, the test cluster; try 10000), indexed once (as
the view does at each sync, in its worker thread).

    python bench/bench_hook_hostlist.py
    python bench/bench_hook_hostlist.py --nodes 10000
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from greenslurm.traces.slurm_conf import expand_hostlist  # noqa: E402
from greenslurm.traces.slurm_hostlist import HostNames


def lists() -> dict[str, str]:
    one = ",".join(f"n[{i}-9999{i % 10}]" for i in range(800))
    two = ",".join(f"n[{i % 90}-99]x[{i % 10}-9]" for i in range(800))
    return {"reproduction": "n[1-60000],m[1-39999]", "hundred million": "n[1-99999999]",
            "4 KiB of one-bracket items": one[:one.rindex(",", 0, 4096)],
            "4 KiB of two-bracket items": two[:two.rindex(",", 0, 4096)]}


def best_of(runs: int, call) -> float:
    best = float("inf")
    for _ in range(runs):
        started = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - started)
    return best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args(argv)
    names = [f"n{i}" for i in range(1, args.nodes + 1)]
    # built once a sync, off the answering path (the view's worker thread)
    index = best_of(args.runs, lambda: HostNames(names).prepare())
    known = HostNames(names).prepare()
    print(f"{args.nodes} node names; best of {args.runs} runs; index built in {index * 1e3:.2f} ms (once a sync)")
    for label, text in lists().items():
        outcome = "matched"

        def match():
            nonlocal outcome
            try:
                known.members(text)
            except ValueError:
                outcome = "refused"           # too many items of several groups to try name by name
        matched = best_of(args.runs, match)

        def expand():
            try:
                set(expand_hostlist(text, limit=100_000)) & set(names)
            except ValueError:
                pass                          # over 100,000 names: refused after counting them
        expanded = best_of(args.runs, expand)
        print(f"  {label:28s} ({len(text):5d} bytes): {outcome} {matched * 1e3:8.2f} ms, "
              f"expanded {expanded * 1e3:8.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())

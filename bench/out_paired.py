"""``replay --out`` of two installs paired in turn against our EASY (see docs/replay-engine.md, "Fewer
instructions after the hand-over"): whole processes, our EASY, the ``--out`` of the code before
(another environment's python, where an earlier commit is installed) and of this one, round after
round; medians of the per-round ratios.

    python bench/out_paired.py --before /path/to/other/venv/bin/python [--rounds 11] [--mode auto|child|off]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

TRACE = "/work/shared/data/swf/KTH-SP2-1996-2.1-cln.swf"


def command(python: str, trace: str, out: str | None) -> list[str]:
    return [python, "-m", "greenslurm", "replay", trace, "--queue", "easy", "--no-progress",
            *(["--out", out] if out else [])]


def once(argv: list[str], env: dict) -> tuple[float, float]:
    """Wall seconds and CPU seconds (the children's included) of one whole process."""
    started = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                               cwd=tempfile.gettempdir())
    _, status, usage = os.wait4(process.pid, 0)
    if status != 0:
        raise SystemExit(f"failed: {' '.join(argv)}")
    return time.perf_counter() - started, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", required=True, help="the python of the environment holding the code before")
    parser.add_argument("--rounds", type=int, default=11)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--mode", default="auto", help="GREENSLURM_OUT_PROCESS for both (auto, child, off)")
    parser.add_argument("--trace", default=TRACE)
    args = parser.parse_args()
    env = dict(os.environ, GREENSLURM_OUT_PROCESS=args.mode)
    folder = tempfile.mkdtemp()
    runs = {"easy": command(sys.executable, args.trace, None),
            "before": command(args.before, args.trace, os.path.join(folder, "before")),
            "after": command(sys.executable, args.trace, os.path.join(folder, "after"))}
    for _ in range(args.warmup):
        for argv in runs.values():
            once(argv, env)
    times: dict[str, list] = {name: [] for name in runs}
    loads = []
    for _ in range(args.rounds):
        loads.append(os.getloadavg()[0])
        for name, argv in runs.items():
            times[name].append(once(argv, env))
    median = statistics.median
    for name in ("before", "after"):
        wall = median(a[0] / e[0] for a, e in zip(times[name], times["easy"]))
        cpu = median(a[1] / e[1] for a, e in zip(times[name], times["easy"]))
        print(f"{name}: {wall:.2f}x wall, {cpu:.2f}x CPU of our EASY")
    wall = median(a[0] / b[0] for a, b in zip(times["after"], times["before"]))
    cpu = median(a[1] / b[1] for a, b in zip(times["after"], times["before"]))
    print(f"after against before: {wall:.2f}x wall, {cpu:.2f}x CPU; load {min(loads):.1f} to {max(loads):.1f}")


if __name__ == "__main__":
    main()

"""How long job_submit.lua's script scan takes inside slurmctld, on the scripts crafted against it.

The scan (job_submit.lua between its ">>> script scan" and "<<< script scan" lines, unchanged) runs in
lua5.1 through tests/lua/scan_script.lua on each script of tests/test_hook_lua.py's crafted set (up to
Slurm's 4 MB limit: runs of blanks, tabs, quotes, comment and empty lines, long and unterminated
lines, 1,000 and 300,000 option lines); each is scanned ``--repeat`` times and the CPU seconds of the
scan alone (os.clock around the call) are printed: minimum, median, maximum.  With ``--old``, the
line trim of the scan before the rewrite (``string.match(line, "^%s*(.-)%s*$")``) is timed beside it
on the 20 KB and 40 KB comment lines of the reported stall (the larger ones take hours).

With ``--live``, on real daemons (the cluster, rendered hook and service of tests/test_hook_attacks.py,
hook at its defaults): another user's sbatch round trips (``--submissions`` of them) while one user
submits 4 MB crafted scripts back to back, paired with the same number without the crafted
submissions, in the same run: median and maximum.

    python bench/bench_hook_scan.py [--repeat 5] [--old] [--live [--submissions 20]]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from test_hook_lua import SCAN, crafted_scripts  # noqa: E402

from greenslurm.slurm_plugin.config import HookConfig  # noqa: E402
from greenslurm.slurm_plugin.install import render_job_submit  # noqa: E402

OLD_TRIM = 'local t = os.clock(); string.match(io.read("*a"), "^%s*(.-)%s*$"); print(os.clock() - t)'


def live(submissions: int) -> None:
    """Another user's sbatch round trips with and without 4 MB crafted scripts submitted meanwhile."""
    import threading
    import time

    from test_hook_attacks import REASON, Attack
    if REASON:
        print(f"--live: {REASON}")
        return
    crafted = b"#!/bin/sh\n#" + b" " * (4 * 1024 * 1024 - 64) + b"x\ntrue\n"
    site = Attack()
    try:
        site.start()
        other = site.cluster.add_user("greenslurm-other")

        def round_trips() -> list[float]:
            took = []
            for _ in range(submissions):
                started = time.perf_counter()
                result = site.cluster.sbatch("--hold", "-t", "1", user=other)
                took.append((time.perf_counter() - started) * 1e3)
                assert result.returncode == 0, result.stderr
            return took

        quiet = round_trips()
        stop = threading.Event()
        crafted_count = [0]

        def attacker() -> None:
            while not stop.is_set():
                site.sbatch("--hold", "-t", "1", script=crafted)
                crafted_count[0] += 1

        thread = threading.Thread(target=attacker)
        thread.start()
        try:
            loud = round_trips()
        finally:
            stop.set()
            thread.join()
        for name, took in (("alone", quiet), (f"beside {crafted_count[0]} crafted 4 MB scripts", loud)):
            print(f"other user's sbatch, {name}: median {statistics.median(took):.1f} ms, max {max(took):.1f} ms")
    finally:
        site.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--old", action="store_true", help="also time the line trim of the scan before the rewrite")
    parser.add_argument("--live", action="store_true", help="also on real daemons, beside another user's sbatch")
    parser.add_argument("--submissions", type=int, default=20)
    args = parser.parse_args()
    lua = shutil.which("lua5.1")
    if lua is None:
        print("lua5.1 is not installed", file=sys.stderr)
        return 2
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        hook = folder / "job_submit.lua"
        hook.write_text(render_job_submit(HookConfig(socket=str(folder / "s"), database=str(folder / "d")),
                                       folder / "failures"))
        for name, (script, _, _) in crafted_scripts().items():
            path = folder / "script.sh"
            path.write_bytes(script)
            out = subprocess.run([lua, str(SCAN), str(hook), *[str(path)] * args.repeat], capture_output=True,
                                 text=True, check=True).stdout.splitlines()
            times = [float(line.split("\t")[2]) * 1e3 for line in out]
            print(f"{name:45s} {len(script):>9,d} B  scan ms min {min(times):8.3f}  median "
                  f"{statistics.median(times):8.3f}  max {max(times):8.3f}")
        if args.old:
            for size in (20_000, 40_000):
                line = b"#" + b" " * size + b"x"
                took = subprocess.run([lua, "-e", OLD_TRIM], input=line, capture_output=True, check=True).stdout
                print(f"old trim, comment line of {size:,d} blanks: {float(took) * 1e3:,.0f} ms")
    if args.live:
        live(args.submissions)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

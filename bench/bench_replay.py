"""Whole-process replay time and peak memory against a bare heap-based EASY reference, in one run.

Every row times two commands as whole processes, in turn (A B A B ...), and prints the medians of
wall time, CPU time (user + system) and peak resident memory, and the medians of the pairwise ratios
A/B: the machine's speed drifts, a ratio taken pair by pair does not (on a shared machine the CPU
ratio is the steadier one).  B is ``bench/easy_reference.py`` (standard library
only, a heapq event loop) on the same log, or our EASY on KTH-SP2 for the other queues.

    python bench/bench_replay.py                   # every row, 3 pairs each
    python bench/bench_replay.py --runs 5 --rows kth-easy,kth-fcfs
    python bench/bench_replay.py --json bench-replay.json

The million-job log is KTH-SP2 copied 36 times (each copy later by the log's span plus a day, jobs
renumbered), cut at 1,000,000 records, on KTH's 100 processors; it is written once to the
temporary folder.  Targets: the million-job EASY replay faster than the reference and below 500 MB;
KTH EASY and FCFS at most 1.0x the reference; conservative and the deadline queue at most 3x our
EASY; ``--out`` within 1.2x our EASY's wall time (15 % was the first goal).  ``kth-out-here`` is ``kth-out`` with jobs.csv and jobs.parquet
written in the command's own process (``GREENSLURM_OUT_PROCESS=off``) rather than its child process.

``site-year-slurm`` replays a synthetic year of a 1,000-node site (the million-job log's arrivals
squeezed into 365 days, run times and limits divided by 3, job sizes kept; written once to the
temporary folder) on the slurm queue against our EASY, both on the general loop; target: under 10
minutes and 2 GB.

The ``slurm-*`` rows replay a log on the slurm queue against our EASY on the same log with the same
options, both on the general loop (``GREENSLURM_POOL_CORE=off``): KTH-SP2's first 4,000 and 16,000
jobs and the whole log, lublin_256's first 2,000 and 4,000 jobs and the whole log, the two sacct
exports (xdmod-phillips on ``bench/phillips-gpu.toml``, xdmod-pozidriv with its slurm.conf); each
``-power`` row adds ``--power-down-after 600``.  Target: at most 3x our EASY.

``million-limit`` replays the million-job log with ``--limit 1000`` against its first 1,000 jobs cut
to a file (the reader stops at the limit: the peaks should match).  ``kth-conf-easy`` and
``kth-conf-conservative`` replay KTH-SP2 with ``tests/data/slurm-conf-pool/slurm.conf`` (its 100
processors as one-CPU nodes) on the processor-pool core against the general loop
(``GREENSLURM_POOL_CORE=off``).

Two rows put the start-up in context: ``import-floor`` times a process that only imports numpy and
rich (what every replay loads) against the reference's whole run, and ``demo`` times ``greenslurm
demo`` (2,000 jobs) against the bare interpreter.  Before timing, greenslurm's modules are
byte-compiled, as ``pip install .`` does (an editable checkout run with PYTHONDONTWRITEBYTECODE would
otherwise compile them in every timed process).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SWF = ROOT.parent / "shared" / "data" / "swf"
KTH = SWF / "KTH-SP2-1996-2.1-cln.swf"
LANL = SWF / "LANL-CM5-1994-4.1-cln.swf"
LUBLIN = SWF / "lublin_256_est.swf"
SACCT = ROOT.parent / "shared" / "data" / "sacct"
MILLION = 1_000_000
HEADER_KEYS = ("Version", "Computer", "MaxNodes", "MaxProcs", "UnixStartTime", "TimeZoneString")


def million_log(path: Path, records: int = MILLION) -> Path:
    """KTH-SP2 copied until ``records`` records, each copy shifted by the log's span plus a day.

    Written by a child process: a child's peak memory counts its parent's at the fork, so the
    parent that times the others stays small."""
    if not path.exists():
        subprocess.run([sys.executable, __file__, "--write-million", str(path), str(records)], check=True)
    return path


def write_million_log(path: Path, records: int) -> None:
    header, rows = [], []
    for line in KTH.read_text().splitlines():
        if line.startswith(";"):
            if line[1:].strip().split(":")[0] in HEADER_KEYS:
                header.append(line)
        elif line.strip():
            rows.append(line.split())
    shift = max(float(row[1]) for row in rows) + 86400
    partial = path.with_suffix(".part")
    with partial.open("w") as out:
        out.write("\n".join(header) + f"\n; Note: KTH-SP2 copied until {records:,} records, "
                                      f"copy k later by k x {shift:.0f} s\n")
        for n in range(records):
            copy, row = divmod(n, len(rows))
            row = rows[row]
            out.write(" ".join([str(copy * len(rows) + int(row[0])), f"{float(row[1]) + copy * shift:.0f}",
                                *row[2:]]) + "\n")
    partial.replace(path)


SITE_NODES = 1000
YEAR_S = 365 * 86400


def site_year_log(path: Path, records: int = MILLION) -> Path:
    """A synthetic year of a 1,000-node site (see :func:`write_site_year_log`), written once by a child."""
    if not path.exists():
        subprocess.run([sys.executable, __file__, "--write-site-year", str(path), str(records)], check=True)
    return path


def write_site_year_log(path: Path, records: int) -> None:
    """The million-job log (KTH-SP2 copies) made a year of a 1,000-node site: arrivals squeezed into
    365 days (about 30 times KTH-SP2's rate on 10 times its nodes), run times and limits divided by 3
    so the site stays about as busy as KTH-SP2 (utilisation near 70 %), job sizes kept (1 to 100
    nodes of 1,000)."""
    source = million_log(path.with_name("greenslurm-bench-kth-1M.swf"), records)

    def records_of():
        with source.open() as lines:
            for line in lines:
                if line.strip() and not line.startswith(";"):
                    yield line.split()

    first = last = None
    for row in records_of():
        first = first if first is not None else float(row[1])
        last = float(row[1])
    squeeze = (last - first) / YEAR_S
    partial = path.with_suffix(".part")
    with partial.open("w") as out:
        out.write(f"; MaxNodes: {SITE_NODES}\n; MaxProcs: {SITE_NODES}\n; Note: a synthetic year of a {SITE_NODES:,}-node "
                  f"site: KTH-SP2 copied to {records:,} records, arrivals divided by {squeeze:.2f}, run times and "
                  "limits by 3\n")
        for row in records_of():
            row[1] = f"{float(row[1]) / squeeze:.0f}"
            for field in (3, 8):                     # run time, requested time (-1: unknown)
                if float(row[field]) > 0:
                    row[field] = f"{max(float(row[field]) / 3, 1.0):.0f}"
            out.write(" ".join(row) + "\n")
    partial.replace(path)


def byte_compile() -> None:
    """Byte-compile greenslurm's packages in place, as an installed package has them."""
    import compileall
    for folder in ("greenslurm", "traces", "clustermodel", "sim", "allocation", "acceptance", "slurm_plugin"):
        compileall.compile_dir(ROOT / folder, quiet=1)


def run_once(command: list[str]) -> tuple[float, float, float]:
    """Wall seconds, CPU seconds (user + system) and peak resident MB of one whole process (its own rusage)."""
    started = time.perf_counter()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    error = process.stderr.read().decode()
    process.stderr.close()
    if process.returncode != 0:
        raise SystemExit(f"failed ({process.returncode}): {' '.join(command)}\n{error}")
    return wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024


def paired(a: list[str], b: list[str], runs: int, warmup: int = 1) -> dict:
    """A and B in turn after ``warmup`` pairs; medians and the median pairwise ratios."""
    for _ in range(warmup):
        run_once(a), run_once(b)
    pairs = [(run_once(a), run_once(b)) for _ in range(runs)]
    median = statistics.median
    figures = {}
    for i, name in enumerate(("s", "cpu_s", "mb")):
        figures[f"a_{name}"] = median(p[0][i] for p in pairs)
        figures[f"b_{name}"] = median(p[1][i] for p in pairs)
        figures[f"{name}_ratio"] = median(p[0][i] / p[1][i] for p in pairs)
    return figures


IMPORT_FLOOR = "import os; os.environ['OPENBLAS_NUM_THREADS'] = '1'; import numpy, rich.console, rich.table"


def cut_log(path: Path, records: int) -> Path:
    """The header and first ``records`` records of the SWF log ``path``, written beside it once."""
    cut = path.with_name(f"{path.stem}-first-{records}.swf")
    if not cut.exists() and path.exists():
        with path.open() as source, cut.open("w") as out:
            for line in source:
                if not line.startswith(";"):
                    if records == 0:
                        break
                    records -= 1
                out.write(line)
    return cut


POOL_CONF = ROOT / "tests" / "data" / "slurm-conf-pool" / "slurm.conf"     # KTH-SP2's 100 processors


def rows(million: Path, site_year: Path | None = None) -> dict[str, tuple[str, list[str], list[str], str]]:
    """name -> (work, our command, what it is compared with, the other's name)."""
    site_year = site_year or million.with_name("greenslurm-bench-site-year.swf")
    ours = [sys.executable, "-m", "greenslurm", "replay"]
    general_loop = ["env", "GREENSLURM_POOL_CORE=off", *ours]
    conf = ["--slurm-conf", str(POOL_CONF), "--no-progress"]
    ref = [sys.executable, str(ROOT / "bench" / "easy_reference.py")]
    easy = ours + [str(KTH), "--queue", "easy", "--no-progress"]
    out_dir = str(Path(tempfile.gettempdir()) / "greenslurm-bench-out")
    overloaded = ["--arrival-scale", "0.25", "--limit", "16000"]
    return {
        "kth-easy": ("KTH-SP2 EASY", easy, ref + [str(KTH)], "reference"),
        "kth-fcfs": ("KTH-SP2 FCFS", ours + [str(KTH), "--queue", "fcfs", "--no-progress"],
                     ref + [str(KTH), "--fcfs"], "reference"),
        "lanl-easy": ("LANL-CM5 (122k jobs) EASY", ours + [str(LANL), "--queue", "easy", "--no-progress"],
                      ref + [str(LANL)], "reference"),
        "million-easy": ("1M jobs (KTH copies) EASY", ours + [str(million), "--queue", "easy", "--no-progress"],
                         ref + [str(million)], "reference"),
        "kth-out": ("KTH-SP2 EASY --out", easy + ["--out", out_dir], easy, "our EASY"),
        # jobs.parquet written in the command's own process instead of its child process
        "kth-out-here": ("KTH-SP2 EASY --out, GREENSLURM_OUT_PROCESS=off",
                         ["env", "GREENSLURM_OUT_PROCESS=off", *easy, "--out", out_dir], easy, "our EASY"),
        "kth-conservative": ("KTH-SP2 conservative", ours + [str(KTH), "--queue", "conservative", "--no-progress"],
                             easy, "our EASY"),
        "import-floor": ("importing numpy and rich, nothing else", [sys.executable, "-c", IMPORT_FLOOR],
                         ref + [str(KTH)], "reference on KTH-SP2"),
        "demo": ("greenslurm demo (2,000 jobs)", [sys.executable, "-m", "greenslurm", "demo", "--no-progress"],
                 [sys.executable, "-c", "pass"], "the interpreter alone"),
        "million-limit": ("1M jobs (KTH copies) EASY --limit 1000",
                          ours + [str(million), "--limit", "1000", "--queue", "easy", "--no-progress"],
                          ours + [str(cut_log(million, 1000)), "--queue", "easy", "--no-progress"],
                          "the log's first 1,000 jobs cut to a file"),
        "kth-conf-easy": ("KTH-SP2 EASY --slurm-conf (100 single-CPU nodes)", ours + [str(KTH), "--queue", "easy", *conf],
                          general_loop + [str(KTH), "--queue", "easy", *conf], "the general loop"),
        "kth-conf-conservative": ("KTH-SP2 conservative --slurm-conf (100 single-CPU nodes)",
                                  ours + [str(KTH), "--queue", "conservative", *conf],
                                  general_loop + [str(KTH), "--queue", "conservative", *conf], "the general loop"),
        "kth-overloaded-conservative": ("KTH-SP2's first 16,000 jobs arriving 4x as fast, conservative",
                                        ours + [str(KTH), *overloaded, "--queue", "conservative", "--no-progress"],
                                        ours + [str(KTH), *overloaded, "--queue", "easy", "--no-progress"],
                                        "our EASY on the same jobs"),
        "kth-overloaded-deadline": ("KTH-SP2's first 16,000 jobs arriving 4x as fast, deadline queue",
                                    ours + [str(KTH), *overloaded, "--queue", "deadline", "--no-progress"],
                                    ours + [str(KTH), *overloaded, "--queue", "easy", "--no-progress"],
                                    "our EASY on the same jobs"),
        "site-year-slurm": ("a synthetic year of a 1,000-node site (1M jobs), slurm queue",
                            general_loop + [str(site_year), "--queue", "slurm", "--no-progress"],
                            general_loop + [str(site_year), "--queue", "easy", "--no-progress"],
                            "our EASY on the general loop"),
        "kth-deadline": ("KTH-SP2 deadline queue, greedy, bestfit",
                         ours + [str(KTH), "--queue", "deadline", "--acceptance", "greedy", "--select", "bestfit",
                                 "--no-progress"], easy, "our EASY"),
        **slurm_rows(general_loop),
    }


SLURM_INPUTS = {          # row -> (what it replays, the log and its options)
    "slurm-kth-4k": ("KTH-SP2's first 4,000 jobs", [str(KTH), "--limit", "4000"]),
    "slurm-kth-16k": ("KTH-SP2's first 16,000 jobs", [str(KTH), "--limit", "16000"]),
    "slurm-kth": ("KTH-SP2 (28,475 jobs)", [str(KTH)]),
    "slurm-lublin-2k": ("lublin_256's first 2,000 jobs", [str(LUBLIN), "--limit", "2000"]),
    "slurm-lublin-4k": ("lublin_256's first 4,000 jobs", [str(LUBLIN), "--limit", "4000"]),
    "slurm-lublin": ("lublin_256 (10,000 jobs)", [str(LUBLIN)]),
    "slurm-phillips": ("xdmod-phillips on phillips-gpu.toml",
                       [str(SACCT / "xdmod-phillips.log"), "--cluster", str(ROOT / "bench" / "phillips-gpu.toml")]),
    "slurm-pozidriv": ("xdmod-pozidriv with its slurm.conf",
                       [str(SACCT / "xdmod-pozidriv.log"), "--slurm-conf",
                        str(ROOT / "bench" / "data" / "xdmod-pozidriv-slurm.conf")]),
}


def slurm_rows(general_loop: list[str]) -> dict[str, tuple[str, list[str], list[str], str]]:
    """The slurm queue against our EASY on the same log and options, both on the general loop;
    each input also with power saving (``-power``: ``--power-down-after 600``)."""
    out = {}
    for name, (work, inputs) in SLURM_INPUTS.items():
        for suffix, extra in (("", []), ("-power", ["--power-down-after", "600"])):
            options = [*inputs, *extra, "--no-progress"]
            out[name + suffix] = (f"{work}{', power saving' if extra else ''}, slurm queue",
                                  general_loop + [*options, "--queue", "slurm"],
                                  general_loop + [*options, "--queue", "easy"], "our EASY on the general loop")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="pairs timed per row, after one warm-up pair")
    parser.add_argument("--warmup", type=int, default=1, help="pairs run first and not counted")
    parser.add_argument("--rows", help="comma-separated rows (default: all): " + ", ".join(rows(Path("x"))))
    parser.add_argument("--json", help="write the measurements here")
    parser.add_argument("--write-million", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--write-site-year", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.write_million:
        write_million_log(Path(args.write_million[0]), int(args.write_million[1]))
        return 0
    if args.write_site_year:
        write_site_year_log(Path(args.write_site_year[0]), int(args.write_site_year[1]))
        return 0
    site_year = Path(tempfile.gettempdir()) / "greenslurm-bench-site-year.swf"
    plan = rows(million_log(Path(tempfile.gettempdir()) / "greenslurm-bench-kth-1M.swf"), site_year)
    chosen = args.rows.split(",") if args.rows else list(plan)
    unknown = [name for name in chosen if name not in plan]
    if unknown:
        parser.error(f"unknown rows {', '.join(unknown)}; choose from {', '.join(plan)}")
    if "site-year-slurm" in chosen:
        site_year_log(site_year)
    byte_compile()
    print(f"whole processes, {args.runs} pairs A B A B after {args.warmup} warm-up pairs, medians")
    print("| work | greenslurm: wall, CPU, peak RSS | compared with | ratio: wall, CPU, memory |")
    print("|---|---|---|---|")
    measured = {}
    for name in chosen:
        work, ours, other, other_name = plan[name]
        m = measured[name] = paired(ours, other, args.runs, args.warmup)
        print(f"| {work} | {m['a_s']:.2f} s, {m['a_cpu_s']:.2f} s, {m['a_mb']:.0f} MB | {other_name} {m['b_s']:.2f} s, "
              f"{m['b_cpu_s']:.2f} s, {m['b_mb']:.0f} MB | {m['s_ratio']:.2f}x, {m['cpu_s_ratio']:.2f}x, "
              f"{m['mb_ratio']:.2f}x |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(measured, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

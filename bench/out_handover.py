"""What handing the child of ``replay --out`` the input columns before the replay could save (see
docs/replay-engine.md, "The input columns handed to the child before the replay").

Replays KTH-SP2 with EASY once (jobs.csv and jobs.parquet written in this process), then times, in
this warm process (CPU, runs interleaved): the jobs files' writing as now; the same with the input
columns' cells made beforehand in the table's final order (the ceiling: nothing gathered); and what
a real hand-over adds: finding each row's trace row by job id, gathering the premade cells into the
table's order, pickling the input columns.  Checks that the premade variant writes the same jobs.csv
bytes and a jobs.parquet that reads back equal.

With ``--timeline N``: N replays with the child (``GREENSLURM_OUT_PROCESS=child``) instead, each
printing the child's and the command's moments on ``CLOCK_MONOTONIC`` (the one clock of both
processes): how long before the hand-over the child had pyarrow's writer ready, how long the
hand-over took to reach it, how long it wrote (wall and CPU), the command's own work meanwhile and
its wait.

    python bench/out_handover.py [--runs 30] [--trace PATH] [--timeline N]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import pickle
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

INPUT_COLUMNS = ("job_id", "user", "partition", "submit_s", "requested_time_s")
TRACE = "/work/shared/data/swf/KTH-SP2-1996-2.1-cln.swf"


def replayed_jobs(trace: str, folder: str):
    """The jobs table (JobColumns) of an EASY replay of ``trace`` with ``--out``, in this process."""
    os.environ["GREENSLURM_OUT_PROCESS"] = "off"
    from greenslurm.cli import main
    from greenslurm.sim.reporting import outputs
    captured = {}
    writer = outputs.write_jobs_files

    def capturing(jobs, *args, **kwargs):
        captured["jobs"] = jobs
        return writer(jobs, *args, **kwargs)

    outputs.write_jobs_files = capturing
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            main(["replay", trace, "--queue", "easy", "--no-progress", "--out", folder])
    finally:
        outputs.write_jobs_files = writer
    return captured["jobs"]


def premade_writer(jobs, inputs):
    """write_jobs_files with the cells of ``inputs`` made now, in the table's order (per chunk)."""
    from greenslurm.sim.reporting import outputs as o
    from greenslurm.sim.reporting.cells import float_cells
    names = o.NodeNames(jobs)
    made = []
    for rows in o.row_chunks(jobs, o.submit_order(jobs)):
        values = o.job_columns(jobs, rows, inputs, o.BSLD_FLOOR_S, names)
        cells = {name: float_cells(v) if isinstance(v, np.ndarray) and v.dtype == np.float64 else v
                 for name, v in values.items()}
        made.append((rows, values, cells))
    rest = [name for name in o.JOB_COLUMNS if name not in inputs]

    def write(csv_path: Path, parquet_path: Path) -> None:
        def chunks(csv):
            csv.write(o.csv_rows([o.csv_texts([name]) for name in o.JOB_COLUMNS]))
            for rows, values, cells in made:
                columns = o.job_columns(jobs, rows, rest, o.BSLD_FLOOR_S, names)
                csv.write(o.csv_chunk([cells.get(name, columns.get(name)) for name in o.JOB_COLUMNS]))
                yield {**columns, **values}
        with o.whole_file(csv_path) as csv, o.whole_file(parquet_path) as parquet:
            o._write_parquet(parquet, chunks(csv))
    return write


def cpu_ms(work, runs: int) -> tuple[float, float]:
    """Least and median CPU milliseconds of ``work()`` over ``runs`` calls."""
    spent = []
    for _ in range(runs):
        before = time.process_time()
        work()
        spent.append(time.process_time() - before)
    return min(spent) * 1e3, statistics.median(spent) * 1e3


def timeline(trace: str) -> str:
    """One replay with the child, timed on both sides (see the module)."""
    os.environ["GREENSLURM_OUT_PROCESS"] = "child"
    from greenslurm.cli import main as command
    from greenslurm.sim.reporting import child_file, outputs
    marks_path = tempfile.mktemp()
    ready, write = outputs.ready_parquet_writer, outputs.write_jobs_files
    send, wait = child_file.ChildWriting.send, child_file.ChildWriting.wait
    here: dict[str, float] = {}

    def mark(name: str) -> None:                     # in the child: appended to a file the command reads
        with open(marks_path, "a", encoding="ascii") as handle:
            handle.write(f"{name} {time.monotonic()} {time.process_time()}\n")

    def ready_marked() -> None:
        ready()
        mark("ready")

    def write_marked(*args, **kwargs) -> None:
        mark("handed")
        write(*args, **kwargs)
        mark("written")

    def send_marked(self, payload) -> None:
        if "send" not in here:                       # the first send (the command's; the later one does nothing)
            here["send"], here["send cpu"] = time.monotonic(), time.process_time()
        send(self, payload)

    def wait_marked(self) -> None:
        here["wait"], here["wait cpu"] = time.monotonic(), time.process_time()
        wait(self)
        here["done"] = time.monotonic()

    outputs.ready_parquet_writer, outputs.write_jobs_files = ready_marked, write_marked
    child_file.ChildWriting.send, child_file.ChildWriting.wait = send_marked, wait_marked
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            command(["replay", trace, "--queue", "easy", "--no-progress", "--out", tempfile.mkdtemp()])
    finally:
        outputs.ready_parquet_writer, outputs.write_jobs_files = ready, write
        child_file.ChildWriting.send, child_file.ChildWriting.wait = send, wait
    with open(marks_path, encoding="ascii") as handle:
        child = {name: (float(at), float(cpu)) for name, at, cpu in map(str.split, handle)}
    os.unlink(marks_path)

    def ms(start: float, end: float) -> float:
        return (end - start) * 1e3
    return (f"child ready {ms(child['ready'][0], here['send']):.0f} ms before the hand-over; the hand-over reached "
            f"it in {ms(here['send'], child['handed'][0]):.0f} ms; it wrote for {ms(child['handed'][0], child['written'][0]):.0f} ms "
            f"({ms(child['handed'][1], child['written'][1]):.0f} ms CPU); the command's own work "
            f"{ms(here['send'], here['wait']):.0f} ms ({ms(here['send cpu'], here['wait cpu']):.0f} ms CPU), then it waited {ms(here['wait'], here['done']):.0f} ms, "
            f"{ms(max(child['written'][0], here['wait']), here['done']):.0f} ms of it after the child's writing ended")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--trace", default=TRACE)
    parser.add_argument("--timeline", type=int, default=0, metavar="N")
    args = parser.parse_args()
    if args.timeline:
        for _ in range(args.timeline):
            print(timeline(args.trace))
        return
    from greenslurm.inputs import read
    from greenslurm.sim.reporting import outputs as o
    from greenslurm.sim.reporting.cells import digits, float_cells, take
    folder = Path(tempfile.mkdtemp())
    jobs = replayed_jobs(args.trace, str(folder / "out"))
    o.ready_parquet_writer()
    variants = {"as now": lambda c, p: o.write_jobs_files(jobs, c, p),
                "input columns premade": premade_writer(jobs, INPUT_COLUMNS),
                "and cpus, gpus, deadline_s": premade_writer(jobs, INPUT_COLUMNS + ("cpus", "gpus", "deadline_s"))}
    spent: dict[str, list] = {name: [] for name in variants}
    for run in range(args.runs):                     # interleaved: the load falls on each alike
        for k, (name, write) in enumerate(variants.items()):
            spent[name].append(cpu_ms(lambda: write(folder / f"{k}.csv", folder / f"{k}.parquet"), 1)[0])
    for name, times in spent.items():
        print(f"jobs files after the hand-over, {name}: {min(times):.1f} ms least, "
              f"{statistics.median(times):.1f} ms median (CPU, {args.runs} runs)")
    import pyarrow.parquet as pq
    for k in range(1, len(variants)):
        assert (folder / f"{k}.csv").read_bytes() == (folder / "0.csv").read_bytes()
        assert pq.read_table(folder / f"{k}.parquet").equals(pq.read_table(folder / "0.parquet"))
    print("the same jobs.csv bytes, jobs.parquet equal on read-back")

    table = read(args.trace, "swf").table
    ids = np.asarray(table.job_id, dtype=np.int64)

    def trace_rows():
        by_id = np.argsort(ids, kind="stable")
        return by_id[np.searchsorted(ids, jobs.job_id, sorter=by_id)]
    source = trace_rows()
    assert (ids[source] == jobs.job_id).all()
    order = o.submit_order(jobs)
    _, shared = np.unique(jobs.submit_s, return_counts=True)
    print(f"jobs sharing a submit time: {int(shared[shared > 1].sum())}; table rows out of the trace's order: "
          f"{int((source[order] != np.sort(source[order])).sum())}")
    print("each row's trace row by job id: %.1f ms least, %.1f ms median" % cpu_ms(trace_rows, args.runs))
    names = o.NodeNames(jobs)
    premade = [digits(ids), names.texts("user", np.argsort(source)),
               float_cells(np.asarray(table.submit_s)), float_cells(np.asarray(table.requested_time_s))]

    def gather():
        for rows in o.row_chunks(jobs, order):
            for cells in premade:
                take(cells, source[rows])
    print("gathering 4 premade columns into the table's order: %.1f ms least, %.1f ms median" % cpu_ms(gather, args.runs))
    inputs = {name: getattr(jobs, name) for name in INPUT_COLUMNS}
    print("pickling the input columns: %.1f ms least, %.1f ms median; the whole jobs table: %.1f ms least, %.1f ms median"
          % (*cpu_ms(lambda: pickle.dumps(inputs, protocol=pickle.HIGHEST_PROTOCOL), args.runs),
             *cpu_ms(lambda: pickle.dumps(jobs, protocol=pickle.HIGHEST_PROTOCOL), args.runs)))


if __name__ == "__main__":
    main()

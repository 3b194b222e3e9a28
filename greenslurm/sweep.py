"""Sweeps: a grid of traces x policies x parameters x seeds, one replay per cell, resumable.

A *cell* is a plain, JSON-ready dict ``{"trace": ..., "policy": ..., "params": ..., "seed": ...}``;
:func:`cell_scenario` turns it into a :class:`~greenslurm.scenario.Scenario` (the one ``greenslurm run``
reads) and :func:`run_cell` replays that through :func:`greenslurm.scenario_run.run` into one flat row
of figures (the replay's summary plus the cell's identity).  A queue strategy registered in
``greenslurm.sim.engine.strategies.QUEUES`` and a node selection of
``greenslurm.allocation.selection`` are available to sweeps, ``whatif`` and ``report`` without any
change here.

Resuming: every finished cell is written to ``RESULTS/cells/<cell_id>.json`` (atomically: a temporary
file renamed into place) and one line is appended to ``RESULTS/ledger.jsonl``.  ``cell_id`` is a stable
hash of the cell (sorted-key JSON, SHA-256), so a rerun of the same spec skips every cell with a file
and runs only the rest.  At the end all finished cells of the spec are combined into
``RESULTS/results.parquet`` (one row per cell, ordered by trace, policy, parameters, seed).

Spec file (TOML; paths are relative to the spec file)::

    [sweep]
    name = "loads"
    seeds = 3                      # or a list: [0, 1, 2]

    [[trace]]
    name = "synthetic"
    synthetic = { jobs = 100 }     # seeded per cell (greenslurm.traces.synthetic.synthetic_jobs)
    cluster = { nodes = 8, cpus = 4 }   # or a cluster TOML file: cluster = "cluster.toml"

    [[trace]]
    name = "kth"
    path = "KTH.swf"               # any trace format; format = "swf" to say so; limit = 500 (first jobs)
                                   # slurm_conf = "slurm.conf": the site's cluster, and Slurm's settings
                                   # for policies with queue = "slurm"

    [[policy]]
    name = "easy"
    queue = "easy"

    [[policy]]
    name = "greedy-bestfit"
    queue = "deadline"
    select = "bestfit"             # the node selection (greenslurm.allocation.selection)
    options = { acceptance = "greedy" }

    [[policy]]
    name = "fgd"
    queue = "none"                 # the GPU papers' model on an openb pod list (nodes = "node_list.csv")
    select = "fgd"                 # or score = "fgd" with the papers' names (their bestfit = gpubestfit)

    [grid]                         # every combination of the values (see PARAMETERS)
    load = [0.5, 0.9]
    slack = [0.5, 1.0]

>>> from greenslurm.sweep_cell import run_cell
>>> from greenslurm.sweep_spec import parse_spec
>>> spec = parse_spec('''
... [sweep]
... seeds = 2
... [[trace]]
... name = "s"
... synthetic = { jobs = 20 }
... cluster = { nodes = 2, cpus = 4 }
... [[policy]]
... name = "fcfs"
... queue = "fcfs"
... [[policy]]
... name = "easy"
... queue = "easy"
... [grid]
... load = [0.5, 0.9]
... ''')
>>> len(spec.cells())          # 1 trace x 2 policies x 2 loads x 2 seeds
8
>>> row = run_cell(spec.cells()[0])
>>> row["policy"], row["seed"], row["load"], row["jobs_completed"]
('fcfs', 0, 0.5, 20)
>>> cell_id(spec.cells()[0]) == cell_id(parse_spec(spec.text).cells()[0])
True
"""
from __future__ import annotations

import json
import os
import time
from concurrent.futures import FIRST_COMPLETED, wait
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

from greenslurm.clustermodel import InputError
from greenslurm.inputs import check_input_file
from greenslurm.sim.reporting.whole_files import whole_file
from greenslurm.sim.workers import worker_pool
from greenslurm.sweep_cell import _safe_run, cell_id
from greenslurm.sweep_spec import SweepSpec

CELLS_DIR = "cells"
LEDGER = "ledger.jsonl"
RESULTS_PARQUET = "results.parquet"
FAILED_DIR = "failed"
# -- the store ------------------------------------------------------------------------------------
class ResultStore:
    """One JSON file per finished cell, a ledger of finished cells, the combined Parquet table."""

    def __init__(self, directory: str | Path) -> None:
        self.dir = Path(directory)
        self.cells_dir = self.dir / CELLS_DIR
        self.cells_dir.mkdir(parents=True, exist_ok=True)
        self._repair_ledger()

    def _repair_ledger(self) -> None:
        """Make the ledger agree with the cell files after a hard kill.

        A cell file is renamed into place before its ledger line is appended, so a kill between
        the two leaves a finished cell without a line, and a kill during the append leaves half a
        line.  The half line is cut off; each finished cell without a line gets one, marked
        ``recovered``.  The cell is not run again, and no cell appears twice.
        """
        path = self.dir / LEDGER
        if os.path.lexists(path):      # a pipe here blocked the resume; a link would be written through
            check_input_file(str(path), "sweep ledger")
        text = path.read_text(encoding="utf-8", errors="replace") if path.exists() else ""
        if text and not text.endswith("\n"):
            text = text[: text.rfind("\n") + 1]
            path.write_text(text, encoding="utf-8")
        listed = {_ledger_cell(line, str(path), number) for number, line in enumerate(text.splitlines(), 1) if line}
        missing = sorted(self.done() - listed)
        if missing:
            with open(path, "a", encoding="utf-8") as ledger:
                for cid in missing:
                    ledger.write(json.dumps({"cell_id": cid, "pid": os.getpid(), "time": time.time(),
                                             "recovered": True}) + "\n")

    def done(self) -> set[str]:
        paths = list(self.cells_dir.glob("*.json"))
        for path in paths:             # a pipe under a cell's name blocked the combining
            if not path.is_file():
                raise InputError(f"not a regular file (a device, pipe or socket), not a finished cell: {REMOVE_CELL}",
                                 path=str(path))
        return {p.stem for p in paths}

    def save(self, cid: str, cell: Mapping, row: Mapping) -> None:
        path = self.cells_dir / f"{cid}.json"
        with whole_file(path) as handle:        # a hidden part renamed once whole: never through a planted link
            handle.write(json.dumps({"cell": cell, "row": row}, sort_keys=True, default=_json_default).encode())
        with open(self.dir / LEDGER, "a", encoding="utf-8") as ledger:
            ledger.write(json.dumps({"cell_id": cid, "pid": os.getpid(), "time": time.time()}) + "\n")
        failed = self.dir / FAILED_DIR / f"{cid}.json"
        if failed.exists():
            failed.unlink()

    def save_failure(self, cid: str, cell: Mapping, error: str) -> None:
        folder = self.dir / FAILED_DIR
        folder.mkdir(exist_ok=True)
        with whole_file(folder / f"{cid}.json") as handle:
            handle.write(json.dumps({"cell": cell, "error": error}, sort_keys=True).encode())

    def rows(self, ids: Iterable[str] | None = None) -> list[dict]:
        wanted = None if ids is None else set(ids)
        rows = []
        for path in sorted(self.cells_dir.glob("*.json")):
            if wanted is not None and path.stem not in wanted:
                continue
            rows.append(_cell_row(path))
        return rows

    def combine(self, cells: Sequence[Mapping]) -> Path:
        order = {cell_id(c): i for i, c in enumerate(cells)}
        rows = sorted(self.rows(order), key=lambda r: order[r["cell_id"]])
        import pandas as pd          # results.parquet only: a sweep's start does not pay for pandas
        frame = pd.DataFrame(rows)
        path = self.dir / RESULTS_PARQUET
        with whole_file(path) as handle:        # never through a link planted under the name, never cut short
            frame.to_parquet(handle, index=False)
        return path


REMOVE_CELL = "remove it and rerun the sweep to run that cell again"


def _ledger_cell(line: str, path: str, number: int) -> str:
    """The cell id of a ledger line (a line greenslurm did not write is an InputError naming it)."""
    try:
        entry = json.loads(line)
        if isinstance(entry, dict) and isinstance(entry.get("cell_id"), str):
            return entry["cell_id"]
    except ValueError:
        pass
    raise InputError("not a ledger line greenslurm writes (a JSON object with a cell_id): remove the line",
                     path=path, line=number, field="cell_id")


def _cell_row(path: Path) -> dict:
    """The results row of a finished cell's file; a file edited, emptied or planted is an InputError."""
    try:
        cell = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(cell, dict) and isinstance(cell.get("row"), dict):
            return cell["row"]
        reason = "has no results row"
    except (ValueError, RecursionError) as exc:       # UnicodeDecodeError and JSONDecodeError are ValueErrors
        reason = f"not valid JSON ({str(exc)[:80]})"
    raise InputError(f"{reason}, not a finished cell: {REMOVE_CELL}", path=str(path))


def _json_default(value):
    if hasattr(value, "item"):
        return value.item()
    return str(value)


# -- running a sweep ------------------------------------------------------------------------------
@dataclass
class SweepOutcome:
    total: int
    skipped: int                       # already finished before this run
    ran: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    interrupted: bool = False
    results: Path | None = None
    elapsed_s: float = 0.0

    @property
    def complete(self) -> bool:
        return self.skipped + self.ran == self.total


def run_sweep(spec: SweepSpec, results_dir: str | Path, *, workers: int | None = None, dask: str | None = None,
              max_cells: int | None = None,
              progress: Callable[[int, int], None] | None = None,
              on_start: Callable[[int, int, str], None] | None = None) -> SweepOutcome:
    """Run the cells of ``spec`` not yet in ``results_dir``; combine all finished cells at the end.

    ``workers``: local processes (default: CPU count; 1 runs in this process).  ``dask``: a scheduler
    address ``tcp://host:port``, or ``"local"`` for a LocalCluster on loopback for this run only.
    ``max_cells``: stop after this many new cells (the rest is left for the next run).
    ``progress(done, total)`` is called as cells finish (done counts skipped cells too).
    """
    started = time.perf_counter()
    store = ResultStore(results_dir)
    cells = spec.cells()
    by_id = {cell_id(c): c for c in cells}
    finished = store.done() & set(by_id)
    todo = [c for c in cells if cell_id(c) not in finished]
    if max_cells is not None:
        todo = todo[:max(0, max_cells)]
    outcome = SweepOutcome(total=len(by_id), skipped=len(finished))
    if on_start is not None:
        on_start(len(by_id), len(finished), "dask" if dask else f"{_workers(workers)} local processes")
    done = len(finished)
    if progress is not None:
        progress(done, len(by_id))

    def finish(cid: str, row: dict | None, error: str | None) -> None:
        nonlocal done
        if row is None:
            outcome.failed[cid] = error or "failed"
            store.save_failure(cid, by_id[cid], outcome.failed[cid])
        else:
            store.save(cid, by_id[cid], row)
            outcome.ran += 1
        done += 1
        if progress is not None:
            progress(done, len(by_id))

    try:
        if dask:
            _run_dask(todo, dask, workers, finish)
        elif _workers(workers) <= 1 or len(todo) <= 1:
            for cell in todo:
                finish(*_safe_run(cell))
        else:
            _run_local(todo, _workers(workers), finish)
    except KeyboardInterrupt:
        outcome.interrupted = True
    finally:
        outcome.results = store.combine(cells)
        outcome.elapsed_s = time.perf_counter() - started
    return outcome


def _workers(workers: int | None) -> int:
    return max(1, workers if workers else (os.cpu_count() or 1))


def _run_local(todo: Sequence[Mapping], workers: int, finish) -> None:
    pool = worker_pool(workers)
    try:
        pending = {pool.submit(_safe_run, cell) for cell in todo}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_COMPLETED)
            for future in finished:
                finish(*future.result())
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _run_dask(todo: Sequence[Mapping], address: str, workers: int | None, finish) -> None:
    import logging

    from distributed import Client, LocalCluster, as_completed
    if logging.getLogger().getEffectiveLevel() >= logging.WARNING:     # quiet unless -v
        for name in ("distributed", "dask"):
            logging.getLogger(name).setLevel(logging.WARNING)
    cluster = None
    if address == "local":
        cluster = LocalCluster(n_workers=_workers(workers), threads_per_worker=1, processes=True,
                               host="127.0.0.1", dashboard_address=None)
        client = Client(cluster)
    else:
        client = Client(address)
    try:
        if not todo:
            return
        futures = client.map(_safe_run, list(todo), pure=False)
        try:
            for future in as_completed(futures):
                finish(*future.result())
        finally:
            unfinished = [f for f in futures if not f.done()]
            if unfinished:
                client.cancel(unfinished)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()

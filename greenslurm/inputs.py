"""Reading what the user names: trace files, cluster files, node lists, output paths.  Every failure
is an :class:`~greenslurm.clustermodel.InputError` naming the file.  Used by the CLI, every ``cmd_*``
module and :mod:`greenslurm.scenario_run`; imports none of them."""

from __future__ import annotations

import contextlib
import logging
import os
import time
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from greenslurm.clustermodel import InputError
from greenslurm.clustermodel.errors import missing_path, toml_error

if TYPE_CHECKING:                 # the cluster model (numpy) loads with the first cluster read
    from greenslurm.clustermodel import Cluster

log = logging.getLogger("greenslurm")

DEMO_TRACE = "KTH-SP2-1996-2.1-cln-first2000.swf"
DEMO_CLUSTER = "kth-sp2.toml"


def check_input_file(path: str, what: str = "trace") -> None:
    """Fail early, with the reader's wording, on what is not a readable file."""
    if not os.path.exists(path):
        raise missing_path(path)
    if os.path.isdir(path):
        raise InputError(f"is a directory, not a {what} file", path=path)
    if not os.path.isfile(path):
        # /dev/zero never ends (it was read until memory ran out), a FIFO blocks until someone writes
        raise InputError(f"not a regular file (a device, pipe or socket), not a {what} file", path=path)
    if not os.access(path, os.R_OK):
        raise InputError("cannot read: permission denied", path=path)


def read_toml(path: str, what: str) -> dict:
    """The TOML file ``path`` (a ``what``: "sweep spec", "power profile", ...) as a dict; a missing,
    unreadable, binary or malformed file is an InputError naming it."""
    import tomllib
    check_input_file(path, what)
    text = ""
    try:
        with open(path, "rb") as handle:
            text = handle.read().decode("utf-8")
        return tomllib.loads(text)
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=path) from None
    except UnicodeDecodeError as exc:
        raise InputError(f"not UTF-8 text (byte {exc.start}), not a {what}", path=path) from None
    except (ValueError, RecursionError) as exc:
        raise toml_error(exc, text, path) from None


def check_output_paths(out_dir: str | None, json_file: str | None, option: str = "--json") -> None:
    """Catch an output path that cannot work before a long replay, not after it (``option``: the option
    that named ``json_file``, for the messages)."""
    for name, value in (("--out", out_dir), (option, json_file)):
        if value == "":
            # an empty --out was the current folder: four files written where nobody asked
            raise InputError("empty file name", path="<command line>", field=name)
    if out_dir is not None and os.path.exists(out_dir) and not os.path.isdir(out_dir):
        raise InputError("exists and is not a directory (--out wants a directory)", path=out_dir)
    if json_file is not None and json_file != "-":
        if os.path.isdir(json_file):
            raise InputError(f"is a directory ({option} wants a file name)", path=json_file)
        parent = os.path.dirname(json_file) or "."
        if not os.path.isdir(parent):
            raise InputError(f"cannot write: no directory {parent}", path=json_file)
        if not os.access(json_file if os.path.exists(json_file) else parent, os.W_OK):
            raise InputError("cannot write: permission denied", path=json_file)


def make_output_folder(folder: str, option: str) -> Path:
    """Create the folder ``option`` names (``--plots DIR``, ``--tables DIR``), or say in one line why it
    cannot be written to; before the run, so that a long run never ends on a bad folder."""
    path = Path(folder)
    if path.exists() and not path.is_dir():
        raise InputError("is a file, not a folder", path=folder, field=option)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the folder: {exc.strerror}", path=folder, field=option) from None
    return path


def require_module(module: str, extra: str, option: str) -> None:
    """Refuse in one line an option whose optional package is not installed (instead of a
    traceback from deep inside the run).

    >>> require_module("json", "plot", "--plots")
    >>> require_module("no_such_module_here", "plot", "--plots")
    Traceback (most recent call last):
    ...
    greenslurm.clustermodel.errors.InputError: <command line>: field --plots: needs no_such_module_here, which is not installed: pip install 'greenslurm[plot]' (or pip install no_such_module_here)
    """
    try:
        __import__(module)
    except ImportError:
        raise InputError(f"needs {module}, which is not installed: pip install 'greenslurm[{extra}]' "
                         f"(or pip install {module})", path="<command line>", field=option) from None


def parse_columns(text: str | None) -> list[str] | None:
    """``'JobID|Submit, End'`` -> ``['JobID', 'Submit', 'End']``.

    >>> parse_columns("JobID|Submit, End")
    ['JobID', 'Submit', 'End']
    >>> parse_columns(None) is None
    True
    """
    if text is None:
        return None
    names = [n.strip() for n in text.replace(",", "|").split("|")]
    if not all(names):
        raise InputError(f"--columns has an empty name: {text!r}", path="<command line>", field="columns")
    return names


@contextlib.contextmanager
def demo_file(name: str) -> Iterator[str]:
    """A path to a file bundled in greenslurm/data."""
    with resources.as_file(resources.files("greenslurm") / "data" / name) as path:
        yield str(path)


def read(path: str, fmt: str | None = None, *, strict: bool = False, columns=None, status=None,
         limit: int | None = None):
    """Read the trace ``path``; every failure is an InputError.  ``status``: a context manager
    factory taking a message (a terminal spinner), or None.  ``limit``: the file's first jobs only
    (:func:`greenslurm.traces.base.read_trace`)."""
    from greenslurm.traces import read_trace
    from greenslurm.traces.records import repeated_job_ids

    check_input_file(path)
    started = time.perf_counter()
    shown = status(f"reading {path}") if status is not None else contextlib.nullcontext()
    try:
        with shown:
            trace = read_trace(path, fmt, strict=strict, columns=list(columns) if columns else None, limit=limit)
    except UnicodeDecodeError:
        raise InputError("not UTF-8 text", path=path) from None
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror or exc}", path=path) from None
    log.info("read %s (%s): %d records, %d jobs kept, %d skipped, %d adjusted in %.2f s", trace.path,
             trace.format, trace.records_read, len(trace.jobs), sum(trace.skipped.values()),
             sum(trace.adjusted.values()), time.perf_counter() - started)
    for reason, count in sorted(trace.skipped.items()):
        log.info("reader skipped %d: %s", count, reason)
    repeated, first = repeated_job_ids(trace.jobs)
    if repeated:
        log.warning("%s: %d job id(s) appear more than once (first: %s); each record is replayed as a job "
                    "of its own", trace.path, repeated, first)
    return trace


def load_cluster(path: str) -> Cluster:
    from greenslurm.clustermodel import Cluster
    check_input_file(path, "cluster")
    cluster = Cluster.from_toml_file(path)
    log.info("cluster %s from %s: %d nodes, %d CPUs, %d GPUs", cluster.name, path, cluster.size,
             cluster.total_cpus, cluster.total_gpus)
    return cluster


def load_node_list(path: str) -> Cluster:
    """An openb node list (the GPU papers' clusters) as a cluster."""
    from greenslurm.traces.alibaba import read_nodes

    check_input_file(path, "node list")
    cluster = read_nodes(path)
    log.info("cluster %s from %s: %d nodes, %d GPUs", cluster.name, path, cluster.size, cluster.total_gpus)
    return cluster


def load_slurm_conf(path: str, idle_w: float | None = None, busy_w: float | None = None) -> Cluster:
    """A site's slurm.conf (its Include files followed as Slurm does) as the cluster: its nodes, with
    the partitions and features each belongs to; the nodes' idle and busy power in W as given (Slurm
    records none; None: NodeSpec's defaults)."""
    from greenslurm.traces.slurm_conf import cluster_from_slurm_conf, parse_slurm_conf
    check_input_file(path, "slurm.conf")
    conf = parse_slurm_conf(path)
    for warning in conf.warnings:
        log.warning("%s", warning)
    cluster = cluster_from_slurm_conf(conf, idle_w=idle_w, busy_w=busy_w)
    log.info("cluster %s from %s: %d nodes, %d CPUs, %d GPUs, %d partitions", cluster.name, path, cluster.size,
             cluster.total_cpus, cluster.total_gpus, len(conf.partitions))
    return cluster


def cluster_from_trace(trace) -> Cluster:
    cluster = trace.cluster_hint()
    if cluster is None:
        raise InputError("the trace does not describe its cluster; pass --cluster FILE", path=trace.path)
    log.info("cluster %s from the trace header: %d nodes, %d CPUs", cluster.name, cluster.size, cluster.total_cpus)
    return cluster


def check_strict_fit(trace, cluster: Cluster) -> None:
    """Under --strict, a job the cluster can never hold is an error, not a skipped job."""
    for job in trace.jobs:
        if cluster.shape_of(job) is None:
            raise InputError(f"job {job.job_id} asks for more than cluster {cluster.name!r} has "
                             f"({job.cpus} CPUs, {job.nodes or 'any'} nodes, {job.total_gpus:g} GPUs)",
                             path=trace.path, line=job.source_line or None)

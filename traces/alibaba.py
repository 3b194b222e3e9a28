"""Alibaba GPU-sharing cluster trace 2023 ("openb"): pod lists and node lists (CSV with a header).

Pods (``name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,
deletion_time,scheduled_time``), one pod = one single-node job:

* ``submit_s`` = creation_time; ``runtime_s`` = deletion_time - scheduled_time (the time the pod held
  its resources; the gap creation -> scheduled was queueing in the production cluster, kept in
  ``extra["wait_s"]``).  A pod never scheduled (empty scheduled_time, phase Pending) is kept as demand
  with runtime = deletion - creation, adjusted ``"never scheduled: runtime = deletion - creation"``;
* ``requested_time_s`` = runtime (the trace has no limits), adjusted ``"requested time unknown:
  runtime used"``;
* ``cpus`` = ceil(cpu_milli / 1000), the exact value in ``extra["cpu_milli"]``;
  ``memory_mb_per_node`` = memory_mib; ``nodes = 1``;
* GPUs (upstream README): ``num_gpu`` whole GPUs, and for ``num_gpu == 1`` ``gpu_milli`` < 1000 is a
  share of one GPU: ``gpus_per_node`` = gpu_milli / 1000.  ``num_gpu > 1`` needs gpu_milli 1000
  (a share of several GPUs cannot be expressed: skipped); gpu_milli > 0 with num_gpu 0 is skipped;
* ``gpu_model`` = gpu_spec as given (``V100M16|V100M32`` = any of these), None when empty / ``nan``;
* ``state`` = pod_phase; ``extra``: cpu_milli, num_gpu, gpu_milli, qos, wait_s, scheduled_s.

Files without the time columns (the ``multigpu*`` variants) are task sets for the Monte Carlo
experiments: every pod gets submit 0 and runs forever (runtime None, requested time inf), adjusted
``"no time columns: submit 0, runs forever"``.

Skipped, by reason: ``"wrong field count"``, ``"bad field <column>"``, ``"creation time unknown"``,
``"deletion time unknown"``, ``"deletion before creation"``, ``"gpu_milli without num_gpu"``,
``"multi-GPU share (num_gpu > 1, gpu_milli < 1000)"``.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from greenslurm.clustermodel.cluster import Cluster
from greenslurm.clustermodel.errors import InputError
from greenslurm.clustermodel.job import JobSpec
from greenslurm.clustermodel.node import NodeSpec
from greenslurm.clustermodel.ascii_numbers import ascii_float
from greenslurm.traces.records import RecordLog, TraceResult
from greenslurm.traces.source import feed_lines, read_text, split_lines

POD_REQUIRED = ("name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli")
TIME_COLUMNS = ("creation_time", "deletion_time")
NODE_COLUMNS = ("sn", "cpu_milli", "memory_mib", "gpu", "model")
MILLI = 1000
# CPU power: Intel Xeon E5-2682 v4 (PWR paper): 16 cores = 32 vCPUs a package.
CPU_MODEL = "Xeon E5-2682 v4"
CPU_IDLE_W, CPU_TDP_W, VCPUS_PER_PACKAGE = 15.0, 120.0, 32


def read_pods(path: str, *, strict: bool = False, limit: int | None = None) -> TraceResult:
    """Read an ``openb_pod_list_*.csv`` file a piece at a time; ``limit``: its first pods, and no
    line past the one that completes them is read (see :func:`greenslurm.traces.base.read_trace`)."""
    reader = PodReader(path, strict, limit)
    feed_lines(path, reader.read_lines, limit=limit)
    return reader.result()


def parse_pods(text: str, path: str = "<pods.csv>", *, strict: bool = False, limit: int | None = None) -> TraceResult:
    """Parse a pod list.

    >>> r = parse_pods("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,"
    ...                "deletion_time,scheduled_time\\np0,6000,12288,1,460,T4|P100,LS,Running,100,400,110\\n")
    >>> j = r.jobs[0]
    >>> j.cpus, j.gpus_per_node, j.gpu_model, j.submit_s, j.runtime_s, j.extra["wait_s"]
    (6, 0.46, 'T4|P100', 100.0, 290.0, 10.0)
    """
    reader = PodReader(path, strict, limit)
    reader.read_lines(split_lines(text), 1)
    return reader.result()


class PodReader:
    """Reads a pod list's lines as they come: the header, then one pod a line."""

    def __init__(self, path: str, strict: bool, limit: int | None) -> None:
        self.path = path
        self.log = RecordLog(path, strict, limit)
        self.jobs: list[JobSpec] = []
        self.header: list[str] | None = None

    def read_lines(self, lines: list[str], first: int) -> bool:
        """Read ``lines`` (the first is line ``first``); True once the limit is reached."""
        log, jobs = self.log, self.jobs
        for lineno, row in _rows(lines, self.path, first):
            if self.header is None:
                self._take_header(row)
                continue
            header = self.header
            log.records += 1
            if len(row) != len(header):
                log.skip("wrong field count", lineno, None, f"{len(row)} fields, the header has {len(header)}")
                continue
            try:
                jobs.append(_Pod(dict(zip(header, row)), lineno, log, self.timed).job())
            except _Skip:
                pass
            if log.full(jobs):
                return True
        return False

    def _take_header(self, row: list[str]) -> None:
        header = self.header = [name.strip().lower() for name in row]
        missing = [name for name in POD_REQUIRED if name not in header]
        if missing:
            hint = " (this is a node list: read it with read_nodes / as a cluster)" if "sn" in header else ""
            raise InputError(f"not an openb pod list: no column {', '.join(missing)}{hint}", path=self.path, line=1,
                             field=missing[0])
        self.timed = all(name in header for name in TIME_COLUMNS)

    def result(self) -> TraceResult:
        if self.header is None:
            raise InputError("empty file", path=self.path)
        return self.log.result(self.jobs, "alibaba")


def _rows(lines: list[str], path: str, first: int = 1):
    """(line number, fields) of the non-blank CSV lines (the first is line ``first``).  One record a
    line: a quoted field spanning lines (never in these files) shows up as two records with a wrong
    field count."""
    for lineno, line in enumerate(lines, first):
        if line.strip():
            try:
                row = next(csv.reader([line]))
            except csv.Error as exc:
                raise InputError(f"not valid CSV: {exc}", path=path, line=lineno) from None
            yield lineno, [field.strip() for field in row]


def _header(rows, path: str) -> list[str]:
    first = next(rows, None)
    if first is None:
        raise InputError("empty file", path=path)
    return [name.strip().lower() for name in first[1]]


class _Skip(Exception):
    """Internal: the pod was skipped (already logged)."""


class _Pod:
    def __init__(self, values: dict[str, str], line: int, log: RecordLog, timed: bool) -> None:
        self.values, self.line, self.log, self.timed = values, line, log, timed

    def skip(self, reason: str, field: str | None, detail: str) -> _Skip:
        self.log.skip(reason, self.line, field, detail)
        return _Skip()

    def whole(self, name: str, maximum: int | None = None) -> int | None:
        """A whole number >= 0 (None when empty); a bad value skips the pod."""
        raw = self.values.get(name, "")
        if raw == "":
            return None
        try:
            value = ascii_float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0 or value != int(value) or (maximum is not None and value > maximum):
            limit = f" <= {maximum}" if maximum is not None else ""
            raise self.skip(f"bad field {name}", name, f"{raw!r} is not a whole number >= 0{limit}")
        return int(value)

    def required(self, name: str, maximum: int | None = None) -> int:
        value = self.whole(name, maximum)
        if value is None:
            raise self.skip(f"bad field {name}", name, f"{name} is empty")
        return value

    def job(self) -> JobSpec:
        cpu_milli = self.required("cpu_milli")
        memory = self.required("memory_mib")
        gpus = self._gpus()
        submit, runtime, extra = self._times()
        spec = self.values.get("gpu_spec", "")
        name = self.values["name"]
        if not name:
            name = f"line{self.line}"
            self.log.adjust("no pod name: line number used", self.line, "name", f"empty name; job id {name!r}")
        return JobSpec(job_id=name, submit_s=submit,
                       requested_time_s=runtime if runtime is not None else math.inf, runtime_s=runtime,
                       cpus=math.ceil(cpu_milli / MILLI), nodes=1, memory_mb_per_node=float(memory),
                       gpus_per_node=gpus, gpu_model=spec if spec and spec.lower() != "nan" else None,
                       state=self.values.get("pod_phase", ""), source_line=self.line,
                       extra={"cpu_milli": cpu_milli, "num_gpu": self.required("num_gpu"),
                              "gpu_milli": self.required("gpu_milli"), "qos": self.values.get("qos", ""), **extra})

    def _gpus(self) -> float:
        num_gpu, gpu_milli = self.required("num_gpu"), self.required("gpu_milli", MILLI)
        if num_gpu == 0:
            if gpu_milli:
                raise self.skip("gpu_milli without num_gpu", "gpu_milli", f"gpu_milli {gpu_milli} but num_gpu 0")
            return 0.0
        if gpu_milli == MILLI:
            return float(num_gpu)
        if num_gpu > 1:
            raise self.skip("multi-GPU share (num_gpu > 1, gpu_milli < 1000)", "gpu_milli",
                            f"num_gpu {num_gpu} with gpu_milli {gpu_milli}: a share of several GPUs")
        if gpu_milli == 0:
            raise self.skip("bad field gpu_milli", "gpu_milli", "num_gpu 1 with gpu_milli 0")
        return gpu_milli / MILLI

    def _times(self) -> tuple[float, float | None, dict]:
        if not self.timed:
            self.log.adjust("no time columns: submit 0, runs forever", self.line, "creation_time",
                            "the file has no creation_time/deletion_time columns")
            return 0.0, None, {}
        created, deleted = self.whole("creation_time"), self.whole("deletion_time")
        scheduled = self.whole("scheduled_time")
        if created is None:
            raise self.skip("creation time unknown", "creation_time", "creation_time is empty")
        if deleted is None:
            raise self.skip("deletion time unknown", "deletion_time", "deletion_time is empty")
        if deleted < created:
            raise self.skip("deletion before creation", "deletion_time",
                            f"deletion_time {deleted} < creation_time {created}")
        if scheduled is None:
            self.log.adjust("never scheduled: runtime = deletion - creation", self.line, "scheduled_time",
                            "scheduled_time is empty")
            start, extra = created, {}
        elif not created <= scheduled <= deleted:
            raise self.skip("bad field scheduled_time", "scheduled_time",
                            f"scheduled_time {scheduled} is outside creation {created} .. deletion {deleted}")
        else:
            start, extra = scheduled, {"scheduled_s": float(scheduled), "wait_s": float(scheduled - created)}
        runtime = float(deleted - start)
        self.log.adjust("requested time unknown: runtime used", self.line, "deletion_time",
                        "the trace has no time limits; the runtime is used")
        return float(created), runtime, extra


def read_nodes(path: str) -> Cluster:
    """The cluster of an ``openb_node_list_*.csv`` file (``sn,cpu_milli,memory_mib,gpu,model``).

    A node list is the machine, not a sample: any bad row raises :class:`InputError` (file, line,
    column) instead of being skipped.  ``cpus`` = cpu_milli // 1000 (a value that is not a whole number
    of CPUs is an error); GPU power per ``model`` from :data:`greenslurm.clustermodel.node.GPU_POWER_W` (unknown
    models get the default there).  CPU power follows the PWR paper (Eq. 1) and its Kubernetes
    plugin: the vCPUs sit on Xeon E5-2682 v4 packages of 16 cores = 32 vCPUs, 15 W idle / 120 W TDP
    each, so with ``k = ceil(cpus / 32)`` packages a node has ``idle_w = 15 k`` and ``busy_w = 120 k``
    (a 96-vCPU G2 node: 45 W / 360 W).  The paper's power is a step per package; the cluster model is
    linear between these two ends.
    """
    return parse_nodes(read_text(path), path)


def parse_nodes(text: str, path: str = "<nodes.csv>") -> Cluster:
    """Parse a node list.

    >>> c = parse_nodes("sn,cpu_milli,memory_mib,gpu,model\\nn0,96000,786432,8,G2\\nn1,32000,262144,0,\\n")
    >>> [(n.name, n.cpus, n.gpus, n.gpu_model, n.idle_w, n.busy_w) for n in c.nodes]
    [('n0', 96, 8, 'G2', 45.0, 360.0), ('n1', 32, 0, None, 15.0, 120.0)]
    """
    rows = _rows(split_lines(text), path)
    header = _header(rows, path)
    missing = [name for name in NODE_COLUMNS if name not in header]
    if missing:
        raise InputError(f"not an openb node list: no column {', '.join(missing)}", path=path, line=1,
                         field=missing[0])
    nodes: list[NodeSpec] = []
    names: set[str] = set()
    for lineno, row in rows:
        if len(row) != len(header):
            raise InputError(f"{len(row)} fields, the header has {len(header)}", path=path, line=lineno)
        values = dict(zip(header, row))
        node = _node(values, path, lineno)
        if node.name in names:
            raise InputError(f"node {node.name!r} is listed twice", path=path, line=lineno, field="sn")
        names.add(node.name)
        nodes.append(node)
    if not nodes:
        raise InputError("no nodes listed", path=path)
    return Cluster(nodes, name=Path(path).stem)


def _node(values: dict[str, str], path: str, line: int) -> NodeSpec:
    def whole(name: str) -> int:
        raw = values[name]
        try:
            value = ascii_float(raw)
        except ValueError:
            value = math.nan
        if not math.isfinite(value) or value < 0 or value != int(value):
            raise InputError(f"{raw!r} is not a whole number >= 0", path=path, line=line, field=name)
        return int(value)

    cpu_milli, memory, gpus = whole("cpu_milli"), whole("memory_mib"), whole("gpu")
    if cpu_milli % MILLI or cpu_milli == 0:
        raise InputError(f"cpu_milli {cpu_milli} is not a positive whole number of CPUs", path=path, line=line,
                         field="cpu_milli")
    model = values["model"] if values["model"].lower() not in ("", "nan") else None
    if not values["sn"]:
        raise InputError("empty node name", path=path, line=line, field="sn")
    cpus = cpu_milli // MILLI
    packages = math.ceil(cpus / VCPUS_PER_PACKAGE)
    return NodeSpec(values["sn"], cpus=cpus, memory_mb=float(memory), gpus=gpus, gpu_model=model if gpus else None,
                    cpu_model=CPU_MODEL, idle_w=CPU_IDLE_W * packages, busy_w=CPU_TDP_W * packages,
                    node_type=model if gpus and model else "cpu")

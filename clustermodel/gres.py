"""Slurm's generic resources (GRES) as written in every place greenslurm reads them: GPU count, GPU models
and shard count.

Two grammars, both comma-separated lists (commas inside parentheses belong to their item):

- GRES form, ``[gres:|gres/]NAME[:TYPE][:no_consume][:COUNT][(...)]``: node ``Gres`` (``gpu:a100:4(S:0-1)``),
  sinfo's ``gpu:2(IDX:0-1)``, ``--gres`` and ``job_desc.tres_per_node`` (``gres:gpu:2`` in Slurm 22.05,
  ``gres/gpu:2`` from 23.02 on).  A missing COUNT is 1 (``gpu``, ``gpu:a100``); a last field that is a
  number is the count, as Slurm reads it (``gpu:3090`` is 3090 GPUs, ``gpu:3090:1`` one GPU of type 3090).
  COUNT may carry Slurm's suffix ``k``, ``m``, ``g``, ``t`` or ``p`` (multiples of 1024).  Items add up.
- TRES form, ``gres/NAME[:TYPE]=COUNT`` (sacct's AllocTRES/ReqTRES, among ``cpu=``, ``mem=`` ... which are
  not GRES and are skipped): ``gres/gpu=4`` is the total and ``gres/gpu:a100=4`` the part of it of one
  type, so the typed entries add up only when no total is written.

``(null)``, an empty string and None mean no GRES.  GPUs are the resource named ``gpu``; MPS (``mps:100``)
is a share of a GPU, not GPUs, and is not counted; shards (``shard:4``) are counted apart.

>>> parse_gres("gpu:k80:2,gpu:t4:1,mps:100")
Gres(gpus=3, models=('k80', 't4'), shards=0)
>>> parse_gres("gres/gpu=4,gres/gpu:a100=4")
Gres(gpus=4, models=('a100',), shards=0)
>>> gpu_count("gres:gpu:2"), gpu_count("gres/gpu:1"), gpu_count("gpu"), gpu_count("(null)"), gpu_count(None)
(2, 1, 1, 0, 0)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

from greenslurm.clustermodel.brackets import split_outside

GPU = "gpu"
SHARD = "shard"
# The JobSpec.extra key of a job's gres/shard count per node.
SHARDS_KEY = "shards"
# The JobSpec.extra key of the GPUs a job asks in all (Slurm's --gpus, --gpus-per-task) when it names no
# node count: the planner spreads them over as few nodes as hold them.
GPUS_TOTAL_KEY = "gpus_total"
NO_GRES = ("", "(null)", "none", "n/a")
# Slurm's count suffixes (src/common/gres.c): each a power of 1024
SUFFIX = {"": 1, "k": 1024, "m": 1024 ** 2, "g": 1024 ** 3, "t": 1024 ** 4, "p": 1024 ** 5}
# Slurm stores GRES counts as uint64 and reserves the top values (NO_VAL64, INFINITE64) as markers
MAX_COUNT = 2 ** 63 - 1

_COUNT = re.compile(r"(\d+)([kmgtp]?)", re.IGNORECASE | re.ASCII)    # C digits: not "４" (full width)
_NUMBER_LIKE = re.compile(r"[-+]?\d", re.ASCII)            # a field that means to be a count
_NAME = re.compile(r"[A-Za-z0-9_.\-]+")


@dataclass(frozen=True)
class Gres:
    """GPUs (``gpu``), their models (GRES types, as written, first seen first) and shards (``shard``)."""

    gpus: int = 0
    models: tuple[str, ...] = ()
    shards: int = 0

    @property
    def model(self) -> str | None:
        """The models joined with ``|``, None when no type is written.

        >>> parse_gres("gpu:k80:2,gpu:t4:1").model, parse_gres("gpu:2").model
        ('k80|t4', None)
        """
        return "|".join(self.models) if self.models else None


def split_items(text: str) -> list[str]:
    """The comma-separated items of a GRES or TRES string, parentheses kept with their item.

    >>> split_items("gpu:a100:2(S:0,1),mps:100"), split_items("")
    (['gpu:a100:2(S:0,1)', 'mps:100'], [])
    """
    return [item.strip() for item in split_outside(text, "(", ")") if item.strip()]


def parse_count(field: str, item: str) -> int:
    """A GRES count with Slurm's optional 1024-multiple suffix; ValueError naming ``item`` otherwise.

    >>> parse_count("4", "gpu:4"), parse_count("2k", "mps:2k")
    (4, 2048)
    >>> parse_count("-1", "gpu:-1")
    Traceback (most recent call last):
    ...
    ValueError: GRES item 'gpu:-1': count '-1' is not a whole number >= 0
    """
    match = _COUNT.fullmatch(field)
    if not match:
        raise ValueError(f"GRES item {item!r}: count {field!r} is not a whole number >= 0")
    digits = match.group(1).lstrip("0") or "0"
    # more digits than the largest count is too large: a megabyte of digits is never converted
    count = int(digits) * SUFFIX[match.group(2).lower()] if len(digits) <= len(str(MAX_COUNT)) else MAX_COUNT + 1
    if count > MAX_COUNT:
        raise ValueError(f"GRES item {item!r}: count {field!r} is larger than Slurm can hold")
    return count


def parse_item(item: str) -> tuple[str, str | None, int]:
    """One GRES-form item as (name, type or None, count).

    >>> parse_item("gpu:a100:4(S:0-1)"), parse_item("gres:gpu:2"), parse_item("gres/gpu:1")
    (('gpu', 'a100', 4), ('gpu', None, 2), ('gpu', None, 1))
    >>> parse_item("gpu"), parse_item("gpu:t4"), parse_item("gpu:2(IDX:0-1)"), parse_item("gpu:no_consume:2")
    (('gpu', None, 1), ('gpu', 't4', 1), ('gpu', None, 2), ('gpu', None, 2))
    >>> parse_item("gpu:a:b:2")
    Traceback (most recent call last):
    ...
    ValueError: GRES item 'gpu:a:b:2': expected NAME[:TYPE][:COUNT]
    """
    body = item.split("(", 1)[0].strip()
    if "(" in item and not item.rstrip().endswith(")"):
        raise ValueError(f"GRES item {item!r}: unclosed parenthesis")
    for prefix in ("gres:", "gres/"):
        if body.lower().startswith(prefix):
            body = body[len(prefix):]
            break
    fields = [f for f in body.split(":") if f.lower() != "no_consume"]
    count = 1
    if len(fields) > 1 and _NUMBER_LIKE.match(fields[-1]):
        count = parse_count(fields.pop(), item)
    if not 1 <= len(fields) <= 2:
        raise ValueError(f"GRES item {item!r}: expected NAME[:TYPE][:COUNT]")
    for field in fields:
        if not _NAME.fullmatch(field):
            raise ValueError(f"GRES item {item!r}: {field!r} is not a GRES name or type")
    name, kind = fields[0].lower(), (fields[1] if len(fields) == 2 else None)
    return name, kind, count


def from_tres(tres: Mapping[str, float]) -> Gres:
    """The GRES in a parsed TRES mapping (``{"cpu": 2.0, "gres/gpu": 4.0, "gres/gpu:a100": 4.0}``): the
    untyped entry is the total, typed entries are parts of it (summed when no total is written).

    >>> from_tres({"cpu": 1.0, "gres/gpu:volta": 2.0})
    Gres(gpus=2, models=('volta',), shards=0)
    >>> from_tres({"gres/gpu": 4.0, "gres/gpu:a100": 2.0, "gres/gpu:v100": 2.0, "gres/shard": 8.0})
    Gres(gpus=4, models=('a100', 'v100'), shards=8)
    >>> from_tres({"gres/gpu": 2.0, "gres/gpu:a100": 4.0})
    Traceback (most recent call last):
    ...
    ValueError: GRES item 'gres/gpu=2': total below its typed parts (4)
    """
    totals: dict[str, int] = {}
    typed: dict[str, dict[str, int]] = {}
    for key, value in tres.items():
        if not key.lower().startswith("gres/"):
            continue
        item = f"{key}={value:g}" if isinstance(value, float) else f"{key}={value}"
        if (isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value)
                or value != int(value) or value < 0):
            raise ValueError(f"GRES item {item!r}: count is not a whole number >= 0")
        if value > MAX_COUNT:
            raise ValueError(f"GRES item {item!r}: count is larger than Slurm can hold")
        name, _, kind = key[len("gres/"):].partition(":")
        for field in (name, kind) if kind else (name,):
            if not _NAME.fullmatch(field):
                raise ValueError(f"GRES item {item!r}: {field!r} is not a GRES name or type")
        if kind:
            typed.setdefault(name.lower(), {})[kind] = int(value)
        else:
            totals[name.lower()] = int(value)

    def count(name: str) -> int:
        parts = sum(typed.get(name, {}).values())
        if name not in totals:
            return parts
        if parts > totals[name]:
            raise ValueError(f"GRES item 'gres/{name}={totals[name]}': total below its typed parts ({parts})")
        return totals[name]
    models = tuple(kind for kind, n in typed.get(GPU, {}).items() if n > 0)
    return Gres(count(GPU), models, count(SHARD))


def parse_gres(text: str | None) -> Gres:
    """GPU count, GPU models and shard count of a GRES or TRES string (see the module's docstring).

    >>> parse_gres("gpu:a100:4(S:0-1)"), parse_gres("shard:4"), parse_gres("gpu:2(IDX:0-1),shard:a100:8")
    (Gres(gpus=4, models=('a100',), shards=0), Gres(gpus=0, models=(), shards=4), Gres(gpus=2, models=(), shards=8))
    >>> parse_gres("billing=1,cpu=1,gres/gpu:p100=1,mem=125G,node=1")
    Gres(gpus=1, models=('p100',), shards=0)
    >>> parse_gres("gpu:1.5")
    Traceback (most recent call last):
    ...
    ValueError: GRES item 'gpu:1.5': count '1.5' is not a whole number >= 0
    """
    if text is None or text.strip().lower() in NO_GRES:
        return Gres()
    gpus = shards = 0
    models: dict[str, None] = {}
    tres: dict[str, int] = {}
    for item in split_items(text):
        if "=" in item:                  # TRES form: gres/NAME[:TYPE]=COUNT, or cpu=, mem=, ... (not GRES)
            key, _, value = item.partition("=")
            if not key.strip().lower().startswith("gres/"):
                continue
            if key.strip() in tres:
                raise ValueError(f"GRES item {item!r}: {key.strip()!r} is written twice")
            tres[key.strip()] = parse_count(value.strip(), item)
            continue
        name, kind, count = parse_item(item)
        if name == GPU:
            gpus += count
            if kind is not None and count > 0:
                models.setdefault(kind, None)
        elif name == SHARD:
            shards += count
    if tres:
        part = from_tres(tres)
        gpus, shards = gpus + part.gpus, shards + part.shards
        models.update(dict.fromkeys(part.models))
    return Gres(gpus, tuple(models), shards)


def gpu_count(text: str | None) -> int:
    """GPUs in a GRES or TRES string (per node for a node's Gres or a job's tres_per_node).

    >>> gpu_count("gpu:2"), gpu_count("gres:gpu:a100:3"), gpu_count("gres/gpu:1,gres:nic:1"), gpu_count("mps:100")
    (2, 3, 1, 0)
    """
    return parse_gres(text).gpus


def gpu_models(text: str | None) -> tuple[str, ...]:
    """The GPU types written in a GRES or TRES string, first seen first, each once.

    >>> gpu_models("gpu:k80:2,gpu:t4:1,gpu:k80:1"), gpu_models("gpu:4")
    (('k80', 't4'), ())
    """
    return parse_gres(text).models


def shard_count(text: str | None) -> int:
    """Shards (Slurm's GPU sharing GRES) in a GRES or TRES string.

    >>> shard_count("gpu:1,shard:4"), shard_count("gres/shard=2"), shard_count("gpu:2")
    (4, 2, 0)
    """
    return parse_gres(text).shards


@dataclass(frozen=True)
class GpuRequest:
    """What a Slurm job asks of GPUs, whichever option wrote it: ``per_node`` GPUs on each node and,
    for a job that names no node count, ``total`` GPUs in all (0: none beyond ``per_node``)."""

    per_node: int = 0
    total: int = 0
    models: tuple[str, ...] = ()
    shards: int = 0


def gpu_request(per_node: str | None = None, per_job: str | None = None, per_task: str | None = None,
                per_socket: str | None = None, *, tasks: int = 1, nodes: int = 0, tasks_per_node: int = 0,
                sockets_per_node: int = 0) -> GpuRequest:
    """The GPUs of a Slurm 22.05 job from its ``tres_per_*`` fields (as job_submit.lua and ``squeue
    --json`` show them, ``gres:gpu:2``): ``--gres=gpu:N`` and ``--gpus-per-node=N`` write ``per_node``,
    ``--gpus=N`` ``per_job`` (N in all: ceil(N / nodes) on each of ``nodes``, or spread by the planner
    when no node count is given), ``--gpus-per-task=N`` ``per_task`` (N x ``tasks`` in all, or N x
    ``tasks_per_node`` on each node), ``--gpus-per-socket=N`` ``per_socket`` (N x ``sockets_per_node``,
    at least one socket, on each node).  Counts not given are 0.  A ValueError names the field.

    >>> gpu_request(per_job="gres:gpu:3")                          # 3 in all, no node count
    GpuRequest(per_node=0, total=3, models=(), shards=0)
    >>> gpu_request(per_job="gres:gpu:3", nodes=2).per_node          # ceil(3 / 2) on each of 2 nodes
    2
    >>> gpu_request(per_task="gres:gpu:1", tasks=4).total            # 1 a task x 4 tasks
    4
    >>> gpu_request(per_task="gres:gpu:1", tasks=4, nodes=2, tasks_per_node=2).per_node
    2
    >>> gpu_request(per_socket="gres:gpu:2", sockets_per_node=2).per_node   # 2 x 2
    4
    >>> gpu_request(per_node="gres:shard:2").shards, gpu_request(per_node="gres:gpu:a100:2").models
    (2, ('a100',))
    """
    def parsed(name: str, text: str | None) -> Gres:
        try:
            return parse_gres(text)
        except ValueError as exc:
            raise ValueError(f"{name}: {exc}") from None

    node, job = parsed("tres_per_node", per_node), parsed("tres_per_job", per_job)
    task, socket = parsed("tres_per_task", per_task), parsed("tres_per_socket", per_socket)
    sockets = max(sockets_per_node, 1)
    gpus_per_node = max(node.gpus, socket.gpus * sockets, task.gpus * tasks_per_node)
    total = max(job.gpus, task.gpus * max(tasks, 1))
    if nodes > 0 and total:
        gpus_per_node, total = max(gpus_per_node, math.ceil(total / nodes)), 0
    elif total and gpus_per_node >= total:
        total = 0
    models = tuple(dict.fromkeys(node.models + job.models + task.models + socket.models))
    shards = max(node.shards, job.shards, task.shards * max(tasks_per_node, 1), socket.shards * sockets)
    return GpuRequest(gpus_per_node, total, models, shards)

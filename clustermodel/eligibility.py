"""Which nodes a job may ever use: its Slurm partition(s) and the features of its ``--constraint``.

Slurm runs a job only on nodes of its partition (one of a comma-separated list, ``--partition=a,b``)
and only on nodes that have every feature its ``--constraint`` asks (``ib&k80``).  The rule here:

- a cluster that names no partitions (SWF headers, TOML files without ``partitions``) does not
  restrict by partition; nor does a job that names none, unless the cluster has a default partition
  (slurm.conf's ``Default=YES``), where Slurm puts such a job;
- a partition that is a bare number (the partition number of an SWF log) is a partition only on a
  cluster that names a partition by a number; elsewhere it does not restrict;
- a job naming partitions may use the nodes of any of them; a node listed in no partition of a
  cluster that names partitions is in none (as in Slurm, no job naming a partition runs there);
- a constraint restricts only on a cluster that describes features; features joined by ``&`` (or
  ``,``) must all be on the node.  Other constraint forms (``|``, ``[...]``, ``*count``) are not
  modelled: such a job is rejected with a reason, never run on a guessed node.

:meth:`Eligibility.mask` answers None (every node: exactly the engine's behaviour without
partitions), a boolean mask over nodes, or the reason the job can never run.

>>> from greenslurm.clustermodel import Cluster, NodeSpec
>>> c = Cluster([NodeSpec("a0", 4, partitions=("cpu",)), NodeSpec("a1", 4, partitions=("cpu", "all")),
...              NodeSpec("g0", 8, partitions=("gpu", "all"), features=("ib", "k80"))])
>>> e = Eligibility(c)
>>> e.mask("", "") is None, e.mask("cpu", "").tolist(), e.mask("gpu,cpu", "") is None   # None: every node
(True, [True, True, False], True)
>>> e.mask("all", "ib&k80").tolist(), e.mask("debug", ""), e.mask("cpu", "ib")
([False, False, True], 'partition not in the cluster', 'no node of its partition has the features it asks (--constraint)')
>>> e.mask("3", "") is None          # an SWF partition number on a cluster naming partitions by name
True
"""

from __future__ import annotations

import re

import numpy as np

from greenslurm.clustermodel.cluster import Cluster

NO_PARTITION = "partition not in the cluster"
NO_FEATURES = "no node of its partition has the features it asks (--constraint)"
CONSTRAINT_FORM = "constraint not modelled (only features joined by &)"

_PLAIN_FEATURES = re.compile(r"[^|\[\]()*!:]*")


def job_partitions(text: str) -> tuple[str, ...]:
    """The partitions of ``--partition=a,b`` (blanks and empty names dropped, order kept).

    >>> job_partitions(" batch,debug,,batch ")
    ('batch', 'debug')
    """
    return tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))


def constraint_features(text: str) -> tuple[str, ...] | None:
    """The features a constraint asks for, all of them (``a&b``, or ``a,b`` as Slurm's job JSON
    prints them); None for a form that is not a plain AND (``a|b``, ``[a|b]``, ``a*2``, ``!a``).

    >>> constraint_features("ib&k80"), constraint_features(""), constraint_features("a|b")
    (('ib', 'k80'), (), None)
    """
    if not _PLAIN_FEATURES.fullmatch(text):
        return None
    return tuple(sorted({f.strip() for f in re.split(r"[&,]", text) if f.strip()}))


_FEATURE_NAME = re.compile(r"[\w.\-]+")       # a feature name the planner reads (Slurm's operators excluded)


def or_features(constraint: str) -> tuple[str, ...]:
    """The features of a constraint that asks for any one of them (``a|b``, or ``[a|b]``: the same
    one on every node); () for any other form.

    >>> or_features("f1|f2"), or_features("[f1|f2]"), or_features("f1&f2"), or_features("f1*2|f2")
    (('f1', 'f2'), ('f1', 'f2'), (), ())
    """
    body = constraint[1:-1] if constraint.startswith("[") and constraint.endswith("]") else constraint
    names = body.split("|")
    if len(names) < 2 or not all(_FEATURE_NAME.fullmatch(name) for name in names):
        return ()
    return tuple(sorted(set(names)))


def planned_features(constraint: str) -> tuple[str, ...] | None:
    """The features of a job's ``--constraint`` in the form the planners read (the hook's view,
    its submissions and their changes): () for none; the names of plain features joined by ``&``
    or ``,`` (as squeue's JSON prints them), sorted, once each; the whole text as one item for a
    constraint asking any one of several (``a|b``, ``[a|b]``: :func:`or_features`); None for every
    other form (counts ``a*2``, ``[a&b]``, mixed ``&`` and ``|``, names with other characters),
    which no planner models.  Linear in the text's length.

    >>> planned_features("k80&ib,k80"), planned_features("a|b"), planned_features(""), planned_features("a*3")
    (('ib', 'k80'), ('a|b',), (), None)
    """
    constraint = constraint or ""
    if or_features(constraint):
        return (constraint,)
    names = re.split(r"[&,]", constraint)
    if not all(_FEATURE_NAME.fullmatch(name) for name in names if name):
        return None
    return tuple(sorted({name for name in names if name}))


class Eligibility:
    """Masks of the nodes jobs may use on one cluster, cached by (partition, constraint); equal
    masks are one shared read-only array (so an array's identity names its node set)."""

    def __init__(self, cluster: Cluster) -> None:
        self._partitions = [frozenset(node.partitions) for node in cluster.nodes]
        self._features = [frozenset(node.features) for node in cluster.nodes]
        named = frozenset().union(*self._partitions)
        self.partitions = named
        self._numbered = any(name.isdigit() for name in named)
        self.describes_features = any(self._features)
        # Nothing to restrict by: every job may use every node (the engine's behaviour without partitions).
        self.restricts = bool(named) or self.describes_features
        self.default_partition = cluster.default_partition if cluster.default_partition in named else ""
        self._cache: dict[tuple[str, str], np.ndarray | str | None] = {}
        self._masks: dict[bytes, np.ndarray] = {}

    def mask(self, partition: str, constraint: str) -> np.ndarray | str | None:
        """The nodes a job of ``partition`` asking ``constraint`` may use (None: all), or the reason
        none ever can."""
        key = (partition, constraint)
        if key not in self._cache:
            self._cache[key] = self._mask(partition, constraint)
        return self._cache[key]

    def _mask(self, partition: str, constraint: str) -> np.ndarray | str | None:
        ok = np.ones(len(self._partitions), dtype=bool)
        wanted = job_partitions(partition) if self.partitions else ()
        if not wanted and self.default_partition:
            wanted = (self.default_partition,)      # Slurm puts a job naming none in the default partition
        if wanted and not self._numbered and all(p.isdigit() for p in wanted):
            wanted = ()               # SWF partition numbers on a cluster whose partitions have names
        if wanted:
            if not self.partitions.intersection(wanted):
                return NO_PARTITION
            ok &= np.array([not parts.isdisjoint(wanted) for parts in self._partitions])
        if constraint and self.describes_features:
            features = constraint_features(constraint)
            if features is None:
                return CONSTRAINT_FORM
            if features:
                ok &= np.array([have.issuperset(features) for have in self._features])
        if ok.all():
            return None
        if not ok.any():
            return NO_FEATURES
        shared = self._masks.setdefault(ok.tobytes(), ok)
        shared.flags.writeable = False
        return shared

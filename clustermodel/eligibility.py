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


def job_partitions(text: str) -> tuple[str, ...]:
    """The partitions of ``--partition=a,b`` (blanks and empty names dropped, order kept).

    >>> job_partitions(" batch,debug,,batch ")
    ('batch', 'debug')
    """
    return tuple(dict.fromkeys(p.strip() for p in text.split(",") if p.strip()))


_SLURM_OPERATORS = "&|[]()*"
_NAME_RUN = re.compile(r"[^&|\[\]()*]*")    # a feature name: up to the next operator
_COUNT = re.compile(r"[ \t\n\v\f\r]*[+-]?[0-9]+")     # strtol's reading of a count after '*'


def slurm_constraint_error(constraint: str) -> str | None:
    """Why Slurm 22.05 refuses a ``--constraint`` whatever the nodes' features (None when it may take
    it), as its ``build_feature_list`` and ``_valid_feature_list`` (src/slurmctld/job_scheduler.c)
    read the text: ``,`` read as ``&``; a feature name is every character up to the next operator
    (``&|[]()*``), taken as given; ``&`` and ``|`` need a name before them (``&a`` and ``a&&b``
    refused; a trailing ``a&`` or ``a|`` is not); a count ``*N`` needs a name and N > 0, outside
    parentheses; one set of brackets, balanced, and balanced parentheses; inside brackets, names
    joined by ``&`` each with a count and names joined by ``|`` none.  On top, a name with a blank
    or a control character: Slurm takes it as given and no node's feature has one, so Slurm never
    ran such a job (sbatch: "Invalid feature specification").  Whether the nodes have the features
    is the cluster's question (:class:`Eligibility`).

    >>> [slurm_constraint_error(c) for c in ("ib&k80", "ib,k80&", "[a|b]&c", "(a|b)&c", "[a*1&b*2]", "")]
    [None, None, None, None, None, None]
    >>> slurm_constraint_error("a&&b"), slurm_constraint_error("[a]&[b]"), slurm_constraint_error("a*0")
    ("an operator with no feature name before it ('&' at 3)", 'more than one set of brackets', "a count that is not a whole number above 0 ('*' at 2)")
    >>> slurm_constraint_error(" ib&k80"), slurm_constraint_error("[a|b"), slurm_constraint_error("[a&b]")
    ("the feature name ' ib' holds a blank or a control character", 'unbalanced brackets', "in brackets, features joined by '&' need a count each and those joined by '|' none")
    """
    text = constraint.replace(",", "&")
    features = []                   # (name, count, the operator after it: "&", "|", "[&", "[|" in brackets, or "")
    name = None                     # the name being read (None: none since the last & or |)
    count = bracket = paren = bracket_sets = 0
    i = 0
    while i < len(text):
        char = text[i]
        if char not in _SLURM_OPERATORS:
            if name is None:
                name = i
            i += 1
            continue
        where = f"({char!r} at {i + 1})"
        if char == "*":
            found = _COUNT.match(text, i + 1)
            count = int(found.group()) if found else 0
            if name is None or count <= 0 or paren:
                return f"a count that is not a whole number above 0 {where}"
            i = found.end()
            continue
        if char in "&|":
            if name is None:
                return f"an operator with no feature name before it {where}"
            features.append((_NAME_RUN.match(text, name).group(), count, ("[" if bracket and not paren else "") + char))
            name, count = None, 0
        elif char == "[":
            if name is not None or bracket:
                return f"a bracket after a feature name or inside brackets {where}"
            bracket, bracket_sets = 1, bracket_sets + 1
            if bracket_sets > 1:
                return "more than one set of brackets"
        elif char == "]":
            if name is None or not bracket:
                return f"a closing bracket with no feature name or '[' before it {where}"
            bracket = 0
        elif char == "(":
            if name is not None or paren:
                return f"a parenthesis after a feature name or inside parentheses {where}"
            paren = 1
        elif name is None or not paren:
            return f"a closing parenthesis with no feature name or '(' before it {where}"
        else:
            paren = 0
        i += 1
    if name is not None:
        features.append((_NAME_RUN.match(text, name).group(), count, ""))
    if bracket:
        return "unbalanced brackets"
    if paren:
        return "unbalanced parentheses"
    joined = set()                  # the operators joining the bracket's features so far
    for feature, count, op in features:
        closing = joined and not op.startswith("[")         # the bracket's last feature
        if op == "[&" and not count or op == "[|" and count or \
                closing and ("[&" in joined and not count or "[|" in joined and count):
            return "in brackets, features joined by '&' need a count each and those joined by '|' none"
        joined = joined | {op} if op.startswith("[") else set()
    for feature, *_ in features:
        if any(c.isspace() or not c.isprintable() for c in feature):
            return f"the feature name {feature!r} holds a blank or a control character"
    return None


def slurm_constraint(text: str) -> str:
    """A trace's constraint as given; a ValueError saying why for one Slurm 22.05 refuses
    (:func:`slurm_constraint_error`: a job with it never ran, so the record is not Slurm's).

    >>> slurm_constraint("ib&k80")
    'ib&k80'
    >>> slurm_constraint("ib& k80")
    Traceback (most recent call last):
    ...
    ValueError: Slurm 22.05 refuses the constraint 'ib& k80': the feature name ' k80' holds a blank or a control character
    """
    reason = slurm_constraint_error(text)
    if reason is not None:
        raise ValueError(f"Slurm 22.05 refuses the constraint {text!r}: {reason}")
    return text


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
            features = planned_features(constraint)
            if features is None or or_features(constraint):     # a|b: not modelled in the replay
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

"""A site's Slurm accounts, shares and QOS, read from what ``sacctmgr`` prints, into typed records.

Two dumps a site's admin already can make (``-P``: fields separated by ``|``, with the header line):

- ``sacctmgr show assoc tree -P`` (or ``sacctmgr show assoc -P format=Cluster,Account,User,ParentName,
  Share,QOS,DefQOS,Partition``): the association tree.  Accounts nest: in ``tree`` output an account's
  depth is the number of blanks before its name; otherwise the ``ParentName`` column names its parent.
  A plain ``sacctmgr show assoc -P`` has neither, so nested accounts cannot be told from top-level
  ones: such a dump with accounts besides ``root`` is refused (with the command to use instead).
- ``sacctmgr show qos -P``: the QOS and their priorities, usage factors and limits.

Read: per association the account, user (empty for an account), parent account, ``Share`` (a
number, or ``parent``: Slurm's ``FairShare=parent``), its QOS list and default QOS; per QOS the
priority, ``UsageFactor``, ``Flags``, ``MaxJobsPU`` and the ``cpu`` count of ``GrpTRES``.  Limits the
replay does not model (``GrpJobs``, ``MaxTRESPU``, ``MaxWall``, association limits, ...) are kept as
text in ``not_modelled`` so that a caller can say which ones it ignores.  Partition associations
(a ``Partition`` value) are refused: the replay gives a job the association of its user and account.

A bad dump stops with one :class:`InputError` naming the file, line and field.

>>> tree = '''Cluster|Account|User|Partition|Share|Priority|GrpJobs|GrpTRES|GrpSubmit|GrpWall|GrpTRESMins|MaxJobs|MaxTRES|MaxTRESPerNode|MaxSubmit|MaxWall|MaxTRESMins|QOS|Def QOS|GrpTRESRunMins
... c|root|||1|||||||||||||normal||
... c| root|root||1|||||||||||||normal||
... c| phys|||2|||||||||||||normal||
... c|  phys|ann||1|||||||||||||high,normal|normal|
... c|  theory|||parent|||||||||||||normal||
... c|   theory|bob||3|||||||||||||normal||'''
>>> tree_assocs = parse_associations_text(tree, "assoc.txt")
>>> [(a.account, a.user, a.parent, a.shares) for a in tree_assocs]
[('root', '', '', 1), ('root', 'root', 'root', 1), ('phys', '', 'root', 2), ('phys', 'ann', 'phys', 1), ('theory', '', 'phys', None), ('theory', 'bob', 'theory', 3)]
>>> qos = parse_qos_text("Name|Priority|UsageFactor|GrpTRES|MaxJobsPU|MaxWall\\nnormal|0|1.000000|||\\n"
...                      "high|100|2.000000|cpu=8,mem=4G|2|1-00:00:00", "qos.txt")
>>> qos["high"].priority, qos["high"].usage_factor, qos["high"].grp_cpus, qos["high"].max_jobs_per_user
(100, 2.0, 8, 2)
>>> qos["high"].not_modelled
('GrpTRES=mem=4G', 'MaxWall=1-00:00:00')
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from greenslurm.clustermodel import InputError, JobSpec
from greenslurm.clustermodel.ascii_numbers import ascii_float

ROOT = "root"
USE_PARENT = None             # Share "parent": the association takes its parent's fair-share place
MAX_SHARES = 2 ** 32 - 2      # Slurm keeps shares in 32 bits (NO_VAL and INFINITE above)
# a QOS's UsageFactor multiplies every CPU-second of usage; far above any site's (0 to a few), and low
# enough that years of a large cluster's usage stay finite (beyond it the fair-share ratios were NaN)
MAX_USAGE_FACTOR = 1e6
MAX_DEPTH = 64                # accounts nested deeper are refused (sites nest a handful of levels)
TREE_COMMAND = "sacctmgr show assoc tree -P"
# Names as Slurm stores them: no blanks, no '|' (the field separator), no control characters.
_NAME = re.compile(r"^[^\s|,=\x00-\x1f\x7f]{1,256}$")
# QOS columns whose default value means "no limit" is empty; anything set there is not modelled.
_QOS_UNMODELLED = ("GrpTRESMins", "GrpTRESRunMins", "GrpJobs", "GrpSubmit", "GrpWall", "MaxTRES",
                   "MaxTRESPerNode", "MaxTRESMins", "MaxWall", "MaxTRESPU", "MaxSubmitPU", "MaxTRESPA",
                   "MaxJobsPA", "MaxSubmitPA", "MinTRES", "Preempt", "UsageThres")
_ASSOC_UNMODELLED = ("Priority", "GrpJobs", "GrpTRES", "GrpSubmit", "GrpWall", "GrpTRESMins", "MaxJobs",
                     "MaxTRES", "MaxTRESPerNode", "MaxSubmit", "MaxWall", "MaxTRESMins", "GrpTRESRunMins")


@dataclass(frozen=True)
class Association:
    """One association: an account (``user`` empty) or a user in an account."""
    account: str
    user: str
    parent: str                   # the parent account ("" for root); a user's parent is its account
    shares: int | None            # raw shares; None: FairShare=parent
    qos: tuple[str, ...] = ()
    default_qos: str = ""
    line: int = 0
    not_modelled: tuple[str, ...] = ()

    @property
    def is_user(self) -> bool:
        return bool(self.user)


@dataclass(frozen=True)
class Qos:
    """One QOS: what the replay models of it, and the limits it does not."""
    name: str
    priority: int = 0
    usage_factor: float = 1.0
    max_jobs_per_user: int | None = None      # MaxJobsPU (None: no limit)
    grp_cpus: int | None = None               # the cpu count of GrpTRES (None: no limit)
    flags: tuple[str, ...] = ()
    not_modelled: tuple[str, ...] = ()
    line: int = 0


@dataclass(frozen=True)
class SlurmAccounts:
    """A cluster's associations and QOS; what a job's association and QOS are."""
    associations: tuple[Association, ...]
    qos: dict[str, Qos] = field(default_factory=dict)

    def __post_init__(self) -> None:
        index = {(a.account, a.user): a for a in self.associations}
        object.__setattr__(self, "_index", index)
        users: dict[str, list[Association]] = {}
        for a in self.associations:
            if a.is_user:
                users.setdefault(a.user, []).append(a)
        object.__setattr__(self, "_by_user", users)

    def association(self, user: str, account: str) -> Association | None:
        """The association of ``user`` in ``account`` (None if there is none).  An empty account
        means the user's only association, if it has just one."""
        if not account:
            mine = self._by_user.get(user, [])
            return mine[0] if len(mine) == 1 else None
        return self._index.get((account, user))

    def job_qos(self, user: str, account: str, qos: str) -> Qos | None:
        """The QOS a job runs under: the one it names, else its association's default as Slurm picks it
        (``assoc_mgr_get_default_qos_info``: the default QOS, else the only QOS the association may use,
        else root's default, else ``normal``).  None for a QOS that is not defined."""
        if not qos:
            assoc = self.association(user, account)
            root = self._index.get((ROOT, ""))
            if assoc is not None and assoc.default_qos:
                qos = assoc.default_qos
            elif assoc is not None and len(assoc.qos) == 1:
                qos = assoc.qos[0]
            elif root is not None and root.default_qos:
                qos = root.default_qos
            else:
                qos = "normal"
        return self.qos.get(qos)

    def complete(self, job: JobSpec) -> JobSpec:
        """``job`` with the account and QOS Slurm would have given it when it names none (what a
        sacct record of the job shows); other jobs unchanged."""
        changes = {}
        if not job.account:
            assoc = self.association(job.user, "")
            if assoc is not None:
                changes["account"] = assoc.account
        if not job.qos:
            found = self.job_qos(job.user, changes.get("account", job.account), "")
            if found is not None:
                changes["qos"] = found.name
        return replace(job, **changes) if changes else job

    @property
    def not_modelled(self) -> list[str]:
        """Every limit the dumps set that the replay does not model, as ``where: Key=value``."""
        notes = [f"association {a.account}/{a.user or '-'}: {item}"
                 for a in self.associations for item in a.not_modelled]
        notes += [f"QOS {q.name}: {item}" for q in self.qos.values() for item in q.not_modelled]
        return notes


# -- the '|' separated table -----------------------------------------------------------------------------
def _table(text: str, path: str, required: tuple[str, ...], what: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """(header, [(line number, fields)]) of a ``sacctmgr ... -P`` dump; every row as wide as the header."""
    lines = [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]
    if not lines:
        raise InputError(f"empty: dump it with '{what}'", path=path)
    number, head = lines[0]
    header = [name.strip() for name in head.split("|")]
    missing = [name for name in required if name not in header]
    if missing:
        raise InputError(f"no column {', '.join(missing)} in the header line: dump it with '{what}' "
                         f"(with its header, -P)", path=path, line=number)
    rows = []
    for number, line in lines[1:]:
        fields = line.split("|")
        if len(fields) != len(header):
            raise InputError(f"{len(fields)} fields where the header has {len(header)} (a '|' in a name?)",
                             path=path, line=number)
        rows.append((number, fields))
    return header, rows


def _name(text: str, path: str, line: int, column: str, empty: bool = False) -> str:
    if not text and empty:
        return text
    if not _NAME.match(text):
        raise InputError(f"not a Slurm name: {text!r}", path=path, line=line, field=column)
    return text


def _count(text: str, path: str, line: int, column: str, high: int = MAX_SHARES) -> int:
    if not re.fullmatch(r"[0-9]{1,10}", text) or int(text) > high:
        raise InputError(f"not a count (0-{high}): {text!r}", path=path, line=line, field=column)
    return int(text)


def _names(text: str, path: str, line: int, column: str) -> tuple[str, ...]:
    return tuple(_name(part, path, line, column) for part in text.split(",") if part) if text else ()


# -- associations -------------------------------------------------------------------------------------------
def parse_associations_text(text: str, path: str = "<sacctmgr show assoc>") -> tuple[Association, ...]:
    """The associations of a ``sacctmgr show assoc`` dump (see the module's docstring)."""
    header, rows = _table(text, path, ("Account", "User", "Share"), TREE_COMMAND)
    col = {name: i for i, name in enumerate(header)}
    tree = any(fields[col["Account"]].startswith(" ") for _, fields in rows)
    has_parent = "ParentName" in col

    def cell(fields: list[str], name: str) -> str:
        return fields[col[name]].strip() if name in col else ""

    clusters = {cell(fields, "Cluster") for _, fields in rows}
    if len(clusters) > 1:
        raise InputError(f"holds {len(clusters)} clusters ({', '.join(sorted(clusters))}); dump one with "
                         f"'{TREE_COMMAND} cluster=NAME'", path=path, field="Cluster")
    out: list[Association] = []
    seen: dict[tuple[str, str], int] = {}
    depth_of: dict[str, int] = {}               # account -> levels below root
    stack: list[str] = []                       # tree output: the account at each depth so far
    for number, fields in rows:
        raw_account = fields[col["Account"]]
        account = _name(raw_account.strip(), path, number, "Account")
        user = _name(cell(fields, "User"), path, number, "User", empty=True)
        if cell(fields, "Partition"):
            raise InputError("partition associations are not modelled (the replay gives a job the association "
                             "of its user and account)", path=path, line=number, field="Partition")
        share_text = cell(fields, "Share")
        shares = USE_PARENT if share_text.lower() == "parent" else _count(share_text, path, number, "Share")
        key = (account, user)
        if key in seen:
            raise InputError(f"association {account}/{user or '-'} appears twice (first on line {seen[key]})",
                             path=path, line=number, field="Account")
        seen[key] = number
        if user:
            parent = account
            if (account, "") not in seen:
                raise InputError(f"user {user} in account {account}, which has no line before it",
                                 path=path, line=number, field="Account")
        elif account == ROOT:
            parent = ""
        elif tree:
            depth = len(raw_account) - len(raw_account.lstrip(" "))
            if not 1 <= depth <= len(stack):
                raise InputError(f"account {account} indented {depth} blanks under {len(stack)} levels",
                                 path=path, line=number, field="Account")
            parent = stack[depth - 1]
            del stack[depth:]
        elif has_parent:
            parent = _name(cell(fields, "ParentName"), path, number, "ParentName")
            if (parent, "") not in seen:
                raise InputError(f"parent account {parent} has no line before it", path=path, line=number,
                                 field="ParentName")
        else:
            raise InputError(f"cannot tell the parent of account {account}: dump the tree with '{TREE_COMMAND}' "
                             f"or add ParentName to format=", path=path, line=number, field="Account")
        if not user:
            depth_of[account] = depth_of[parent] + 1 if parent else 0
            if depth_of[account] > MAX_DEPTH:
                raise InputError(f"account {account} is nested {depth_of[account]} levels deep (at most {MAX_DEPTH})",
                                 path=path, line=number, field="Account")
            if account == ROOT:
                stack = [ROOT]
            elif tree:
                stack.append(account)
        qos = _names(cell(fields, "QOS"), path, number, "QOS")
        default = _name(cell(fields, "Def QOS") or cell(fields, "DefQOS"), path, number, "Def QOS", empty=True)
        ignored = tuple(f"{name}={cell(fields, name)}" for name in _ASSOC_UNMODELLED if cell(fields, name))
        out.append(Association(account, user, parent, shares, qos, default, number, ignored))
    if (ROOT, "") not in seen:
        raise InputError("no root account: dump the whole tree", path=path, field="Account")
    return tuple(out)


# -- QOS ----------------------------------------------------------------------------------------------------
def _tres(text: str, path: str, line: int, column: str) -> dict[str, str]:
    """``cpu=8,mem=4G,gres/gpu=2`` as {name: value}."""
    out = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if not sep or not name or not value:
            raise InputError(f"not a TRES list (name=count,...): {text!r}", path=path, line=line, field=column)
        out[name] = value
    return out


def parse_qos_text(text: str, path: str = "<sacctmgr show qos>") -> dict[str, Qos]:
    """The QOS of a ``sacctmgr show qos -P`` dump, by name (see the module's docstring)."""
    header, rows = _table(text, path, ("Name",), "sacctmgr show qos -P")
    col = {name: i for i, name in enumerate(header)}

    def cell(fields: list[str], name: str) -> str:
        return fields[col[name]].strip() if name in col else ""

    out: dict[str, Qos] = {}
    for number, fields in rows:
        name = _name(cell(fields, "Name"), path, number, "Name")
        if name in out:
            raise InputError(f"QOS {name} appears twice (first on line {out[name].line})", path=path, line=number,
                             field="Name")
        priority = _count(cell(fields, "Priority") or "0", path, number, "Priority")
        factor_text = cell(fields, "UsageFactor") or "1"
        try:
            usage_factor = ascii_float(factor_text)
        except ValueError:
            usage_factor = math.nan
        if not 0 <= usage_factor <= MAX_USAGE_FACTOR:        # NaN fails both
            raise InputError(f"not a number from 0 to {MAX_USAGE_FACTOR:g}: {factor_text!r}", path=path, line=number,
                             field="UsageFactor")
        jobs_text = cell(fields, "MaxJobsPU")
        max_jobs = _count(jobs_text, path, number, "MaxJobsPU") if jobs_text else None
        ignored = []
        grp_cpus = None
        grp_text = cell(fields, "GrpTRES")
        if grp_text:
            for tres, value in _tres(grp_text, path, number, "GrpTRES").items():
                if tres == "cpu":
                    grp_cpus = _count(value, path, number, "GrpTRES")
                else:
                    ignored.append(f"GrpTRES={tres}={value}")
        ignored += [f"{key}={cell(fields, key)}" for key in _QOS_UNMODELLED if cell(fields, key)]
        flags = tuple(f for f in cell(fields, "Flags").split(",") if f)
        out[name] = Qos(name, priority, usage_factor, max_jobs, grp_cpus, flags, tuple(ignored), number)
    return out


def read_accounts(assoc_path: str | Path, qos_path: str | Path | None = None) -> SlurmAccounts:
    """The accounts of two dump files (QOS optional: then none is defined)."""
    def text(path) -> str:
        try:
            return Path(path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise InputError(f"cannot read: {getattr(error, 'strerror', None) or error}", path=str(path)) from None

    associations = parse_associations_text(text(assoc_path), str(assoc_path))
    qos = parse_qos_text(text(qos_path), str(qos_path)) if qos_path is not None else {}
    for a in associations:
        for name in (*a.qos, *([a.default_qos] if a.default_qos else [])):
            if qos and name not in qos:
                raise InputError(f"QOS {name} of {a.account}/{a.user or '-'} is not in {qos_path}",
                                 path=str(assoc_path), line=a.line, field="QOS")
    return SlurmAccounts(associations, qos)

"""A site's slurm.conf files read the way Slurm 22.05 reads them: ``Include`` lines followed (Slurm's
relative-path rule of the release, a cycle guard), comments and continuations removed, every logical
line given with its file and line number, and the last value of every plain setting (what ``greenslurm
hook check`` needs).  Missing files and cycles are *problems*, not errors: ``hook check`` reports them.
:mod:`greenslurm.traces.slurm_conf` builds the typed model from these lines.
"""

from __future__ import annotations

import glob
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

FAIL = "fail"                 # the level of a reading problem (``hook check`` prints it as a failed check)
LINE_KEYS = {"nodename", "partitionname", "nodeset", "downnodes", "frontendname"}   # the rest of the line is theirs
MAXINCLUDE_DEPTH = 32
INCLUDE = re.compile(r"include\s+(\S+)", re.IGNORECASE)
# KEY=VALUE as Slurm's s_p parser matches it: spaces may surround '=', a value is quoted or runs to the
# next space, and an empty value is allowed only at the end of the line ("Nodes=" for no nodes)
KEY_VALUE = re.compile(r'\s*([A-Za-z0-9_.]+)\s*[-*+/]?=\s*(?:"([^"]*)"|(\S+)|(?=\s*$))(?=\s|$)')


@dataclass(frozen=True)
class Setting:
    value: str
    path: Path
    line: int

    def where(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass(frozen=True)
class ConfLine:
    """One logical line (Include lines excluded): its file, its first physical line number, its text."""

    path: Path
    line: int
    text: str


@dataclass
class SlurmConfFiles:
    """slurm.conf with its Include files as read: every plain setting (key in lower case -> the last
    value, as Slurm keeps it), every logical line in order, the files read in order, and the problems
    met, each (level, message)."""

    path: Path
    settings: dict[str, Setting] = field(default_factory=dict)
    lines: list[ConfLine] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    problems: list[tuple[str, str]] = field(default_factory=list)

    def get(self, key: str) -> str | None:
        found = self.settings.get(key.lower())
        return found.value if found else None


def logical_lines(text: str) -> list[tuple[int, str]]:
    """slurm.conf's lines as Slurm's parser sees them, each with its first line number: ``#`` starts a
    comment unless escaped (``\\#``), a line ending in an odd number of backslashes continues on the
    next, and a backslash escapes the character after it.

    >>> logical_lines('A=1 # note\\nB=x\\\\\\n  y\\nC=a\\\\#b\\n')
    [(1, 'A=1 '), (2, 'B=x  y'), (4, 'C=a#b')]
    """
    out: list[tuple[int, str]] = []
    pending, start = "", None
    for number, raw in enumerate(text.splitlines(), 1):
        line, backslashes = raw, 0
        for i, char in enumerate(raw):
            if char == "#" and backslashes % 2 == 0:
                line = raw[:i]
                break
            backslashes = backslashes + 1 if char == "\\" else 0
        stripped = line.rstrip()
        trailing = len(stripped) - len(stripped.rstrip("\\"))
        if start is None:
            start = number
        if trailing % 2 == 1:
            pending += stripped[:-1]
            continue
        out.append((start, re.sub(r"\\(.)", r"\1", pending + line)))
        pending, start = "", None
    if pending:
        out.append((start, re.sub(r"\\(.)", r"\1", pending)))
    return [(n, line) for n, line in out if line.strip()]


def read_slurm_conf(path: Path, *, relative_to_includer: bool = False) -> SlurmConfFiles:
    """slurm.conf and the files its ``Include`` lines name, in order, the last value of a key winning.

    A relative Include name is looked up beside slurm.conf (Slurm 23.02 and later), or beside the file
    holding the Include line when ``relative_to_includer`` (Slurm 22.05 and earlier; the same for
    Include lines in slurm.conf itself).  ``%c`` is the ClusterName in lower case.  Slurm expands no
    wildcards (an Include with ``*`` fails there): such a line is reported and not followed.  A missing or unreadable file and a
    cycle (a file that includes itself, directly or not) are reported and not followed."""
    conf = SlurmConfFiles(Path(path))
    _read_into(conf, Path(path), (), relative_to_includer)
    return conf


def _read_into(conf: SlurmConfFiles, path: Path, stack: tuple[Path, ...], relative_to_includer: bool) -> None:
    try:
        text = path.read_text(errors="replace")
    except FileNotFoundError:
        conf.problems.append((FAIL, f"{path}: no such file"))
        return
    except OSError as exc:
        conf.problems.append((FAIL, f"{path}: cannot read: {exc.strerror or exc}"))
        return
    real = Path(os.path.realpath(path))
    stack = stack + (real,)
    conf.files.append(path)
    for number, line in logical_lines(text):
        include = INCLUDE.match(line.lstrip())
        if include:
            _follow(conf, include.group(1), path, number, stack, relative_to_includer)
            continue
        conf.lines.append(ConfLine(path, number, line))
        pairs = list(KEY_VALUE.finditer(line))
        if pairs and pairs[0].group(1).lower() in LINE_KEYS:
            continue
        for pair in pairs:
            value = pair.group(2) if pair.group(2) is not None else (pair.group(3) or "")
            conf.settings[pair.group(1).lower()] = Setting(value, path, number)


def _follow(conf: SlurmConfFiles, name: str, includer: Path, number: int, stack: tuple[Path, ...],
            relative_to_includer: bool) -> None:
    where = f"{includer}:{number}: Include {name}"
    if "%c" in name:
        cluster = conf.get("clustername")
        if cluster is None:
            conf.problems.append((FAIL, f"{where}: %c needs ClusterName set before this line"))
            return
        name = name.replace("%c", cluster.lower())
    if glob.has_magic(name):
        conf.problems.append((FAIL, f"{where}: Slurm expands no wildcards, so this Include fails (Slurm 22.05 "
                                    "waits 60 s for a file of that very name; later releases refuse it: 'Slurm "
                                    "does not support glob parsing'); name each file"))
        return
    base = includer.parent if relative_to_includer else conf.path.parent
    target = Path(name) if name.startswith("/") else base / name
    if Path(os.path.realpath(target)) in stack:
        chain = " -> ".join(p.name for p in stack) + f" -> {target.name}"
        conf.problems.append((FAIL, f"{where}: an Include cycle ({chain}); Slurm would never finish reading"))
        return
    if len(stack) >= MAXINCLUDE_DEPTH:
        conf.problems.append((FAIL, f"{where}: more than {MAXINCLUDE_DEPTH} nested Include levels"))
        return
    if not target.exists():
        conf.problems.append((FAIL, f"{where}: {target}: no such file"))
        return
    _read_into(conf, target, stack, relative_to_includer)

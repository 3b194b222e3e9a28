"""Where job_submit.lua keeps the failures it has not reported yet, and how greenslurm reads that file.

job_submit.lua counts the submissions it let through unchecked (or rejected) without the service's
answer and reports them with the next request the service answers.  Until then it keeps the count in
``<folder>/unreported`` (one line: ``COUNT INSTANCE:RANGES TOTAL KEPT``), so that a slurmctld restart or
a reload of the script loses none: the next load reads the line back.

A load that reads a line back carries its failures as its own first running totals; the line's
INSTANCE, TOTAL and what it carried itself say whose failures those are (:meth:`Kept.inherited`):
the load reports them with that (``failed_segments``), and writes it after KEPT in its own lines
(``COUNT INSTANCE:RANGES TOTAL KEPT SEGMENTS``), so that the service counts only what it did not
hold already for those loads (a report it recorded but whose answer came after ``timeout_ms``: the
hook counts that request as one more failure and keeps the failures it reported).

It writes the line under a fresh name ``unreported.<32 hex digits>`` and renames it over
``unreported``.  A slurmctld killed between the two (or a rename whose clean-up failed too) leaves
that name behind, a *leftover* (:class:`Leftover`): COUNT - KEPT of its failures are in no other
file (KEPT: the count ``unreported`` held when the line was written, which the next load carries
on).  TOTAL is the load's running total as its requests report it (``failed_total``): the leftover's
own failures are the load's totals TOTAL-COUNT+KEPT+1 to TOTAL (:attr:`Kept.own_totals`), which the
service counts once, whether the load reports them later itself or not
(:meth:`~greenslurm.slurm_plugin.record.DecisionRecord.fold`).

slurmctld runs as ``SlurmUser`` (root by Slurm's default) and reads that file when it loads the
script, with Lua's plain ``io.open`` (no lstat, no O_NONBLOCK): whoever can put something under that
name can stall the load with a FIFO or make it read another file through a link.  So the folder
belongs to slurmctld's user alone: ``greenslurm hook install`` makes it beside job_submit.lua, owned
by SlurmUser, mode 0755, and renders its path into the script; ``greenslurm hook check`` checks it
and every folder above it.

greenslurm's own readers (``hook install``, moving the file of an earlier layout; ``hook check``,
saying how many failures wait) open it read-only with O_NOFOLLOW and O_NONBLOCK and read it only when
it is a regular file.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shlex
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

FOLDER_NAME = "greenslurm-failures"      # beside job_submit.lua
FILE_NAME = "unreported"
MOVED = "moved-earlier"                  # the last line hook install moved in from an earlier layout
HANDED = "ffff"                          # after a load's name (14 hex digits): a line hook install handed over
FOLDER_MODE = 0o755                      # slurmctld's user writes; the service and admins read
MAX_BYTES = 65536                        # job_submit.lua reads this much of the file: its lines name ranges up
                                         # to 4,000 bytes (MAX_RANGES_BYTES), an earlier script's up to 1,000
# job_submit.lua's patterns: Lua's %d is an ASCII digit (Python's \d alone is any Unicode digit)
_LINE = re.compile(r"(\d+) ([0-9a-fA-F]+:[\d,-]*)(?: (\d+) (\d+)(?: ([^\n]*))?\n)?", re.ASCII)
_SEGMENT = re.compile(r"([0-9a-fA-F]{1,32}):(\d+):(\d+)", re.ASCII)    # INSTANCE:TOTAL:COUNT
MAX_SEGMENTS = 32           # earlier loads a line names (the newest): 32 * 67 bytes fit a request's 4,096
LEFTOVER = re.compile(re.escape(FILE_NAME) + r"\.[0-9a-f]{32}")     # job_submit.lua's private_name()
LEFTOVER_AFTER_S = 60.0     # job_submit.lua renames its line within one call, microseconds after writing it
LUA_EXACT_MAX = 2 ** 53     # Slurm 22.05's job_submit/lua runs Lua 5.1: numbers are doubles, exact up to here


def failures_folder(conf_dir: Path) -> Path:
    """The folder ``hook install`` makes beside job_submit.lua (in slurm.conf's folder).

    >>> failures_folder(Path("/etc/slurm"))
    PosixPath('/etc/slurm/greenslurm-failures')
    """
    return conf_dir / FOLDER_NAME


def earlier_file(socket_path: str) -> Path:
    """Where job_submit.lua kept the file before it had a folder of its own: beside the socket, in
    the runtime folder the service's user owns."""
    return Path(f"{socket_path}.failures")


@dataclass(frozen=True)
class Kept:
    """The line job_submit.lua keeps: how many failures, ``INSTANCE:RANGES`` (the load that counted
    them and its request numbers) and, from this version on, the load's running total and the count
    ``unreported`` held when the line was written (None in an earlier script's line)."""

    count: int
    earlier: str
    total: int | None = None
    kept: int | None = None
    segments: tuple[tuple[str, int, int], ...] = ()     # what the load's first totals are (parse_segments)

    @property
    def instance(self) -> str:
        return self.earlier.split(":")[0]

    @property
    def line(self) -> str:
        extra = f" {self.total} {self.kept}" if self.total is not None and self.kept is not None else ""
        if extra and self.segments:
            extra += " " + segments_text(self.segments)
        return f"{self.count} {self.earlier}{extra}\n"

    def inherited(self) -> tuple[tuple[str, int, int], ...]:
        """What the first ``count`` running totals of a load that reads this line back are, as
        ``(instance, total, count)`` segments (the failures of load ``instance`` with running totals
        ``(total - count, total]``, oldest load first): what this line carried, then its own load's
        ``count`` minus that, its last ones.  Only the newest :data:`MAX_SEGMENTS` are kept (the
        failures of older ones then count as the new load's own, as before a line said them); none
        for an earlier script's line, or one whose numbers do not add up (job_submit.lua never writes
        one, or one of a load whose name is longer than any load's).  job_submit.lua's load does the same
        (``inherited_from``).

        >>> parse("4 a:1-4 4 3\\n").inherited()           # a's totals 1..4
        (('a', 4, 4),)
        >>> parse("5 b:1 5 4 a:4:4\\n").inherited()       # a's 1..4, then b's 5
        (('a', 4, 4), ('b', 5, 1))
        >>> parse("2 b:1 5 0\\n").inherited(), parse("3 a:1-3\\n").inherited(), parse("3 a:1 2 0\\n").inherited()
        ((('b', 5, 2),), (), ())
        """
        if self.total is None or len(self.instance) > 32:      # (no load's name is longer: parse_segments)
            return ()
        own = self.count - sum(count for _, _, count in self.segments)
        if own < 0 or own > self.total:
            return ()
        found = self.segments + (((self.instance, self.total, own),) if own else ())
        return found[-MAX_SEGMENTS:]

    @property
    def own_totals(self) -> tuple[int, int] | None:
        """The running totals ``(after, upto]`` of the failures this line holds beyond what
        ``unreported`` held when it was written: what a leftover holds that no load reads back; None
        for an earlier script's line (it does not say).

        >>> Kept(3, "ab:5-7", total=7, kept=1).own_totals   # 1 of the 3 was in unreported: 2 its own
        (5, 7)
        """
        if self.total is None or self.kept is None:
            return None
        return self.total - self.count + min(self.kept, self.count), self.total


def uncovered(after: int, upto: int, covered: list[tuple[int, int]]) -> int:
    """How many of the running totals ``after+1 .. upto`` no interval ``(a, b]`` of ``covered`` holds.

    >>> uncovered(0, 10, [(2, 4), (3, 6)])      # 1, 2 and 7..10: (2, 4] and (3, 6] hold 3..6
    6
    >>> uncovered(5, 7, [(5, 7)]), uncovered(7, 5, [])
    (0, 0)
    """
    count, at = 0, after
    for a, b in sorted(covered):
        if b <= at:
            continue
        if a >= upto:
            break
        count += max(0, min(a, upto) - at)
        at = b
        if at >= upto:
            break
    return count + max(0, upto - at)


def parse(text: str) -> Kept | None:
    """The kept line as job_submit.lua reads it back (its start must match; the rest is ignored); None
    when it does not.  TOTAL and KEPT count only with the line's end after them (a line cut by a full
    disk has no end).  A number above :data:`LUA_EXACT_MAX` makes no line: job_submit.lua never
    writes one (its Lua 5.1 reads 2^53 + 1 back as 2^53, and prints 1e20 with ``%d`` as -2^63, a
    line its next load ignores), and the record's INTEGER could not hold it either.

    >>> parse("3 65f1a2b30c4d5e:1-2,7\\n")
    Kept(count=3, earlier='65f1a2b30c4d5e:1-2,7', total=None, kept=None, segments=())
    >>> parse("3 65f1a2b30c4d5e:1-2,7 9 1\\n").own_totals
    (7, 9)
    >>> parse("x 1:1"), parse(""), parse("9007199254740993 ab:1\\n")    # the last: 2^53 + 1
    (None, None, None)
    """
    match = _LINE.match(text)
    if not match or any(int(number) > LUA_EXACT_MAX for number in match.group(1, 3, 4) if number is not None):
        return None
    total, kept = match.group(3), match.group(4)
    count = int(match.group(1))
    return Kept(count, match.group(2), None if total is None else int(total), None if kept is None else int(kept),
                parse_segments(match.group(5) or "", count, match.group(2).partition(":")[0]) or ())


def parse_segments(text: str, most: int, own: str = "") -> tuple[tuple[str, int, int], ...] | None:
    """``INSTANCE:TOTAL:COUNT,...`` (:meth:`Kept.inherited`) as segments; None when it is not that
    exactly: more than :data:`MAX_SEGMENTS`, a count of 0 or above its total, a number Lua cannot hold
    (:data:`LUA_EXACT_MAX`), counts adding up to more than ``most`` (the failures the line or the
    request holds), or a load named twice or named ``own`` (the load whose line or request it is):
    each load writes its own name once, after the names it read back, so no chain of loads names one
    twice, and totals of one load said twice would be counted once (failures lost).  Empty text: no
    segment.

    >>> parse_segments("a:4:4,b:5:1", 5), parse_segments("", 0)
    ((('a', 4, 4), ('b', 5, 1)), ())
    >>> parse_segments("a:4:4,b:5:1", 4), parse_segments("a:4:5", 9), parse_segments("a:4:4,", 9)
    (None, None, None)
    >>> parse_segments("a:2:2,a:2:2", 4), parse_segments("b:4:2", 4, own="b")
    (None, None)
    """
    if not text:
        return ()
    items = text.split(",")
    if len(items) > MAX_SEGMENTS:
        return None
    found = []
    for item in items:
        match = _SEGMENT.fullmatch(item)
        if not match:
            return None
        total, count = int(match.group(2)), int(match.group(3))
        if not 0 < count <= total <= LUA_EXACT_MAX:
            return None
        found.append((match.group(1), total, count))
    names = [instance for instance, _, _ in found] + [own]
    if len(set(names)) < len(names) or sum(count for _, _, count in found) > most:
        return None
    return tuple(found)


def segments_text(segments: tuple[tuple[str, int, int], ...]) -> str:
    """Segments as a line and a request say them.

    >>> segments_text((("a", 4, 4), ("b", 5, 1)))
    'a:4:4,b:5:1'
    """
    return ",".join(f"{instance}:{total}:{count}" for instance, total, count in segments)


@dataclass(frozen=True)
class Leftover:
    """A line job_submit.lua wrote under a fresh name and never renamed over ``unreported``."""

    path: Path
    kept: Kept | None               # None: no line (cut short, empty) or not a regular file
    age_s: float
    problem: str = ""               # not a regular file: why it was not read

    @property
    def settled(self) -> bool:
        """Old enough to be a line slurmctld will never rename: written :data:`LEFTOVER_AFTER_S` or
        more ago, or that much ahead of the clock (written before the clock was stepped back: a line
        slurmctld writes now has its mtime within microseconds of now).

        >>> [Leftover(Path("u"), None, age_s).settled for age_s in (59.9, 60.0, -59.9, -3600.0)]
        [False, True, False, True]
        """
        return abs(self.age_s) >= LEFTOVER_AFTER_S

    @property
    def handed_over(self) -> bool:
        """Written by ``hook install`` (:func:`handed_over`), not by job_submit.lua."""
        return self.kept is not None and self.kept.instance[14:].startswith(HANDED)

    @property
    def own(self) -> int | None:
        """How many failures it holds that no load reads back (None: an earlier script's line)."""
        totals = self.kept.own_totals if self.kept is not None else (0, 0)
        return None if totals is None else totals[1] - totals[0]


def leftovers(folder: Path, now_s: float) -> list[Leftover]:
    """The names ``unreported.<32 hex digits>`` in ``folder`` (by name), each read as :func:`read_kept`
    reads (no link followed, no FIFO waited on), with its age at ``now_s`` (from its mtime)."""
    found = []
    try:
        names = sorted(name for name in os.listdir(folder) if LEFTOVER.fullmatch(name))
    except OSError:                     # missing, or not searchable: folder_problems says why
        return []
    for name in names:
        path = folder / name
        try:
            age_s = now_s - os.lstat(path).st_mtime
            found.append(Leftover(path, read_kept(path), age_s))
        except FileNotFoundError:       # renamed or removed meanwhile
            continue
        except OSError as exc:          # NotRegular, or unreadable
            found.append(Leftover(path, None, 0.0, str(exc)))
    return found


def sync_kept(folder: Path) -> None:
    """fsync ``unreported`` and ``folder``: job_submit.lua's io has no fsync, so its line and its
    rename stay in the page cache until the kernel writes them back (up to ~30 s on Linux's
    defaults); a power loss before that can leave the old line or, on some file systems, an empty
    file.  fsync works on a descriptor opened read-only, so whoever may read the folder can do it."""
    for path, flags in ((folder / FILE_NAME, os.O_NOFOLLOW | os.O_NONBLOCK), (folder, os.O_DIRECTORY)):
        try:
            fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY | flags)
        except OSError:                 # missing (nothing kept), or a link: nothing of the hook's to sync
            continue
        try:
            if stat.S_ISREG(os.fstat(fd).st_mode) or path == folder:
                os.fsync(fd)
        finally:
            os.close(fd)


class NotRegular(OSError):
    """The name holds a link, FIFO, device, socket or folder: not read."""


def read_kept(path: Path) -> Kept | None:
    """The kept line of ``path``, read without following a link and without waiting on a FIFO; None
    when there is no such file or its text is not a kept line.  Anything but a regular file is
    :class:`NotRegular` (never opened for reading: a FIFO is opened non-blocking, then refused)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if os.path.islink(path):                # O_NOFOLLOW on a link: ELOOP
            raise NotRegular(f"{path}: a symbolic link, not followed") from None
        raise
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegular(f"{path}: not a regular file ({_kind(mode)}), not read")
        return parse(os.read(fd, MAX_BYTES).decode("ascii", "replace"))
    finally:
        os.close(fd)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISDIR, "a folder"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def removal(path: Path) -> tuple[str, str]:
    """What is at ``path`` (never followed: a link is a link) and the command that removes that name
    alone: ``rm --`` for a file, a link (never what it points to), a FIFO, a socket or a device;
    ``rmdir --`` for an empty folder; ``rm -r --one-file-system --`` for a folder holding something
    (what it holds is removed, links in it are not followed, another file system mounted in it is
    left).  ("", "") when nothing is there.

    >>> removal(Path("/nonexistent/unreported"))
    ('', '')
    """
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return "", ""
    quoted = shlex.quote(str(path))
    if stat.S_ISREG(mode):
        return "a regular file", f"rm -- {quoted}"
    if not stat.S_ISDIR(mode):
        return _kind(mode), f"rm -- {quoted}"
    try:
        entries = len(os.listdir(path))
    except OSError as exc:
        return f"a folder that cannot be listed ({exc.strerror or exc})", f"rm -r --one-file-system -- {quoted}"
    if entries == 0:
        return "an empty folder", f"rmdir -- {quoted}"
    return f"a folder holding {entries} {'entry' if entries == 1 else 'entries'}", f"rm -r --one-file-system -- {quoted}"


def folder_problems(folder: Path, owner_uid: int) -> list[str]:
    """Why someone other than ``owner_uid`` (slurmctld's user) and root could put a file in ``folder``
    or swap the folder itself (a problem of a folder above it says the command that mends it); empty
    when nobody can.  The folder must be a real folder of that owner with no write bit for group or
    others; every folder above it owned by root or that owner and not writable by others (a
    world-writable folder with the sticky bit, such as /tmp, is fine: nobody else may rename what it
    holds)."""
    try:
        st = os.lstat(folder)
    except FileNotFoundError:
        return [f"{folder}: missing"]
    except OSError as exc:              # under a file, or a folder this user cannot search
        return [f"{folder}: cannot look at it: {exc.strerror or exc}"]
    if stat.S_ISLNK(st.st_mode):
        return [f"{folder}: a symbolic link, not a folder"]
    if not stat.S_ISDIR(st.st_mode):
        return [f"{folder}: not a folder"]
    problems = []
    if st.st_uid != owner_uid:
        problems.append(f"{folder}: owned by uid {st.st_uid}, not slurmctld's user (uid {owner_uid})")
    if stat.S_IMODE(st.st_mode) & 0o022:
        problems.append(f"{folder}: mode {stat.S_IMODE(st.st_mode):04o}, writable by others")
    for above in Path(os.path.realpath(folder)).parents:        # through any link on the way
        up = os.stat(above)
        if up.st_uid not in (0, owner_uid):
            problems.append(f"{above}: owned by uid {up.st_uid}, who can replace {folder} "
                            f"(run chown root {shlex.quote(str(above))})")
        elif stat.S_IMODE(up.st_mode) & 0o022 and not up.st_mode & stat.S_ISVTX:
            problems.append(f"{above}: mode {stat.S_IMODE(up.st_mode):04o}, others can replace {folder} "
                            f"(run chmod go-w {shlex.quote(str(above))})")
    return problems


def make_folder(folder: Path, owner_uid: int) -> Path:
    """Make ``folder`` (if missing) a folder of ``owner_uid``, mode 0755; a link or file already under
    that name is refused (NotADirectoryError: it is opened with O_DIRECTORY | O_NOFOLLOW)."""
    try:
        os.mkdir(folder, FOLDER_MODE)
    except FileExistsError:
        pass
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if st.st_uid != owner_uid:
            os.fchown(fd, owner_uid, -1)
        os.fchmod(fd, FOLDER_MODE)
    finally:
        os.close(fd)
    return folder


def move_earlier(old: Path, folder: Path, owner_uid: int) -> Kept | None:
    """Move the failures an earlier job_submit.lua kept at ``old`` (beside the socket) into ``folder``,
    owned by ``owner_uid``; what was moved.  Only a regular file holding a kept line is taken (its
    line is written anew, never the file itself), as ``unreported``, which the next load of this
    job_submit.lua reads; the new folder's own file, when there is one, is newer and stays (the old
    one is then left for the admin; ``hook check`` names it).  The line moved is noted in
    ``folder/moved-earlier``.

    The old name is first renamed away, to ``<old>.moving.<32 hex digits>`` (a name nobody can have
    planted), and only that file is read and removed: a line the earlier job_submit.lua writes at the
    old name meanwhile makes a new file there, which stays for ``hook check`` to find, never one
    removed unread.  A file that is not taken is put back under the old name (linked, never over a
    newer one; when one is there, it stays under the moving name, which ``hook check`` names too).

    The earlier script's line is its load's whole unreported count: one written again after a move
    (same load, :data:`MOVED` names the line moved) counts the moved failures again.  Such a line,
    or one that finds ``unreported`` there, is not written into ``unreported`` (the new script,
    running by then, reads that file only when it loads, and replaces it at its next failure): it
    becomes a line the service counts once, as a leftover (:func:`leftovers`, :func:`handed_over`),
    holding only the failures beyond those moved before.

    The folder belongs to ``owner_uid``, who may leave anything in it (a FIFO, a hard link to a file
    of root's): lines are written to files made anew under a random name (``mkstemp``: O_EXCL, never
    an existing name), fsynced, and hard-linked to their name, which fails when job_submit.lua wrote
    ``unreported`` meanwhile (a rename would replace that newer line)."""
    try:
        if not stat.S_ISREG(os.lstat(old).st_mode):
            return None
        claimed = moving_name(old)
        os.rename(old, claimed)
    except FileNotFoundError:
        return None
    try:
        kept = read_kept(claimed)
    except NotRegular:                  # swapped in between the look and the rename
        kept = None
    try:
        before = read_kept(folder / MOVED)
    except OSError:
        before = None
    again = kept is not None and before is not None and before.instance == kept.instance
    if kept is None:
        moved = None
    elif not again and _link_new(folder, folder / FILE_NAME, kept.line, owner_uid):
        moved = kept
    else:                               # "unreported" is there (a newer line), or the same load wrote again
        handed = handed_over(kept, before)
        moved = kept if handed.own_totals[1] <= handed.own_totals[0] or _link_new(
            folder, folder / f"{FILE_NAME}.{secrets.token_hex(16)}", handed.line, owner_uid) else None
    if moved is not None:
        _note_moved(folder, moved, owner_uid)
        sync_kept(folder)
        os.unlink(claimed)
    elif _put_back(claimed, old):
        os.unlink(claimed)
    return moved


def handed_over(kept: Kept, before: Kept | None) -> Kept:
    """An earlier script's line as a leftover's line the service counts (see :func:`move_earlier`):
    its load name, :data:`HANDED` and its first request number (hex) name the series of counts the
    load wrote since its last report (its request numbers grow at the end while it adds failures,
    and start anew after a report); its own totals are the counts beyond ``before``, the line moved
    last, when that was of the same series.

    >>> handed_over(Kept(5, "abc123:4-8"), Kept(3, "abc123:4-6")).line    # 2 beyond the 3 moved
    '5 abc123ffff4:4-8 5 3\\n'
    >>> handed_over(Kept(1, "abc123:9"), Kept(3, "abc123:4-6")).own_totals   # reported in between
    (0, 1)
    """
    def first(line: Kept) -> tuple[str, int]:
        start = re.split(r"[-,]", line.earlier.partition(":")[2])[0]
        return line.instance, int(start) if start.isdigit() else 0

    series = f"{kept.instance}{HANDED}{first(kept)[1]:x}"
    same = before is not None and first(before) == first(kept)
    return Kept(kept.count, f"{series}:{kept.earlier.partition(':')[2]}", total=kept.count,
                kept=min(before.count, kept.count) if same else 0)


def _note_moved(folder: Path, kept: Kept, owner_uid: int) -> None:
    """``kept`` as the last line moved, in ``folder/moved-earlier`` (replaced: a rename replaces
    whatever is at that name, never writes through it)."""
    fd, temporary = tempfile.mkstemp(prefix=f".{MOVED}.", dir=folder)
    try:
        try:
            os.write(fd, kept.line.encode("ascii"))
            os.fchmod(fd, 0o644)
            os.fchown(fd, owner_uid, -1)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(temporary, folder / MOVED)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)


def moving_name(old: Path) -> Path:
    """A fresh name beside ``old`` for :func:`move_earlier` to rename it to."""
    return old.with_name(f"{old.name}.moving.{secrets.token_hex(16)}")


def moving_names(old: Path) -> list[Path]:
    """The names :func:`moving_name` makes beside ``old`` that are there (by name); no other name: one
    planted beside it (a name with a terminal's escape sequences, a newline, bytes that are not UTF-8)
    is not install's, and ``hook check`` must not print it as such.

    >>> moving_names(Path("/nonexistent/hook.sock.failures"))
    []
    """
    pattern = re.compile(re.escape(old.name) + r"\.moving\.[0-9a-f]{32}")
    try:
        return sorted(old.parent / name for name in os.listdir(old.parent) if pattern.fullmatch(name))
    except OSError:                     # missing, or not a folder this user may list
        return []


def _link_new(folder: Path, target: Path, line: str, owner_uid: int) -> bool:
    """``line`` in a new file of ``owner_uid`` linked as ``target`` (never replacing one); False
    when ``target`` exists."""
    fd, temporary = tempfile.mkstemp(prefix=f".{FILE_NAME}.", dir=folder)
    try:
        try:
            os.write(fd, line.encode("ascii"))
            os.fchmod(fd, 0o644)
            os.fchown(fd, owner_uid, -1)
            os.fsync(fd)                # the line on disk before its name (see sync_kept)
        finally:
            os.close(fd)
        os.link(temporary, target, follow_symlinks=False)     # a link swapped in is linked, not followed
    except FileExistsError:
        return False                    # job_submit.lua kept a newer line meanwhile: it stays
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
    sync_kept(folder)
    return True


def _put_back(claimed: Path, old: Path) -> bool:
    """``claimed`` linked back as ``old``; False when a newer file is there (``claimed`` then stays)."""
    try:
        os.link(claimed, old, follow_symlinks=False)
    except FileExistsError:
        return False
    return True

"""Where job_submit.lua keeps the failures it has not reported yet, and how greenslurm reads that file.

job_submit.lua counts the submissions it let through unchecked (or rejected) without the service's
answer and reports them with the next request the service answers.  Until then it keeps the count in
``<folder>/unreported`` (one line: ``COUNT INSTANCE:RANGES``), so that a slurmctld restart or a reload
of the script loses none: the next load reads the line back.  slurmctld runs as ``SlurmUser`` (root by
Slurm's default) and reads that file when it loads the script, with Lua's plain ``io.open`` (no lstat,
no O_NONBLOCK): whoever can put something under that name can stall the load with a FIFO or make it
read another file through a link.  So the folder belongs to slurmctld's user alone: ``greenslurm hook
install`` makes it beside job_submit.lua, owned by SlurmUser, mode 0755, and renders its path into the
script; ``greenslurm hook check`` checks it and every folder above it.

greenslurm's own readers (``hook install``, moving the file of an earlier layout; ``hook check``,
saying how many failures wait) open it read-only with O_NOFOLLOW and O_NONBLOCK and read it only when
it is a regular file.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import stat
import tempfile
from dataclasses import dataclass
from pathlib import Path

FOLDER_NAME = "greenslurm-failures"      # beside job_submit.lua
FILE_NAME = "unreported"
FOLDER_MODE = 0o755                      # slurmctld's user writes; the service and admins read
MAX_BYTES = 4096                         # job_submit.lua reads this much of the file
_LINE = re.compile(r"(\d+) ([0-9a-fA-F]+:[\d,-]*)")   # job_submit.lua's "^(%d+) ([%x]+:[%d,-]*)"


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
    """The line job_submit.lua keeps: how many failures, and ``INSTANCE:RANGES`` (the load that
    counted them and its request numbers)."""

    count: int
    earlier: str

    @property
    def line(self) -> str:
        return f"{self.count} {self.earlier}\n"


def parse(text: str) -> Kept | None:
    """The kept line as job_submit.lua reads it back (its start must match; the rest is ignored); None
    when it does not.

    >>> parse("3 65f1a2b30c4d5e:1-2,7\\n")
    Kept(count=3, earlier='65f1a2b30c4d5e:1-2,7')
    >>> parse("x 1:1"), parse("")
    (None, None)
    """
    match = _LINE.match(text)
    return Kept(int(match.group(1)), match.group(2)) if match else None


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
                       (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


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
    line is written anew, never the file itself); the new folder's own file, when there is one, is
    newer and stays (the old one is then left for the admin).  The old name is removed after the move:
    an unlink removes the name, never what a link points to.

    The folder belongs to ``owner_uid``, who may leave anything in it (a FIFO, a hard link to a file
    of root's): the line is written to a file made anew under a random name (``mkstemp``: O_EXCL,
    never an existing name) and hard-linked to ``unreported``, which fails when job_submit.lua wrote
    one meanwhile (a rename would replace that newer line)."""
    kept = read_kept(old)
    target = folder / FILE_NAME
    if kept is None or os.path.lexists(target):
        return None
    fd, temporary = tempfile.mkstemp(prefix=f".{FILE_NAME}.", dir=folder)
    try:
        try:
            os.write(fd, kept.line.encode("ascii"))
            os.fchmod(fd, 0o644)
            os.fchown(fd, owner_uid, -1)
        finally:
            os.close(fd)
        os.link(temporary, target, follow_symlinks=False)     # a link swapped in is linked, not followed
    except FileExistsError:
        return None                     # job_submit.lua kept a newer line meanwhile: it stays
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
    os.unlink(old)
    return kept

"""Files written whole or not at all: when writing one fails part way (a full disk, a quota or a
file-size limit, an interrupt), the part written is removed, so that no cut file is left that reads
as a whole one (a CSV file cut at a line end does).  A file is written under a hidden name of its
own and renamed to its path once whole: a link planted under the path is replaced, never followed
(it could point at a file outside the folder), and a pipe under the path never blocks the writing."""

from __future__ import annotations

import os
from contextlib import contextmanager, suppress


@contextmanager
def whole_file(path):
    """``path`` opened for writing bytes, removed again if the writing (or the closing, which writes
    what is buffered) raises.  A file that cannot be opened is left as it was.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = os.path.join(folder, "f.csv")
    ...     try:
    ...         with whole_file(path) as handle:
    ...             _ = handle.write(b"a,b\\n")
    ...             raise OSError(28, "No space left on device")
    ...     except OSError:
    ...         pass
    ...     os.path.exists(path)
    False
    """
    part = os.path.join(os.path.dirname(path) or ".", f".{os.path.basename(path)}.{os.getpid()}.part")
    with suppress(OSError):                # left by a killed run whose process id this one has
        os.unlink(part)
    # O_EXCL with O_CREAT never follows a link at ``part`` nor opens a file someone else left there
    descriptor = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o666)
    try:
        with os.fdopen(descriptor, "wb") as handle:
            yield handle
        os.replace(part, path)
    except BaseException:
        for stale in (part, path):         # an earlier file of the path would read as this run's
            with suppress(OSError):
                os.unlink(stale)
        raise

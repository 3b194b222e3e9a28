"""Files written whole or not at all: when writing one fails part way (a full disk, a quota or a
file-size limit, an interrupt), the part written is removed, so that no cut file is left that reads
as a whole one (a CSV file cut at a line end does)."""

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
    handle = open(path, "wb")
    try:
        with handle:
            yield handle
    except BaseException:
        with suppress(OSError):
            os.unlink(path)
        raise

"""Worker processes that end with their parent.

A pool's workers wait on a pipe from the parent; when the parent is killed (SIGKILL: no clean-up),
they may linger for a long time holding memory (a sweep's two workers stayed 80 s at 176 MB each).
:func:`end_with_parent` is the pools' initializer: a daemon thread in the worker looks every
``WATCH_S`` seconds whether its parent is still the one that started it, and ends the worker
(``os._exit``) when it is not, even in the middle of a long replay.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor

WATCH_S = 0.5


def end_with_parent() -> None:
    """Pool initializer: end this worker soon after its parent is gone (see the module docstring)."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(WATCH_S)
            if os.getppid() != parent:        # re-parented: the parent died
                os._exit(1)
    threading.Thread(target=watch, name="end-with-parent", daemon=True).start()


def worker_pool(workers: int, **options) -> ProcessPoolExecutor:
    """A process pool whose workers end with their parent."""
    return ProcessPoolExecutor(max_workers=workers, initializer=end_with_parent, **options)

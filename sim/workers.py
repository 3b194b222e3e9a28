"""Worker processes that end with their parent.

A pool's workers wait on a pipe from the parent; when the parent is killed (SIGKILL: no clean-up),
they may linger for a long time holding memory (a sweep's two workers stayed 80 s at 176 MB each).
:func:`worker_pool` starts each worker with a daemon thread that looks every
``WATCH_S`` seconds whether its parent is still the one that started it, and ends the worker
(``os._exit``) when it is not, even in the middle of a long replay.
"""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Callable

WATCH_S = 0.5


def _watch(parent: int) -> None:
    """A daemon thread that ends this process once its parent is no longer ``parent``.  The pool
    passes its own pid: a worker whose parent died before the watch began is caught as well."""
    def watch() -> None:
        while True:
            time.sleep(WATCH_S)
            if os.getppid() != parent:        # re-parented: the parent died
                os._exit(1)
    threading.Thread(target=watch, name="end-with-parent", daemon=True).start()


def _start_worker(parent: int, initializer: Callable[..., None] | None, initargs: tuple) -> None:
    _watch(parent)
    if initializer is not None:
        initializer(*initargs)


def worker_pool(workers: int, initializer: Callable[..., None] | None = None, initargs: tuple = (),
                **options) -> ProcessPoolExecutor:
    """A process pool whose workers end with their parent (``initializer(*initargs)`` then runs in
    each worker as ProcessPoolExecutor's would).  ``workers`` below 1 is a ValueError: a pool of no
    process would wait for ever."""
    if workers < 1:
        raise ValueError(f"a pool needs at least 1 worker, not {workers}")
    return ProcessPoolExecutor(max_workers=workers, initializer=_start_worker,
                               initargs=(os.getpid(), initializer, initargs), **options)

"""Compiled libraries that sit beside the module they speed up (built when the package is installed
with a C compiler; loaded with ctypes, so no Python headers are needed to build them).  Each is the
fast path of one reference that gives the same results and runs when the library is not built: the
replay's general loop for the pool and deadline cores, Python for the SWF scanner, numpy for the
output cells."""

from __future__ import annotations

import ctypes
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path

_LOADED: dict[str, ctypes.CDLL | None] = {}


def load_beside(module_file: str, name: str, python_api: bool = False) -> ctypes.CDLL | None:
    """The compiled library ``name`` in the folder of ``module_file``, or None when it is not built.
    ``python_api``: the library calls CPython's C API, so it is loaded as a ``ctypes.PyDLL`` (the
    interpreter's lock stays held during a call, and an error the call set is raised).

    >>> load_beside(__file__, "_no_such_library") is None
    True
    """
    folder = Path(module_file).parent
    key = f"{folder / name}{':python' if python_api else ''}"
    if key not in _LOADED:
        _LOADED[key] = None
        for suffix in EXTENSION_SUFFIXES:
            path = folder / f"{name}{suffix}"
            if path.is_file():
                try:
                    _LOADED[key] = (ctypes.PyDLL if python_api else ctypes.CDLL)(str(path))
                except OSError:
                    continue
                break
    return _LOADED[key]


# The compiled libraries the package builds (setup.py), by module, and what each speeds up.
COMPILED = {"greenslurm.sim.engine._pool_core": "pool core (FCFS, EASY and conservative replays)",
            "greenslurm.sim.engine._deadline_core": "deadline core (the deadline queue)",
            "greenslurm.traces._swf_scan": "SWF scanner",
            "greenslurm.sim.reporting._cells": "output cells (--out files)",
            "greenslurm.allocation._consecutive": "spread node choice (the slurm queue)",
            "greenslurm.sim.engine._will_run": "will-run test (the slurm queue)",
            "greenslurm.sim.engine._backfill_cycle": "backfill cycle (the slurm queue)"}
# Without them, measured on this project's logs (whole replays, wall time; docs/user-guide.md): KTH-SP2
# under EASY 3.8x slower, its deadline queue 68x, LANL-CM5 under conservative 115x; the slurm queue on
# KTH-SP2's first 8,000 jobs 3.4x-3.9x (CPU time: 16.1 s against 4.2 and 4.7 s, with its compiled backfill cycle).
MISSING_TEXT = ("the compiled cores are not built ({names}): greenslurm was installed without a C compiler, so "
                "replays run on the general loop (the reference, the same results), 2x to 115x slower "
                "(KTH-SP2 EASY 3.8x, its deadline queue 68x, its slurm queue 3.4x-3.9x, LANL-CM5 conservative 115x); install a C compiler "
                "and reinstall greenslurm ('greenslurm --version' lists the cores)")
_WARNED: list[bool] = []


def built_cores() -> dict[str, bool]:
    """Each compiled library's description and whether it is built (its file is beside its module;
    not loaded).

    >>> sorted(built_cores())[0]
    'SWF scanner'
    """
    from importlib.util import find_spec
    status = {}
    for module, what in COMPILED.items():
        package, name = module.rsplit(".", 1)
        folders = find_spec(package).submodule_search_locations or []
        status[what] = any((Path(folder) / f"{name}{suffix}").is_file()
                           for folder in folders for suffix in EXTENSION_SUFFIXES)
    return status


def cores_line() -> str:
    """What ``greenslurm --version`` says of the compiled cores."""
    status = built_cores()
    missing = [what for what, built in status.items() if not built]
    if not missing:
        return "compiled cores: " + ", ".join(status)
    return "compiled cores MISSING (the general loop runs the replays, slower): " + ", ".join(missing)


def warn_missing_once(stream=None) -> None:
    """Say on stderr, once per process, that the compiled cores are missing (called where a replay
    falls back to its reference because a library is not built, not when the user chose ``off``)."""
    if _WARNED:
        return
    missing = [what for what, built in built_cores().items() if not built]
    _warn_once(_WARNED, MISSING_TEXT.format(names=", ".join(missing) or "some"), stream)


# Said once per process when a replay given a slurm.conf runs FCFS, EASY or conservative in the general
# loop because of its cluster; KTH-SP2 node by node against the core (docs/replay-engine.md, --slurm-conf on the core).
SLURM_CONF_TEXT = ("the processor-pool core cannot run this replay on the slurm.conf's cluster ({why}): the compiled "
                   "core models interchangeable single-CPU nodes, so the replay runs in the general loop, slower "
                   "(KTH-SP2 on 100 one-CPU nodes in the general loop: EASY {easy}, conservative {conservative} the CPU time)")
_WARNED_SLURM_CONF: list[bool] = []


def _warn_once(said: list[bool], text: str, stream=None) -> None:
    """Say ``text`` on stderr as a warning unless ``said`` (one list per kind of warning) says it was."""
    import sys
    if said:
        return
    said.append(True)
    print("greenslurm: warning: " + text, file=stream or sys.stderr)


def warn_slurm_conf_once(why: str, stream=None) -> None:
    """Say on stderr, once per process, which fast path a slurm.conf's cluster keeps a replay off and why."""
    _warn_once(_WARNED_SLURM_CONF, SLURM_CONF_TEXT.format(why=why, easy="9x", conservative="87x"), stream)


# Said once per process when the deadline queue, on a cluster its compiled core takes, runs in the
# general loop because of the jobs (docs/replay-engine.md: KTH-SP2's deadline queue, 68x without the core)
DEADLINE_JOBS_TEXT = ("the deadline queue's compiled core cannot take these jobs ({why}), so the replay runs in the "
                      "general loop (the reference, the same results), slower: KTH-SP2's deadline queue takes 68x "
                      "the CPU time there")
_WARNED_DEADLINE_JOBS: list[bool] = []


def warn_deadline_jobs_once(why: str, stream=None) -> None:
    """Say on stderr, once per process, which jobs keep the deadline queue off its compiled core."""
    _warn_once(_WARNED_DEADLINE_JOBS, DEADLINE_JOBS_TEXT.format(why=why), stream)

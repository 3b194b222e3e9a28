"""Compiled libraries that sit beside the module they speed up (built when the package is installed
with a C compiler; loaded with ctypes, so no Python headers are needed to build them).  Every one
has a pure-Python definition that gives the same results, used when the library is not built."""

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

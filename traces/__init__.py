"""Trace readers: SWF, sacct (text and JSON) and the Alibaba GPU trace, into :class:`JobSpec` lists.

>>> from greenslurm.traces import read_trace, FORMATS
>>> sorted(FORMATS)
['alibaba', 'sacct', 'sacct-json', 'swf']

The format names load alone (the command line's help names them); the readers load on first use.
"""

from greenslurm.traces.formats import FORMATS

# name -> module that defines it: loaded when the name is first read
_LAZY = {"RecordLog": "greenslurm.traces.records", "TraceResult": "greenslurm.traces.records",
         "detect_format": "greenslurm.traces.base", "read_trace": "greenslurm.traces.base"}

__all__ = ["FORMATS", "RecordLog", "TraceResult", "detect_format", "read_trace"]


def __getattr__(name: str):
    if name not in _LAZY:
        # also how ``from greenslurm.traces import swf`` finds a submodule: the import system then imports it
        raise AttributeError(f"module 'greenslurm.traces' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value          # loaded once
    return value

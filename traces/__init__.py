"""Trace readers: SWF, sacct (text and JSON) and the Alibaba GPU trace, into :class:`JobSpec` lists.

>>> from greenslurm.traces import read_trace, FORMATS
>>> sorted(FORMATS)
['alibaba', 'sacct', 'sacct-json', 'swf']
"""

from greenslurm.traces.base import FORMATS, RecordLog, TraceResult, detect_format, read_trace

__all__ = ["FORMATS", "RecordLog", "TraceResult", "detect_format", "read_trace"]

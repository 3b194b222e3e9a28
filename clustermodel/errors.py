"""One error type for bad input, carrying where it came from (file, line, field)."""

from __future__ import annotations


class InputError(ValueError):
    """Bad user input: a trace record, a cluster file, a command-line value.

    The message always names the file, and when known the 1-based line and the field, so that a
    user can open the file and fix the record:

    >>> str(InputError("bad number 'x'", path="a.swf", line=3, field="run_time"))
    "a.swf:3: field run_time: bad number 'x'"
    >>> str(InputError("empty file", path="a.swf"))
    'a.swf: empty file'
    """

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 field: str | None = None) -> None:
        self.reason = message
        self.path = path
        self.line = line
        self.field = field
        super().__init__(self._render())

    def _render(self) -> str:
        where = self.path or "<input>"
        if self.line is not None:
            where += f":{self.line}"
        if self.field:
            return f"{where}: field {self.field}: {self.reason}"
        return f"{where}: {self.reason}"

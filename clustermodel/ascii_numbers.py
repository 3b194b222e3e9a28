"""Numbers in files greenslurm is given (traces, node lists, supply series): what C's ``strtod``
(and the tools that write the files) would read.

Python's ``float()`` reads more than that: underscores between digits ("1_000") and any Unicode
decimal digit ("１０００" full width, "١٣" Arabic-Indic).  No tool that writes these files puts those in a number;
a file that has them was changed by hand or by a broken tool, and its value is refused, not guessed.
"""

from __future__ import annotations


def ascii_float(text: str) -> float:
    """``text`` as a float, as ``float()`` reads it but ASCII only and without underscores
    (ValueError otherwise; NaN and infinities are the caller's to refuse).

    >>> ascii_float("1000"), ascii_float(" 1e3 "), ascii_float("-1"), ascii_float("489.00")
    (1000.0, 1000.0, -1.0, 489.0)
    >>> ascii_float("\uff11000")             # a full-width 1: float() reads 1000.0
    Traceback (most recent call last):
    ...
    ValueError: could not convert string to float: '１000'
    """
    if "_" in text or not text.isascii():
        raise ValueError(f"could not convert string to float: {text!r}")
    return float(text)


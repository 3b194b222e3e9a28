"""Splitting Slurm's lists at the commas outside brackets (``n[1-3,7],login``; ``gpu:2(S:0,1),mps:1``),
in one pass over the text."""

from __future__ import annotations

import re


def split_outside(text: str, opening: str, closing: str) -> list[str]:
    """``text`` split at each comma that no bracket encloses: a comma after which the next bracket (of
    ``opening`` or ``closing``) is not a ``closing`` one.  The same pieces as
    ``re.split(",(?![^" + opening + "]*" + closing + ")", text)``, whose look-ahead rescans the rest
    of the text at every comma (quadratic on a long run of commas); here each character is looked at
    once, right to left, remembering which bracket comes next.

    >>> split_outside("n[1-3,7],login", "[", "]"), split_outside("gpu:2(S:0,1),mps:1", "(", ")")
    (['n[1-3,7]', 'login'], ['gpu:2(S:0,1)', 'mps:1'])
    >>> split_outside("a,b]", "[", "]"), split_outside("a],b[", "[", "]"), split_outside("", "[", "]")  # unbalanced
    (['a,b]'], ['a]', 'b['], [''])
    """
    if closing not in text:
        return text.split(",")                # nothing encloses: every comma splits
    marks = [(m.start(), m.group()) for m in re.finditer("[," + re.escape(opening + closing) + "]", text)]
    cuts: list[int] = []
    closed = False                            # is the next bracket to the right a closing one?
    for position, mark in reversed(marks):
        if mark == ",":
            if not closed:
                cuts.append(position)
        else:
            closed = mark == closing
    pieces, start = [], 0
    for position in reversed(cuts):
        pieces.append(text[start:position])
        start = position + 1
    pieces.append(text[start:])
    return pieces

"""Slurm's hostlist syntax (``n[1-3,7],gpu[01-02],login``): expanded into names, split into items, and
matched against a cluster's node names without expanding (:class:`HostNames`)."""

from __future__ import annotations

import bisect
import itertools
import math
import re
from dataclasses import dataclass

from greenslurm.clustermodel.brackets import split_outside

# A hostlist's names average at most this many characters a host of its limit (a long name times a
# large range is memory, not hosts)
_CHARACTERS_A_NAME = 64
_NESTED = re.compile(r"\[[^\]]*\[")                  # a bracket opened inside another
_GROUPS = re.compile(r"([^\[]*)(?:\[([^\]]*)\])?")   # (literal, bracket's ranges) in turn


def expand_hostlist(text: str, limit: int = 1_000_000) -> list[str]:
    """Slurm's hostlist syntax expanded, in order: comma-separated names, each with bracketed ranges
    (``n[1-3,7]``; leading zeros fix the width; several bracket groups multiply out).  More than
    ``limit`` names in all is a ValueError, found before they are built (``r[0-99999]b[0-99999]``
    would be ten billion).

    >>> expand_hostlist("n[1-3,7],gpu[01-02],login")
    ['n1', 'n2', 'n3', 'n7', 'gpu01', 'gpu02', 'login']
    >>> expand_hostlist("r[0-1]b[8-9]"), expand_hostlist("")
    (['r0b8', 'r0b9', 'r1b8', 'r1b9'], [])
    >>> expand_hostlist("n[3-1]")
    Traceback (most recent call last):
    ...
    ValueError: hostlist 'n[3-1]': range 3-1 goes down
    >>> expand_hostlist("r[0-99999]b[0-99999]")
    Traceback (most recent call last):
    ...
    ValueError: hostlist 'r[0-99999]b[0-99999]': names more than 1,000,000 hosts
    """
    names: list[str] = []
    for item in split_outside(text.strip(), "[", "]"):
        item = item.strip()
        if not item:
            continue
        if "[" not in item and "]" not in item:          # a plain name
            if len(names) + 1 > limit:
                raise ValueError(f"hostlist {item!r}: names more than {limit:,} hosts")
            names.append(item)
            continue
        if item.count("[") != item.count("]") or _NESTED.search(item):
            raise ValueError(f"hostlist {item!r}: unbalanced brackets")
        groups = [(literal, _bracket_ranges(ranges, item) if ranges else [])
                  for literal, ranges in _GROUPS.findall(item) if literal or ranges]
        total = 1                           # names of this item: the groups' sizes multiply
        length = 0                          # characters of its longest name
        for literal, ranges in groups:
            total *= sum(last - first + 1 for first, last, _ in ranges) if ranges else 1
            length += len(literal) + max((max(width, len(str(last))) for _, last, width in ranges), default=0)
            if len(names) + total > limit:
                raise ValueError(f"hostlist {item!r}: names more than {limit:,} hosts")
        if total * length > limit * _CHARACTERS_A_NAME:
            raise ValueError(f"hostlist {item!r}: names more than {limit * _CHARACTERS_A_NAME:,} characters")
        # each name joined once from its parts (not grown group by group: linear in what it writes)
        choices = [[literal + f"{i:0{width}d}" for first, last, width in ranges for i in range(first, last + 1)]
                   if ranges else [literal] for literal, ranges in groups]
        names += [name for name in map("".join, itertools.product(*choices)) if name]
    return names


def hostlist_items(text: str) -> list[str]:
    """The comma-separated items of a hostlist (commas inside brackets belong to the item), in one
    pass over the text.

    >>> hostlist_items("n[1-3,7], gpu[01-02],,login")
    ['n[1-3,7]', 'gpu[01-02]', 'login']
    """
    items, depth, start = [], 0, 0
    for i, c in enumerate(text):
        if c == "[":
            depth += 1
        elif c == "]":
            depth = max(depth - 1, 0)
        elif c == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    items.append(text[start:].strip())
    return [item for item in items if item]


@dataclass(frozen=True)
class _Bracket:
    """One bracket of a hostlist item: its ranges by width (the digits of the lower bound), merged
    and sorted, so that a run of digits is looked up in O(log ranges)."""

    by_width: dict          # width -> (starts, ends): sorted, disjoint
    size: int               # the names it gives (ranges of one width that overlap counted once)

    def holds(self, digits: str) -> bool:
        """Whether ``digits`` is one of the strings this bracket gives (``f"{i:0{width}d}"``)."""
        value = int(digits)
        if len(digits) > len(str(value)):           # leading zeros: only its own width writes it
            widths = (len(digits),)
        else:                                       # any width up to its length writes it so
            widths = range(1, len(digits) + 1)
        for width in widths:
            found = self.by_width.get(width)
            if found is not None:
                starts, ends = found
                k = bisect.bisect_right(starts, value) - 1
                if k >= 0 and ends[k] >= value:
                    return True
        return False


def _parse_bracket(ranges: str, item: str) -> _Bracket:
    spans: dict[int, list[tuple[int, int]]] = {}
    for first, last, width in _bracket_ranges(ranges, item):
        spans.setdefault(width, []).append((first, last))
    by_width = {}
    for width, parts in spans.items():
        parts.sort()
        starts, ends = [], []
        for first, last in parts:
            if ends and first <= ends[-1] + 1:
                ends[-1] = max(ends[-1], last)
            else:
                starts.append(first)
                ends.append(last)
        by_width[width] = (starts, ends)
    return _Bracket(by_width, sum(e - b + 1 for starts, ends in by_width.values() for b, e in zip(starts, ends)))


def _parse_item(item: str) -> list:
    """An item as its parts: literal strings and brackets (:class:`_Bracket`), in order."""
    if item.count("[") != item.count("]") or _NESTED.search(item):
        raise ValueError(f"hostlist {item!r}: unbalanced brackets")
    parts: list = []
    for literal, ranges in _GROUPS.findall(item):
        if literal:
            parts.append(literal)
        if ranges:
            parts.append(_parse_bracket(ranges, item))
    return parts


def _item_holds(parts: list, name: str) -> bool:
    """Whether the item of ``parts`` gives ``name`` (each bracket takes a run of digits; every split of
    a run between adjacent brackets is tried, once per position)."""
    failed: set[tuple[int, int]] = set()

    def match(pos: int, k: int) -> bool:
        if k == len(parts):
            return pos == len(name)
        if (pos, k) in failed:
            return False
        part = parts[k]
        if isinstance(part, str):
            ok = name.startswith(part, pos) and match(pos + len(part), k + 1)
        else:
            end = pos
            while end < len(name) and name[end] in "0123456789":
                end += 1
            ok = any(part.holds(name[pos:stop]) and match(stop, k + 1) for stop in range(pos + 1, end + 1))
        if not ok:
            failed.add((pos, k))
        return ok
    return match(0, 0)


# names tried one by one for items of several bracket groups (each item: its names or the cluster's that
# start like it, whichever are fewer) before a hostlist is refused as too costly to match (about 0.1 s)
MAX_PAIRS = 20_000


class HostNames:
    """A cluster's node names, against which hostlist expressions are matched WITHOUT expanding them:
    the cost is that of the cluster's names and of reading the expression once, never that of the
    names an expression stands for (``n[1-99999999]`` costs what ``n[1-4]`` costs).

    - a plain name: one look-up;
    - an item with one bracket group (``pre[ranges]suf``, nearly every hostlist): the ranges of every
      such item with the same ``pre`` and ``suf`` are merged, then each name of the cluster that is
      ``pre`` + digits + ``suf`` is looked up in them (O(log ranges) each);
    - an item of several groups (``r[1-2]n[1-4]``) is expanded and looked up, or tried on each name
      that starts with its first literal, whichever is fewer; more than :data:`MAX_PAIRS` such tries
      in all is a ValueError (refused, not slow).

    >>> names = HostNames(["n1", "n2", "n3", "gpu01", "login"])
    >>> names.members("n[2-9999999],gpu[01-02]")
    (['n2', 'n3', 'gpu01'], ['n[2-9999999]', 'gpu[01-02]'])
    >>> names.members("n[1-3],login")
    (['n1', 'n2', 'n3', 'login'], [])
    """

    def __init__(self, names) -> None:
        self.names = list(dict.fromkeys(names))
        self.position = {name: i for i, name in enumerate(self.names)}
        self.sorted = sorted(self.names)
        self._split: dict[tuple[str, str], list[tuple[str, str]]] | None = None

    def _with_prefix(self, prefix: str) -> list[str]:
        low = bisect.bisect_left(self.sorted, prefix)
        high = bisect.bisect_left(self.sorted, prefix + "\U0010ffff")
        return self.sorted[low:high]

    def prepare(self) -> "HostNames":
        """Build the index of names by the digits in them now (else the first list of one bracket
        group builds it): the view does so when it is built, off the answering path."""
        self._splits()
        return self

    def _splits(self) -> dict[tuple[str, str], list[tuple[str, str]]]:
        """(pre, suf) -> [(digits, name)]: every way a name is ``pre`` + a run of digits + ``suf``
        (built once; a name of d digits has at most d(d+1)/2 such ways)."""
        if self._split is None:
            split: dict[tuple[str, str], list[tuple[str, str]]] = {}
            for name in self.names:
                for run in re.finditer(r"[0-9]+", name):
                    for i in range(run.start(), run.end()):
                        for j in range(i + 1, run.end() + 1):
                            split.setdefault((name[:i], name[j:]), []).append((name[i:j], name))
            self._split = split
        return self._split

    def members(self, text: str) -> tuple[list[str], list[str]]:
        """(the names of this cluster that ``text`` names, in the cluster's order; items of ``text``
        that name some host this cluster does not have).  Whether an item names others is counted,
        not listed: the names it gives (ranges of one width that overlap counted once) against the
        names it matched (ranges of several widths that give the same name, or items that overlap,
        may make that so needlessly).  The same ValueError as :func:`expand_hostlist` for an item it
        cannot read."""
        found: set[str] = set()
        outside: list[str] = []
        single: dict[tuple[str, str], list[tuple[str, str]]] = {}       # (pre, suf) -> [(item, ranges)]
        pairs = 0
        for item in dict.fromkeys(hostlist_items(text)):
            if "[" not in item and "]" not in item:
                if item in self.position:
                    found.add(item)
                else:
                    outside.append(item)
                continue
            parts = _parse_item(item)
            brackets = [p for p in parts if not isinstance(p, str)]
            if len(brackets) == 1:
                pre, _, rest = item.partition("[")
                ranges, _, suf = rest.partition("]")
                single.setdefault((pre, suf), []).append((item, ranges))
                continue
            prefix = parts[0] if isinstance(parts[0], str) else ""
            candidates = self._with_prefix(prefix)
            size = math.prod(b.size for b in brackets)
            pairs += min(size, len(candidates))
            if pairs > MAX_PAIRS:
                raise ValueError(f"hostlist {item!r}: too many items of several bracket groups to match "
                                 f"against {len(self.names)} nodes")
            if size <= len(candidates):
                named = set(expand_hostlist(item))
                matched = [name for name in named if name in self.position]
                size = len(named)
            else:
                matched = [name for name in candidates if _item_holds(parts, name)]
            found.update(matched)
            if size > len(matched):
                outside.append(item)
        splits = self._splits() if single else {}
        for (pre, suf), items in single.items():
            merged = _parse_bracket(",".join(ranges for _, ranges in items), items[0][0])
            matched = {name for digits, name in splits.get((pre, suf), ()) if merged.holds(digits)}
            found.update(matched)
            if merged.size > len(matched):
                outside.append(items[0][0])
        return sorted(found, key=self.position.__getitem__), outside


_NUMBER = re.compile(r"[0-9]+")   # ASCII digits only (str.isdigit takes "²", which int() does not read)
_DIGITS = 18               # Slurm reads a hostlist's numbers as unsigned longs (src/common/hostlist.c)


def _bracket_ranges(ranges: str, item: str) -> list[tuple[int, int, int]]:
    """(first, last, width) of each part of a bracket."""
    out = []
    for part in ranges.split(","):
        low, sep, high = part.strip().partition("-")
        if not _NUMBER.fullmatch(low) or (sep and not _NUMBER.fullmatch(high)):
            raise ValueError(f"hostlist {item!r}: {part!r} is not a number or a range N-M")
        if max(len(low), len(high)) > _DIGITS:
            raise ValueError(f"hostlist {item!r}: {part!r} has a number of more than {_DIGITS} digits")
        first, last = int(low), int(high) if sep else int(low)
        if last < first:
            raise ValueError(f"hostlist {item!r}: range {first}-{last} goes down")
        out.append((first, last, len(low)))
    return out

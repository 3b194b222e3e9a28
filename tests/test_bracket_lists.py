"""Slurm's comma lists with brackets (hostlists ``n[1-3,7],login``; GRES ``gpu:2(S:0,1),mps:1``) are
split and expanded in one pass: the same pieces as the look-ahead regexes they replace, and work that
grows linearly with the text (counted as the Python steps the parsers take, never timed), so that a
crafted megabyte field of a trace cannot stall a replay."""

from __future__ import annotations

import ast
import re
import sys

import pytest
from hypothesis import given, strategies as st

from greenslurm.clustermodel import brackets, gres
from greenslurm.clustermodel.brackets import split_outside
from greenslurm.clustermodel.gres import parse_gres, split_items
from greenslurm.traces import slurm_hostlist
from greenslurm.traces.slurm_hostlist import HostNames, expand_hostlist

# the regexes the splitter replaces (quadratic: the look-ahead rescans the rest at every comma)
OLD_HOSTLIST_SPLIT = re.compile(r",(?![^\[]*\])")
OLD_GRES_SPLIT = re.compile(r",(?![^(]*\))")


@given(st.text(",[]()ab ", max_size=30))
def test_the_split_is_the_old_look_ahead_split_on_any_text(text):
    assert split_outside(text, "[", "]") == OLD_HOSTLIST_SPLIT.split(text)
    assert split_outside(text, "(", ")") == OLD_GRES_SPLIT.split(text)
    assert split_items(text) == [item.strip() for item in OLD_GRES_SPLIT.split(text) if item.strip()]


_range = st.tuples(st.integers(0, 30), st.integers(0, 5), st.integers(1, 3))      # first, extra, width
_item = st.tuples(st.sampled_from(["n", "gpu", "r1b", ""]), st.lists(_range, min_size=0, max_size=3),
                  st.sampled_from(["", "-ib", "x"]), st.booleans())


def _written(item) -> tuple[str, list[str]]:
    """A hostlist item and its names, written out by hand: prefix[ranges]suffix, and a second bracket
    [1-2] after it when ``twice``."""
    prefix, ranges, suffix, twice = item
    if not ranges:
        name = prefix + suffix or "login"
        return name, [name]
    text = prefix + "[" + ",".join(f"{a:0{w}d}-{a + n:0{w}d}" if n else f"{a:0{w}d}" for a, n, w in ranges) + "]" + suffix
    names = [prefix + f"{i:0{w}d}" + suffix for a, n, w in ranges for i in range(a, a + n + 1)]
    if twice:
        text += "[1-2]"
        names = [name + tail for name in names for tail in ("1", "2")]
    return text, names


@given(st.lists(_item, max_size=5))
def test_a_hostlist_expands_to_the_names_it_writes(items):
    written = [_written(item) for item in items]
    text = ",".join(t for t, _ in written)
    expected = [name for _, names in written for name in names]
    assert expand_hostlist(text) == expected
    known = HostNames(sorted(set(expected)) + ["other"])
    assert sorted(known.members(text)[0]) == sorted(set(expected))


@pytest.mark.parametrize("text, error", [
    ("n[1-2" + ",1" * 10, "unbalanced brackets"),
    ("n[" + "1" * 19 + "]", "has a number of more than 18 digits"),
    ("n[\u00b2]", "is not a number or a range N-M"),                  # "²" is a digit to str.isdigit
    ("a" * 100 + "[1-999999]", "names more than 64,000,000 characters"),   # 999,999 names of 106 characters
    ("r[0-99999]b[0-99999]", "names more than 1,000,000 hosts"),
])
def test_crafted_hostlists_are_one_error_naming_the_item(text, error):
    with pytest.raises(ValueError, match=re.escape(error)):
        expand_hostlist(text)


def test_a_hostlist_of_exactly_the_character_budget_expands():
    # 100,000 names n000000..n099999 of 7 characters: 700,000 characters, within 64 a host of the limit
    assert len(expand_hostlist("n[000000-099999]")) == 100_000
    # a limit of 10 hosts allows 640 characters: 10 names of 64 pass, 10 of 65 do not
    assert len(expand_hostlist("a" * 63 + "[0-9]", limit=10)) == 10
    with pytest.raises(ValueError, match="names more than 640 characters"):
        expand_hostlist("a" * 64 + "[0-9]", limit=10)


def test_a_gres_count_of_a_megabyte_of_digits_is_too_large_not_a_crash():
    with pytest.raises(ValueError, match="larger than Slurm can hold"):
        parse_gres("gpu:" + "9" * 1_000_000)
    assert parse_gres("gpu:" + "0" * 1_000_000 + "2").gpus == 2        # leading zeros: 2
    assert parse_gres("gpu:9223372036854775807").gpus == 2 ** 63 - 1     # the largest count Slurm holds


def _steps(parse, text) -> int:
    """Python lines run in the parsing modules while ``parse(text)`` runs."""
    files = {brackets.__file__, gres.__file__, slurm_hostlist.__file__}
    count = 0

    def local(frame, event, arg):
        nonlocal count
        count += event == "line"
        return local

    def calls(frame, event, arg):
        return local if frame.f_code.co_filename in files else None

    sys.settrace(calls)
    try:
        parse(text)
    except ValueError:
        pass
    finally:
        sys.settrace(None)
    return count


def _members(text):
    return HostNames([f"n{i}" for i in range(50)]).members(text)


CRAFTED = [                       # (parser, a crafted field of about n characters)
    (expand_hostlist, lambda n: "a," * (n // 2)),               # a run of commas: the old split's worst case
    (expand_hostlist, lambda n: "[1]," * (n // 4)),
    (expand_hostlist, lambda n: "n[1]" * (n // 4)),             # one name of n/4 brackets
    (expand_hostlist, lambda n: "n[" + "1," * (n // 2) + "1]"),
    (expand_hostlist, lambda n: "]" + "," * n),
    (_members, lambda n: "n[1]" * (n // 4)),
    (_members, lambda n: "a," * (n // 2)),
    (split_outside, lambda n: "," * n + "]"),
    (parse_gres, lambda n: "," * n + ")"),
    (parse_gres, lambda n: "gpu:1(S:0,1)," * (n // 13)),
    (parse_gres, lambda n: "gpu:" + "1" * n),
]


@pytest.mark.parametrize("parse, crafted", CRAFTED, ids=range(len(CRAFTED)))
def test_crafted_fields_take_steps_linear_in_their_length(parse, crafted):
    if parse is split_outside:
        parse = lambda text: split_outside(text, "[", "]")       # noqa: E731
    small, large = _steps(parse, crafted(20_000)), _steps(parse, crafted(40_000))
    # twice the text: at most twice the steps (+ a few for the fixed work); a quadratic parser takes 4x
    assert large <= 2 * small + 50, (small, large)


@pytest.mark.parametrize("parse, crafted", CRAFTED, ids=range(len(CRAFTED)))
def test_a_crafted_megabyte_field_parses(parse, crafted):
    text = crafted(1_000_000)
    if parse is split_outside:
        assert len(split_outside(text, "[", "]")) == 1             # the "]" closes every comma before it
        return
    try:
        parse(text)
    except ValueError as error:       # a crafted field may be refused, as one line naming it
        assert "\n" not in str(error).replace(text, "")


@pytest.mark.parametrize("module", [brackets, gres, slurm_hostlist])
def test_the_parsers_regexes_never_look_around(module):
    """The step count above sees Python's steps, not the regex engine's: the engine's work stays
    linear because no pattern of these modules looks ahead or behind (the old splits' ``(?!...)``
    rescanned the rest of the text at every comma)."""
    tree = ast.parse(open(module.__file__).read())
    docstrings = {id(node.value) for node in ast.walk(tree) if isinstance(node, ast.Expr)}
    strings = [node.value for node in ast.walk(tree)
               if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings]
    assert strings and not [s for s in strings if re.search(r"\(\?<?[=!]", s)]

"""The examples in the docstrings of the acceptance and allocation modules of seed 003 (these packages
are not in pytest's default doctest paths)."""

import doctest
import importlib

import pytest

MODULES = ["acceptance.base", "acceptance.policies", "acceptance.registry", "acceptance.admission",
           "allocation.windows", "allocation.budget", "allocation.placement", "allocation.planner",
           "allocation.coreplan"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    failed, _ = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert failed == 0

"""The examples in every docstring of the greenslurm namespace (``>>>`` lines), one test per module.

Run through ``doctest`` on the installed namespace rather than pytest's ``--doctest-modules`` on the
folders, so that each module is imported once, under its one name (``greenslurm.sim.engine.replay``).
"""

import doctest
import importlib
import importlib.machinery
import importlib.util
import pkgutil

import pytest

import greenslurm

# Modules that need optional extras to import (pyslurm: only on a site whose Slurm matches it).
OPTIONAL = {"greenslurm.slurm_plugin.pyslurm_backend"}


LAYERS = ("clustermodel", "traces", "sim", "acceptance", "allocation", "slurm_plugin")


def _modules() -> list[str]:
    """Every module of the namespace.  The layers are walked one by one: an editable install maps
    them from their own folders, which a walk of ``greenslurm.__path__`` alone would not see."""
    names = ["greenslurm"]
    packages = [("greenslurm", greenslurm.__path__)]
    packages += [(f"greenslurm.{layer}", importlib.import_module(f"greenslurm.{layer}").__path__) for layer in LAYERS]
    for package, path in packages:
        names.append(package)
        for info in pkgutil.walk_packages(path, package + "."):
            if info.name not in OPTIONAL and not info.name.endswith("__main__") and not _compiled(info.name):
                names.append(info.name)
    return sorted(set(names))


def _compiled(name: str) -> bool:
    """A compiled library loaded with ctypes (the replay's pool core), not a Python module."""
    origin = importlib.util.find_spec(name).origin or ""
    return origin.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))


MODULES = _modules()


def test_the_walk_sees_every_layer():
    tops = {name.split(".")[1] for name in MODULES if "." in name}
    assert {"clustermodel", "traces", "sim", "acceptance", "allocation", "slurm_plugin", "cli"} <= tops


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    failed, _ = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert failed == 0

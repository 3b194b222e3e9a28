"""greenslurm: Slurm-compatible scheduling policies and a trace-driven replay for less energy, less
GPU fragmentation and greener power.

The ``greenslurm`` command (:mod:`greenslurm.cli`) is the entry point; ``greenslurm/data`` holds a
small real trace and a cluster description for ``greenslurm demo``.  In a notebook,
``greenslurm.replay``, ``greenslurm.compare`` and ``greenslurm.whatif`` (:mod:`greenslurm.api`) give
DataFrames and the summary dict; they load on first use, so that ``import greenslurm`` and the
command stay quick (no pandas or numpy at import).
"""

__version__ = "0.1.0"

# name -> (module, attribute): what ``greenslurm.NAME`` loads on first use
_LAZY = {
    "replay": ("greenslurm.api", "replay"),
    "compare": ("greenslurm.api", "compare"),
    "whatif": ("greenslurm.api", "whatif"),
    "Result": ("greenslurm.api", "Result"),
    "Scenario": ("greenslurm.scenario", "Scenario"),
    "InputError": ("greenslurm.clustermodel.errors", "InputError"),
}
__all__ = ["__version__", *_LAZY]


def __getattr__(name: str):
    if name not in _LAZY:
        # also how ``from greenslurm import cmd_x`` finds a submodule: the import system then imports it
        raise AttributeError(f"module 'greenslurm' has no attribute {name!r}")
    import importlib
    module, attribute = _LAZY[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value          # loaded once
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})

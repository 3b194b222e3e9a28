"""The ``greenslurm`` command and ``python -m greenslurm``: the process's settings, then the command line
(:func:`greenslurm.cli.main`, which tests and notebooks call in their own process)."""

import gc
import os
import sys


def run() -> int:
    """Set what only a whole process may set, before anything loads, then run the command line."""
    # One BLAS thread unless the user says otherwise: no sum of greenslurm's goes through BLAS (results do
    # not depend on it), and OpenBLAS's default, a thread per core started when numpy loads, costs a
    # tenth of a second of CPU in every process.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # The cyclic collector's young generation collected after 50,000 new objects instead of 700: starting
    # a command creates some 40,000 (modules, classes, the parser), all kept, which the default threshold
    # traversed in some fifty collections (6 % of a small replay); a long replay collects as before, in
    # bigger steps (its garbage is freed by reference counting: it makes few cycles).
    gc.set_threshold(50_000, *gc.get_threshold()[1:])
    from greenslurm.cli import main
    return main()


if __name__ == "__main__":
    sys.exit(run())

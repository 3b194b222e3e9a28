"""Run as a program: ``python pyslurm_snapshot.py SLURM_CONF OUT`` writes the pyslurm backend's
``snapshot()`` of the cluster of SLURM_CONF to OUT (a pickle), or with ``--annotate JOB COMMENT``
writes that comment through the backend.

A program of its own because ``import pyslurm`` reads the Slurm configuration once per process (a
test process meets many clusters) and ends the process when it finds none.
"""

from __future__ import annotations

import pickle
import sys


def main(argv: list[str]) -> int:
    from greenslurm.slurm_plugin.backend import PyslurmBackend
    backend = PyslurmBackend(argv[0])
    if argv[1] == "--annotate":
        backend.annotate(argv[2], argv[3])
        return 0
    with open(argv[1], "wb") as out:
        pickle.dump(backend.snapshot(), out)
    return 0


if __name__ == "__main__":
    sys.exit(main([a for a in sys.argv[1:]]))

"""greenslurm: Slurm-compatible scheduling policies and a trace-driven replay for less energy, less
GPU fragmentation and greener power.

The ``greenslurm`` command (:mod:`greenslurm.cli`) is the entry point; ``greenslurm/data`` holds a
small real trace and a cluster description for ``greenslurm demo``.
"""

__version__ = "0.1.0"

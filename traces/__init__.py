"""greenslurm: traces layer."""

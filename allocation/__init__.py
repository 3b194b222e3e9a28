"""greenslurm: allocation layer."""

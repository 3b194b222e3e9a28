"""greenslurm: greenslurm layer."""

"""greenslurm: acceptance layer."""

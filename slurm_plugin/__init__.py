"""greenslurm: slurm_plugin layer."""

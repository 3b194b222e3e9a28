"""Machine models: cluster state (CPUs, memory, GPUs and GPU shares), power states, co-location."""

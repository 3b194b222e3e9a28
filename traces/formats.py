"""The trace formats the readers know, by the name ``--format`` takes, with a line of description.

A module of its own (no reader, no numpy) so that the command line's help and choices name the
formats without loading the readers.
"""

FORMATS: dict[str, str] = {
    "swf": "Standard Workload Format (Parallel Workloads Archive), 18 numbers a line",
    "sacct": "sacct --parsable2 export, '|'-separated, with or without header",
    "sacct-json": "sacct --json output ({\"jobs\": [...]}, Slurm 22.05 and later)",
    "alibaba": "Alibaba GPU trace 2023 (openb) pod list CSV",
}

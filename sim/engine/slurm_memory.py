"""What a job's memory means to Slurm 22.05, read back from a sacct export.

A job submitted without ``--mem`` or ``--mem-per-cpu`` on a site with no ``DefMemPerCPU`` /
``DefMemPerNode`` has ``pn_min_memory`` 0 (``_validate_job_desc`` in src/slurmctld/job_mgr.c), yet
sacct shows a memory request for it: ``job_get_tres_mem`` (job_mgr.c) counts a request of 0 as
the RealMemory of the *first node of the job's partition* (``_mem_per_node_part``: the partition's
lowest node index) times the node count asked.  A sacct reader cannot tell that from a job that
asked for this much; with the site's slurm.conf it can, and what a request of 0 does depends on
SelectTypeParameters:

* memory consumable (``CR_*_Memory``): the job may use only nodes with no memory allocated to any
  job (select/cons_common ``_verify_node_state``: "allocated memory = ... and all memory
  requested") and holds each node's whole memory (``_job_test``: "Allocate all node memory");
* memory not consumable (``CR_Core``, ``CR_CPU``): nothing: no node is filtered by memory.

A job that did ask ``--mem=M`` keeps M per node: under ``CR_*_Memory`` a node is used only if M of
its memory is free (``_verify_node_state``, ``can_job_run_on_node``) and each node it gets holds
M; otherwise only nodes whose RealMemory is at least M may run it (``_build_node_list`` in
node_scheduler.c filters node configurations by ``pn_min_memory`` whatever the select plugin's
parameters).

The rule read here (:func:`asked_no_memory`): a request given per node or for the whole job
(ReqMem ``Mn`` or a plain size, not per CPU), whose per-node value is exactly the first partition
node's RealMemory, on a site without a default memory, is read as "no memory asked".  A job that
really asked ``--mem`` equal to that node's whole memory is read the same way; the two differ only
on a partition whose nodes have different memory sizes.

>>> from greenslurm.clustermodel import JobSpec
>>> job = JobSpec("a", 0.0, 60.0, cpus=2, memory_mb_per_node=4000.0, partition="p",
...               extra={"memory_scope": "job"})
>>> asked_no_memory(job, {"p": 4000.0}, "p"), asked_no_memory(job, {"p": 2000.0}, "p")
(True, False)
>>> read_memory_as_slurm([job], {"p": 4000.0}, "p")[0].memory_mb_per_node, \\
...     whole_node_memory(read_memory_as_slurm([job], {"p": 4000.0}, "p")[0])
(0.0, True)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from greenslurm.clustermodel.eligibility import job_partitions
from greenslurm.clustermodel.job import JobSpec

# JobSpec.extra key: the job asked no memory (Slurm's pn_min_memory 0)
WHOLE_NODE = "memory_whole_node"
# JobSpec.extra key set by the sacct reader: how ReqMem was given (node, job, cpu, cpu-flag, tres)
SCOPE = "memory_scope"
# ReqMem scopes whose per-node value may be Slurm's stand-in for "no memory asked"
_PER_NODE_SCOPES = ("node", "job", "tres")


def first_node_memory(conf) -> dict[str, float]:
    """Per partition of a parsed slurm.conf: the RealMemory (MiB) of its first node in Slurm's node
    order (the order of the NodeName lines), what ``_mem_per_node_part`` gives.

    >>> from greenslurm.traces.slurm_conf import parse_slurm_conf_text
    >>> conf = parse_slurm_conf_text("NodeName=big CPUs=4 RealMemory=4000\\nNodeName=small CPUs=2 RealMemory=2000\\n"
    ...                              "PartitionName=all Nodes=small,big\\nPartitionName=s Nodes=small\\n")
    >>> first_node_memory(conf)
    {'all': 4000.0, 's': 2000.0}
    """
    order = {node.name: i for i, node in enumerate(conf.nodes)}
    found = {}
    for partition in conf.partitions:
        known = [name for name in partition.nodes if name in order]
        if known:
            found[partition.name] = float(conf.nodes[min(order[name] for name in known)].real_memory_mb)
    return found


def has_default_memory(conf) -> bool:
    """Whether slurm.conf gives jobs a default memory (DefMemPerCPU or DefMemPerNode): then a job
    without ``--mem`` has that, not 0, and its ReqMem is what it holds.  As Slurm 22.05 reads them
    (read_config.c): a DefMemPerNode given wins over DefMemPerCPU, and DefMemPerNode=0 is no default.

    >>> from greenslurm.traces.slurm_conf import parse_slurm_conf_text
    >>> [has_default_memory(parse_slurm_conf_text(text)) for text in
    ...  ("DefMemPerNode=0\\n", "DefMemPerNode=0\\nDefMemPerCPU=100\\n", "DefMemPerCPU=100\\n", "")]
    [False, False, True, False]
    """
    per_node = (conf.get("DefMemPerNode") or "").strip()
    if per_node:
        return not (per_node.isdigit() and int(per_node) == 0)
    return bool(conf.get("DefMemPerCPU"))


def asked_no_memory(job: JobSpec, first_memory: dict[str, float], default_partition: str | None) -> bool:
    """Whether ``job``'s memory, as a sacct reader found it, is Slurm's stand-in for no request:
    per node (or for the whole job), exactly the first node's RealMemory of its (first) partition."""
    extra = job.extra
    if not extra or extra.get(SCOPE) not in _PER_NODE_SCOPES or job.memory_mb_per_node <= 0:
        return False
    names = job_partitions(job.partition) or ((default_partition,) if default_partition else ())
    return bool(names) and first_memory.get(names[0]) == job.memory_mb_per_node


def whole_node_memory(job: JobSpec) -> bool:
    """Whether ``job`` asked no memory (see :func:`read_memory_as_slurm`)."""
    return bool(job.extra) and bool(job.extra.get(WHOLE_NODE))


def count_asked_no_memory(jobs: Sequence[JobSpec]) -> int:
    """How many of ``jobs`` :func:`read_memory_as_slurm` read as asking no memory (the replay's
    summary counts them: ``memory_asked_none``)."""
    return sum(1 for job in jobs if whole_node_memory(job))


def read_memory_as_slurm(jobs: Sequence[JobSpec], first_memory: dict[str, float],
                         default_partition: str | None) -> list[JobSpec]:
    """``jobs`` with every job that asked no memory (:func:`asked_no_memory`) given memory 0 and
    marked (:data:`WHOLE_NODE`): the Slurm queue then places it as Slurm does.  Others unchanged."""
    out = []
    for job in jobs:
        if asked_no_memory(job, first_memory, default_partition):
            job = dataclasses.replace(job, memory_mb_per_node=0.0, extra={**job.extra, WHOLE_NODE: True})
        out.append(job)
    return out

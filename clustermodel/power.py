"""Pure power and energy functions.  Watts in, watts or joules out; no state.

The node model is linear in the allocated share of CPUs, and per GPU binary (a GPU with any
allocation draws its maximum, otherwise its idle power), as in the PWR paper (Eq. 1-3)
at GPU granularity.  Because power is constant between scheduler events, energy is exactly the
sum of power times the length of each interval.
"""

from __future__ import annotations

from greenslurm.clustermodel.errors import InputError
from greenslurm.clustermodel.node import DEFAULT_NODE_BUSY_W, DEFAULT_NODE_IDLE_W

# No node draws a megawatt (a DGX H100 draws 10.2 kW at most): a figure above it is a typo or a unit
# mistake (mW for W), and it made energies overflow to inf.
MAX_NODE_W = 1_000_000.0


def node_power_problem(idle_w: float, busy_w: float, gpu_idle_w: float = 0.0,
                       gpu_max_w: float = 0.0) -> tuple[str, str] | None:
    """(field, what is wrong) when a node's power figures cannot be physical, else None: each must
    be a finite number of watts in [0, 1 MW], and a node cannot draw less busy than idle.

    >>> node_power_problem(100.0, 200.0) is None
    True
    >>> node_power_problem(500.0, 200.0)
    ('busy_w', 'busy power 200 W is below idle power 500 W')
    >>> node_power_problem(-1.0, 200.0)
    ('idle_w', 'must be a finite number of watts in [0, 1e+06], not -1')
    """
    for name, value in (("idle_w", idle_w), ("busy_w", busy_w), ("gpu_idle_w", gpu_idle_w), ("gpu_max_w", gpu_max_w)):
        if not 0 <= value <= MAX_NODE_W:        # also refuses nan
            return name, f"must be a finite number of watts in [0, {MAX_NODE_W:g}], not {value:g}"
    if busy_w < idle_w:
        return "busy_w", f"busy power {busy_w:g} W is below idle power {idle_w:g} W"
    if gpu_max_w < gpu_idle_w:
        return "gpu_max_w", f"GPU busy power {gpu_max_w:g} W is below GPU idle power {gpu_idle_w:g} W"
    return None


def check_given_power(power: dict) -> None:
    """The node power a caller gives a cluster read from Slurm (which knows none): ``idle_w`` and
    ``busy_w`` (either may be missing: the node default), refused in one line when not physical."""
    problem = node_power_problem(power.get("idle_w", DEFAULT_NODE_IDLE_W), power.get("busy_w", DEFAULT_NODE_BUSY_W))
    if problem is not None:
        raise InputError(f"node power: {problem[1]}", path="<command line>", field=problem[0])


def cpu_power_w(idle_w: float, busy_w: float, allocated_cpus: float, total_cpus: float) -> float:
    """Power of a node's CPUs with ``allocated_cpus`` of ``total_cpus`` busy (linear model).

    >>> cpu_power_w(100.0, 300.0, 8, 16)     # 100 + (300 - 100) * 8/16
    200.0
    >>> cpu_power_w(100.0, 300.0, 0, 16)
    100.0
    """
    if total_cpus <= 0:
        return idle_w
    return idle_w + (busy_w - idle_w) * (allocated_cpus / total_cpus)


def gpu_power_w(idle_w: float, max_w: float, busy_gpus: int, total_gpus: int) -> float:
    """Power of a node's GPUs when ``busy_gpus`` of them carry any allocation.

    >>> gpu_power_w(30.0, 300.0, 2, 8)       # 2 * 300 + 6 * 30
    780.0
    """
    return max_w * busy_gpus + idle_w * (total_gpus - busy_gpus)


def job_share_power_w(busy_w: float, cpus_used: float, node_cpus: float,
                      gpu_max_w: float = 0.0, gpus_used: float = 0.0) -> float:
    """Power attributed to a job on one node: its share of the node's busy CPU power plus its GPUs.

    With the linear model, node power = idle + (busy - idle) * a/C = busy * a/C + idle * (C - a)/C,
    so giving each job ``busy * c_j / C`` and the unallocated capacity ``idle * (C - a) / C`` splits
    the node's power exactly.

    >>> job_share_power_w(300.0, 4, 16)      # 300 * 4/16
    75.0
    >>> job_share_power_w(300.0, 4, 16, gpu_max_w=250.0, gpus_used=2)
    575.0
    """
    share = busy_w * (cpus_used / node_cpus) if node_cpus > 0 else 0.0
    return share + gpu_max_w * gpus_used


def energy_j(power_w: float, duration_s: float) -> float:
    """Energy of a constant power over an interval.

    >>> energy_j(1000.0, 3600.0) / 3.6e6      # 1 kW for 1 h = 1 kWh
    1.0
    """
    return power_w * duration_s


def joules_to_kwh(energy_j_value: float) -> float:
    """Joules to kilowatt-hours.

    >>> joules_to_kwh(7.2e6)
    2.0
    """
    return energy_j_value / 3.6e6

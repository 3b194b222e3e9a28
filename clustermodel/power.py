"""Pure power and energy functions.  Watts in, watts or joules out; no state.

The node model is linear in the allocated share of CPUs, and per GPU binary (a GPU with any
allocation draws its maximum, otherwise its idle power), as in the PWR paper (Eq. 1-3)
at GPU granularity.  Because power is constant between scheduler events, energy is exactly the
sum of power times the length of each interval.
"""

from __future__ import annotations

import numpy as np


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


def unallocated_power_w(idle_w: np.ndarray, allocated_cpus: np.ndarray, node_cpus: np.ndarray,
                        gpu_idle_w: np.ndarray, free_gpus: np.ndarray) -> np.ndarray:
    """Per node power of what no job holds: ``idle * (C - a) / C`` plus idle power of free GPUs.

    >>> unallocated_power_w(np.array([100.0]), np.array([4.0]), np.array([16.0]),
    ...                     np.array([30.0]), np.array([1.0]))
    array([105.])
    """
    safe_cpus = np.where(node_cpus > 0, node_cpus, 1.0)
    cpu_part = np.where(node_cpus > 0, idle_w * (node_cpus - allocated_cpus) / safe_cpus, idle_w)
    return cpu_part + gpu_idle_w * free_gpus


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

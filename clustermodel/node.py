"""A compute node: its capacity and its power profile."""

from __future__ import annotations

from dataclasses import dataclass

# GPU idle and maximum power in watts per model (PWR paper, Table of GPU models).
GPU_POWER_W: dict[str, tuple[float, float]] = {
    "V100M16": (30.0, 300.0),
    "V100M32": (30.0, 300.0),
    "P100": (25.0, 250.0),
    "T4": (10.0, 70.0),
    "A10": (30.0, 150.0),
    "G2": (30.0, 150.0),
    "G3": (50.0, 400.0),
}
# A GPU of unknown model: a mid-range data-centre card.
DEFAULT_GPU_POWER_W = (30.0, 300.0)


def unknown_gpu_model(model, power_given: bool) -> str | None:
    """Why a node's GPU model cannot be used, or None: a model the power table does not know is refused
    unless the node gives its GPUs' power (``gpu_idle_w`` and ``gpu_max_w``), never given a made-up one.

    >>> unknown_gpu_model("T4", False), unknown_gpu_model("K80", True), unknown_gpu_model(None, False)
    (None, None, None)
    >>> unknown_gpu_model("H100-UNKNOWN", False)
    "GPU model 'H100-UNKNOWN' is not one whose power is known (V100M16, V100M32, P100, T4, A10, G2, G3); give gpu_idle_w and gpu_max_w for it"
    """
    if model is None or power_given:
        return None
    if not isinstance(model, str):
        return f"must be a GPU model's name, not {model!r}"
    if model in GPU_POWER_W:
        return None
    return (f"GPU model {model!r} is not one whose power is known ({', '.join(GPU_POWER_W)}); give gpu_idle_w and "
            f"gpu_max_w for it")


# A CPU-only HPC node when nothing else is said: two sockets, 100 W idle, 350 W fully busy.
DEFAULT_NODE_IDLE_W = 100.0
DEFAULT_NODE_BUSY_W = 350.0


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One node.  ``idle_w``/``busy_w`` are the node's power without GPUs, with no CPU and with every
    CPU allocated; each GPU adds ``gpu_idle_w`` when free and ``gpu_max_w`` when allocated.

    >>> n = NodeSpec("n1", cpus=32, gpus=4, gpu_model="T4")
    >>> n.gpu_idle_w, n.gpu_max_w
    (10.0, 70.0)
    >>> n.idle_power_w        # 100 W node + 4 idle T4 at 10 W
    140.0
    """

    name: str
    cpus: int
    memory_mb: float = 0.0
    gpus: int = 0
    gpu_model: str | None = None
    cpu_model: str | None = None
    idle_w: float = DEFAULT_NODE_IDLE_W
    busy_w: float = DEFAULT_NODE_BUSY_W
    gpu_idle_w: float = -1.0
    gpu_max_w: float = -1.0
    node_type: str = "default"
    # Slurm partitions the node belongs to and its features (``--constraint`` matches them); () when
    # not described: a job's partition or constraint then does not restrict it (see
    # :mod:`greenslurm.clustermodel.eligibility`).
    partitions: tuple[str, ...] = ()
    features: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.gpu_idle_w < 0 or self.gpu_max_w < 0:
            idle, peak = GPU_POWER_W.get(self.gpu_model or "", DEFAULT_GPU_POWER_W)
            if self.gpu_idle_w < 0:
                object.__setattr__(self, "gpu_idle_w", idle)
            if self.gpu_max_w < 0:
                object.__setattr__(self, "gpu_max_w", peak)

    @property
    def idle_power_w(self) -> float:
        return self.idle_w + self.gpu_idle_w * self.gpus

    @property
    def max_power_w(self) -> float:
        return self.busy_w + self.gpu_max_w * self.gpus

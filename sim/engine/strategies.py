"""The one place queue strategies are registered: name -> class.

Strategies live in their own modules (``greenslurm.sim.engine.queues``: FCFS, EASY, conservative and
place-or-fail; ``greenslurm.sim.engine.deadline_queue``: deadline-aware admission of Nileshwar &
Schwiegelshohn; ``greenslurm.sim.engine.slurm_queue``: Slurm's priorities and backfill) and know nothing
of this registry, so imports point one way.  A strategy's module loads when the strategy is looked up
(a replay under EASY loads neither the deadline queue nor Slurm's model); its names are known before.

>>> list(QUEUES)
['fcfs', 'easy', 'conservative', 'deadline', 'none', 'slurm']
>>> QUEUES["easy"].name
'easy'
>>> class Sjf:                                     # a plug-in's strategy, registered by assignment
...     name = "sjf"
>>> queues = LazyRegistry({"easy": "greenslurm.sim.engine.queues:Easy"})
>>> queues["sjf"] = Sjf
>>> queues["sjf"] is Sjf, list(queues)
(True, ['easy', 'sjf'])
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:                  # the queues' interface; the module itself loads on first use
    from greenslurm.sim.engine.queues import QueueStrategy


class LazyRegistry(Mapping):
    """name -> class, each class imported from ``"module:Class"`` when first looked up."""

    def __init__(self, places: dict[str, str]) -> None:
        self._places = places
        self._loaded: dict[str, type] = {}

    def __getitem__(self, name: str) -> type:
        try:
            return self._loaded[name]
        except KeyError:
            module, _, attribute = self._places[name].partition(":")    # KeyError: not registered
            cls = self._loaded[name] = getattr(importlib.import_module(module), attribute)
            return cls

    def __setitem__(self, name: str, cls: type) -> None:
        """Register a strategy class under ``name`` (a plug-in's own, already imported)."""
        self._places[name] = f"{cls.__module__}:{cls.__qualname__}"
        self._loaded[name] = cls

    def __iter__(self) -> Iterator[str]:
        return iter(self._places)

    def __len__(self) -> int:
        return len(self._places)

    def __contains__(self, name: object) -> bool:
        return name in self._places


# each a class whose instances are a QueueStrategy (submit, job_ended, schedule, next_wake_s, waiting)
QUEUES: Mapping[str, type[QueueStrategy]] = LazyRegistry({
    "fcfs": "greenslurm.sim.engine.queues:Fcfs",
    "easy": "greenslurm.sim.engine.queues:Easy",
    "conservative": "greenslurm.sim.engine.queues:Conservative",
    "deadline": "greenslurm.sim.engine.deadline_queue:DeadlineQueue",
    "none": "greenslurm.sim.engine.queues:PlaceOrFail",
    "slurm": "greenslurm.sim.engine.slurm_queue:SlurmQueue",
})

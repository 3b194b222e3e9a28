"""The one place queue strategies are registered: name -> class.

Strategies live in their own modules (``sim.queues``: FCFS, EASY, conservative; ``sim.deadline_queue``:
deadline-aware admission of seed 003) and know nothing of this registry, so imports point one way.
"""

from sim.deadline_queue import DeadlineQueue
from sim.queues import Conservative, Easy, Fcfs

QUEUES: dict[str, type] = {strategy.name: strategy for strategy in (Fcfs, Easy, Conservative, DeadlineQueue)}

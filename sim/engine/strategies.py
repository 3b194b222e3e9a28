"""The one place queue strategies are registered: name -> class.

Strategies live in their own modules (``greenslurm.sim.engine.queues``: FCFS, EASY, conservative; ``greenslurm.sim.engine.deadline_queue``:
deadline-aware admission of Nileshwar & Schwiegelshohn) and know nothing of this registry, so imports point one way.
"""

from greenslurm.sim.engine.deadline_queue import DeadlineQueue
from greenslurm.sim.engine.queues import Conservative, Easy, Fcfs, PlaceOrFail
from greenslurm.sim.engine.slurm_queue import SlurmQueue

QUEUES: dict[str, type] = {strategy.name: strategy for strategy in (Fcfs, Easy, Conservative, DeadlineQueue, PlaceOrFail, SlurmQueue)}

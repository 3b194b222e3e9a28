"""Decisions at submission in front of a replay's queue: the part a host plugs in (the live hook's
service, :class:`greenslurm.slurm_plugin.admission.HookAdmission`), as Slurm's job_submit chain sits
in front of Slurm's scheduler: a rejection is final and its reason reaches the user; an accepted job
may come back pinned to nodes or with a begin time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, Sequence


@dataclass(frozen=True)
class Admitted:
    """The answer for one job: ``accepted``; if not, ``policy`` and ``reason`` (short and stable:
    rejections are counted by them) and ``message`` (what the user reads); if pinned, the node
    indices; if moved later, the begin time."""

    accepted: bool
    policy: str = ""
    reason: str = ""
    message: str = ""
    pinned: tuple[int, ...] = ()
    begin_s: float | None = None


class Admission(Protocol):
    name: str

    def decide(self, spec, now_s: float, running: Sequence, waiting: Sequence) -> Admitted:
        """The answer for ``spec`` submitted at ``now_s``; ``running``: the replay's running jobs;
        ``waiting``: its queued ones (each with ``begin_s`` and ``pinned``)."""
        ...

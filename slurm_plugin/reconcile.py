"""Reconciliation's rules: which pending jobs with a deadline a decision of the record already
covers, and the reason appended to the comment of one it acts on.

A job is covered only if its comment carries a tag (``greenslurm#ID.TOKEN``) that the record
issued, to the same user, not claimed by another job (the lowest job id wins a tag several jobs
carry), for the same submission and a deadline no later than the one Slurm now holds.  Any other
pending job with a deadline is checked on the view by the service
(:meth:`greenslurm.slurm_plugin.decisions.DecisionService.to_reconcile`).
"""

from __future__ import annotations

import secrets

from greenslurm.clustermodel.gres import GPUS_TOTAL_KEY as GPUS_TOTAL
from greenslurm.slurm_plugin.record import DecisionRecord
from greenslurm.slurm_plugin.slurm_json import TAG_PATTERN, PendingDeadline
from greenslurm.slurm_plugin.snapshot import job_order

TAGS_PER_COMMENT = 4         # only the last few tags of a comment are looked up
TAG_CLOCK_SLACK_S = 5.0      # a decision and its job's Slurm submit time are this close (same host's clock)


def covered_jobs(record: DecisionRecord, deadlines: list[PendingDeadline]) -> set[str]:
    """Pending jobs whose deadline a decision of ``record`` already covers (see the module text).

    A tag counts only if the record issued it (id and token), to the job's user, and no other job
    claimed it first (the lowest job id wins a tag several jobs carry); a tag first claimed here is
    recorded as its job's."""
    tags: dict[str, list[tuple[int, str]]] = {}
    for item in deadlines:
        # the hook appends its tag last; tags a user piled up before it cost lookups and cover nothing
        found = [(int(i), t) for i, t in TAG_PATTERN.findall(item.comment or "")][-TAGS_PER_COMMENT:]
        if found:
            tags[item.job_id] = found
    records = record.tagged(sorted({i for found in tags.values() for i, _ in found}))
    claimed = {r["id"]: r["job_id"] for r in records.values() if r["job_id"] is not None}
    checked: set[str] = set()
    for item in sorted(deadlines, key=lambda d: job_order(d.job_id)):
        for decision_id, token in tags.get(item.job_id, ()):
            rec = records.get(decision_id)
            if rec is None or not secrets.compare_digest(rec["token"], token):
                continue
            if not _same_user(rec, item) or claimed.get(decision_id, item.job_id) != item.job_id:
                continue
            if decision_id not in claimed:
                record.claim(decision_id, item.job_id)
                claimed[decision_id] = item.job_id
            # (no time limit, UNLIMITED, is more than any limit checked)
            covered = (rec["would_action"] in ("accept", "modify") and rec["deadline_s"] is not None
                       and item.deadline_s >= rec["deadline_s"] - 1.0
                       and (rec["time_limit_s"] is None
                            or (item.time_limit_s is not None and item.time_limit_s <= rec["time_limit_s"] + 1.0))
                       and _same_job(rec, item))
            if covered:
                checked.add(item.job_id)
            break
    return checked


def tag_decision(tag) -> int | None:
    """The decision id of a tag (``greenslurm#12.0123abcd``)."""
    found = TAG_PATTERN.fullmatch(tag) if isinstance(tag, str) else None
    return int(found.group(1)) if found else None


SLURM_MAX_COMMENT = 1024      # bytes; Slurm refuses a longer comment ("Pathname ... too long")


def reconcile_comment(comment: str, message: str, limit: int = SLURM_MAX_COMMENT) -> str:
    """The job's comment with reconciliation's reason appended, cut from the user's part so that it
    fits Slurm's limit (a comment Slurm refuses would leave the job without its reason).

    >>> reconcile_comment("", "held"), reconcile_comment("mine", "held")
    ('held', 'mine | held')
    >>> cut = reconcile_comment("x" * 1020, "greenslurm: cannot end by its deadline")
    >>> len(cut.encode()), cut.endswith(" | greenslurm: cannot end by its deadline")
    (1024, True)
    """
    if not comment:
        return message
    room = limit - len(message.encode("utf-8", "surrogateescape")) - 3
    kept = comment.encode("utf-8", "surrogateescape")[:max(room, 0)].decode("utf-8", "ignore")
    return f"{kept} | {message}" if kept else message


def _same_user(rec: dict, item: PendingDeadline) -> bool:
    uid = getattr(item, "uid", None)
    if uid is not None and rec.get("uid") is not None:
        return int(uid) == int(rec["uid"])
    return bool(item.user) and item.user == rec.get("user")


def _same_job(rec: dict, item: PendingDeadline) -> bool:
    """The decision was taken for this job's submission, and the job asks no more than was checked:
    Slurm stamps a job's submit time right after job_submit.lua's answer, so a tag issued minutes
    before it (of a job cancelled, or run, before any sync claimed it) is not this job's; and a
    user may raise the CPUs, tasks or nodes of a pending job after the check."""
    job = item.job
    if job.submit_s and not rec["time_s"] - TAG_CLOCK_SLACK_S <= job.submit_s <= rec["time_s"] + TAG_CLOCK_SLACK_S:
        return False
    planned = len([n for n in (rec.get("planned_nodes") or "").split(",") if n])
    return (job.cpus <= (rec["cpus"] or 0) and job.nodes <= max(rec["nodes"] or 0, planned, 1)
            and gpus_asked(job) <= (rec["gpus_per_node"] or 0.0)
            and getattr(item, "array_tasks", 1) <= (rec["array_tasks"] or 1))


def gpus_asked(job) -> float:
    """The GPUs a job asks on any one node at most: per node, or (``--gpus``, ``--gpus-per-task``
    without a node count) all of them; what the record keeps, so that a pending job's GPUs raised
    after the check (a user may change TresPerJob) are seen.

    >>> from greenslurm.clustermodel import JobSpec
    >>> gpus_asked(JobSpec("1", 0.0, 60.0, gpus_per_node=1.0)), gpus_asked(JobSpec("2", 0.0, 60.0, extra={"gpus_total": 3}))
    (1.0, 3.0)
    """
    return max(float(job.gpus_per_node), float((job.extra or {}).get(GPUS_TOTAL, 0) or 0))

"""Reconciliation trusts the record, never the text of a comment: which pending jobs with a Slurm
deadline the service leaves alone, table-driven, on the real service objects over a cluster state
recorded from the real daemons (tests/data/slurm-hook)."""

from __future__ import annotations

import time

import pytest

from greenslurm.clustermodel import JobSpec
from greenslurm.slurm_plugin.backend import FilesBackend, PendingDeadline
from greenslurm.slurm_plugin.config import HookConfig
from greenslurm.slurm_plugin.protocol import parse_request
from greenslurm.slurm_plugin.record import DecisionRecord
from greenslurm.slurm_plugin.service import DecisionService

import json
from pathlib import Path

STATE = Path(__file__).parent / "data" / "slurm-hook"


@pytest.fixture
def service(tmp_path):
    service = DecisionService(HookConfig(database=str(tmp_path / "db.sqlite")), DecisionRecord(tmp_path / "db.sqlite"))
    snapshot, _ = FilesBackend(str(STATE)).snapshot()
    service.swap_view(service.install_view(snapshot, time.time()), time.time())
    return service


def submit(service: DecisionService, uid: int, deadline: str, minutes: int = 10) -> tuple[dict, float]:
    now = time.time()
    line = json.dumps({"id": 1, "uid": uid, "user": f"u{uid}", "min_cpus": 1, "time_limit": minutes,
                       "submit_time": int(now), "deadline_env": deadline}).encode()
    answer = service.handle_request(parse_request(line))
    assert answer["action"] == "modify", answer
    return answer, service.record.rows("WHERE id = ?", (answer["decision"],))[0]["deadline_s"]


def pending(job_id: str, uid: int, deadline_s: float, comment: str, limit_s: float = 600.0, cpus: int = 1,
            submit_s: float | None = None) -> PendingDeadline:
    job = JobSpec(job_id, submit_s=time.time() if submit_s is None else submit_s, requested_time_s=limit_s, cpus=cpus,
                  deadline_s=deadline_s)
    return PendingDeadline(job_id, deadline_s, job, None, comment, False, f"u{uid}", limit_s, uid)


def reconciled(service: DecisionService, items: list[PendingDeadline]) -> list[str]:
    return sorted(item.job_id for item, _ in service.to_reconcile(items))


def test_a_job_carrying_its_own_tag_and_deadline_is_left_alone(service):
    answer, checked = submit(service, 1000, "now+1day")
    assert reconciled(service, [pending("101", 1000, checked, answer["comment_append"])]) == []


@pytest.mark.parametrize("case", [
    "forged token", "unknown id", "other user", "deadline tightened", "time limit raised", "text only",
    "cpus raised", "tag issued before the job was submitted",
])
def test_anything_else_is_checked(service, case):
    answer, checked = submit(service, 1000, "now+1day")
    tag = answer["comment_append"]
    decision, token = tag.split(":")[0].removeprefix("greenslurm#").split(".")
    comment, uid, deadline, limit, cpus, submitted = tag, 1000, checked, 600.0, 1, None
    if case == "forged token":
        comment = tag.replace(token, "deadbeef" if token != "deadbeef" else "feedface")
    elif case == "unknown id":
        comment = tag.replace(f"#{decision}.", f"#{int(decision) + 1000}.")
    elif case == "other user":
        uid = 1001
    elif case == "deadline tightened":
        deadline = checked - 3600.0            # root moved it an hour earlier after the check
    elif case == "time limit raised":
        limit = 3600.0                          # 10 minutes were checked, the job now asks an hour
    elif case == "text only":
        comment = "greenslurm#7: planned start ... deadline checked: 2030-01-01T00:00:00"
    elif case == "cpus raised":
        cpus = 16                               # 1 CPU was checked; the user then ran scontrol update NumCPUs=16
    elif case == "tag issued before the job was submitted":
        # the tag of a job cancelled (or run) before any sync claimed it, copied into a job submitted
        # 10 minutes later: its deadline was never checked on the cluster as it is now
        submitted = time.time() + 600.0
    assert reconciled(service, [pending("101", uid, deadline, comment, limit, cpus, submitted)]) == ["101"]


def test_a_comment_stuffed_with_tags_costs_a_few_lookups_and_covers_nothing(service):
    answer, checked = submit(service, 1000, "now+1day")
    # 300,000 distinct ids: more than SQLite takes as parameters of one statement (250,000 here)
    stuffed = " ".join(f"greenslurm#{i}.deadbeef" for i in range(10**6, 10**6 + 300_000))
    items = [pending("101", 1000, checked, answer["comment_append"]),
             pending("102", 1000, checked, stuffed)]
    assert reconciled(service, items) == ["102"]
    # the real tag before the pile is not looked at: only the last 4 tags of a comment are
    assert reconciled(service, [pending("103", 1000, checked, answer["comment_append"] + " " + stuffed)]) == ["103"]


def test_a_copied_tag_is_claimed_by_the_first_job_only(service):
    answer, checked = submit(service, 1000, "now+1day")
    original = pending("101", 1000, checked, answer["comment_append"])
    copy = pending("102", 1000, checked, "my note " + answer["comment_append"])
    assert reconciled(service, [copy, original]) == ["102"]
    # the claim is in the record: in a later sync the copy alone still does not get it
    assert reconciled(service, [copy]) == ["102"]
    assert service.record.rows("WHERE id = ?", (answer["decision"],))[0]["job_id"] == "101"


def test_a_deadline_loosened_after_the_check_is_still_covered(service):
    answer, checked = submit(service, 1000, "now+1day")
    assert reconciled(service, [pending("101", 1000, checked + 3600.0, answer["comment_append"])]) == []


def test_a_rejected_decision_covers_nothing(service):
    now = time.time()
    line = json.dumps({"id": 2, "uid": 1000, "user": "u1000", "min_cpus": 1, "time_limit": 10,
                       "submit_time": int(now), "deadline_env": "now+60"}).encode()
    answer = service.handle_request(parse_request(line))
    assert answer["action"] == "reject"
    token = service.record.rows("WHERE id = ?", (answer["decision"],))[0]["token"]
    comment = f"greenslurm#{answer['decision']}.{token}: planned"
    assert reconciled(service, [pending("101", 1000, now + 60, comment)]) == ["101"]


@pytest.mark.parametrize("array, stopped", [("", False), ("0-99", True), ("0-1%1", False), ("0-9%1", True)])
def test_a_pending_job_array_is_checked_as_its_pending_tasks(tmp_path, array, stopped):
    # the recorded pending job as a job array whose deadline only Slurm holds: 60-minute one-CPU tasks
    # due in 2 hours on 16 CPUs.  One task ends in time; 100 tasks are 7 rounds (7 h); 2 tasks one at a
    # time end after 2 h (just in time); 10 one at a time take 10 h
    now = time.time()
    squeue = json.loads((STATE / "squeue.json").read_text())
    job = next(j for j in squeue["jobs"] if j["job_state"] == "PENDING")
    job.update(deadline=int(now) + 7200 + 120, time_limit=60, array_task_string=array,
               array_max_tasks=int(array.partition("%")[2] or 0), submit_time=int(now), eligible_time=int(now))
    for j in squeue["jobs"]:
        if j["job_state"] == "RUNNING":
            j["end_time"] = int(now)                 # the running job ends now
    state = tmp_path / "state"
    state.mkdir()
    (state / "sinfo.json").write_bytes((STATE / "sinfo.json").read_bytes())
    (state / "squeue.json").write_text(json.dumps(squeue))
    service = DecisionService(HookConfig(database=str(tmp_path / "db.sqlite")), DecisionRecord(tmp_path / "db.sqlite"))
    snapshot, deadlines = FilesBackend(str(state)).snapshot()
    service.swap_view(service.install_view(snapshot, now), now)
    verdicts = {item.job_id: message for item, message in service.to_reconcile(deadlines)}
    assert list(verdicts) == [str(job["job_id"])]
    assert (verdicts[str(job["job_id"])] is not None) == stopped, verdicts


def test_a_reconciliation_begun_or_failed_is_looked_at_again(tmp_path):
    # the service writes "hold (in progress)" before it acts and the outcome after: a service killed
    # in between leaves a row naming the job, and the job is not taken as done
    from greenslurm.slurm_plugin.record import FAILED, IN_PROGRESS

    record = DecisionRecord(tmp_path / "db.sqlite")
    record.add_reconciled("7", 100.0, "hold" + IN_PROGRESS, "cannot end by its deadline")
    record.add_reconciled("8", 100.0, FAILED, "cannot end by its deadline")
    record.add_reconciled("9", 100.0, "hold", "cannot end by its deadline")
    record.add_reconciled("10", 100.0, "ok", "can end in time")
    assert record.reconciled(["7", "8", "9", "10"]) == {("9", 100.0), ("10", 100.0)}
    record.add_reconciled("7", 100.0, "hold", "cannot end by its deadline")     # the outcome replaces the row
    assert ("7", 100.0) in record.reconciled(["7"])
    rows = record.db.execute("SELECT job_id, action FROM reconciled ORDER BY job_id").fetchall()
    assert sorted(rows) == [("10", "ok"), ("7", "hold"), ("8", FAILED), ("9", "hold")]


# -- changes to pending jobs: the plan without the change is kept, the answers stay the same ----------
def test_a_kept_plan_answers_every_change_as_two_fresh_plans_do(tmp_path):
    import sys
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    from bench_hook_view import NOW, snapshot
    snap = snapshot(20, 30, 30, seed=3)              # 20 nodes of 32 CPUs, seeded running and pending jobs
    service = DecisionService(HookConfig(database=str(tmp_path / "db.sqlite")), DecisionRecord(tmp_path / "db.sqlite"))
    service.swap_view(service.install_view(snap, NOW), NOW)
    # two pending jobs whose deadlines were checked: each a little after its planned end
    checked = {p.job_id: service.view.planned_end_s(p.job_id) + 600.0 for p in snap.pending[-2:]}
    service.checked_deadlines = checked
    answers = {}
    for way in ("kept", "fresh"):
        answers[way] = []
        for k, pending in enumerate(snap.pending[:20]):
            if way == "fresh":
                service.forget_plans()
            change = {"new_time_limit": 60 * (k + 1)} if k % 2 else {"new_min_cpus": 32, "new_min_nodes": 4}
            answer = service.modify({"op": "modify", "id": k, "uid": 1000, "job_id": pending.job_id, "untrusted": {},
                                     **change})
            answers[way].append((answer["action"], answer["message"]))
    assert answers["kept"] == answers["fresh"]
    # the changes do reach the checked jobs: some are refused (the check is not vacuous)
    assert {a for a, _ in answers["kept"]} == {"accept", "reject"}, answers["kept"]

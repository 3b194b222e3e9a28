"""Decisions on submissions and on changes to pending jobs, on the current cluster view
(:class:`DecisionService`: no I/O but the record).  Every decision is committed to the record
(:mod:`greenslurm.slurm_plugin.record`) before its answer is sent; an accepted job's comment gets
the hook's tag, which reconciliation (:mod:`greenslurm.slurm_plugin.reconcile`) looks up later.
The socket, the lock and the sync loop around it are :mod:`greenslurm.slurm_plugin.server`'s.
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from dataclasses import replace
from datetime import datetime

from greenslurm.acceptance.registry import build as build_acceptance
from greenslurm.clustermodel import InputError
from greenslurm.clustermodel.eligibility import job_partitions
from greenslurm.slurm_plugin.config import HookConfig
from greenslurm.slurm_plugin.energy import run_energy_j
from greenslurm.slurm_plugin.failures_file import Kept, parse_segments
from greenslurm.slurm_plugin.forecast import Forecast, usable_supply, within_horizon
from greenslurm.slurm_plugin.protocol import ProtocolError, failed_ids, parse_request, submission_from_request
from greenslurm.slurm_plugin.reconcile import covered_jobs, gpus_asked, tag_decision
from greenslurm.slurm_plugin.record import DecisionRecord
from greenslurm.slurm_plugin.slurm_json import TAG, PendingDeadline, waits_for
from greenslurm.slurm_plugin.live_nodes import NodePower, features_of
from greenslurm.slurm_plugin.snapshot import PendingJob, Snapshot
from greenslurm.slurm_plugin.view import OWN_NODES, GreenNote, LiveView
from greenslurm.traces.slurm_hostlist import HostNames

log = logging.getLogger("greenslurm.hook")

DEADLINE_CHECKED = "deadline checked:"


def when_text(t: float) -> str:
    """A time as the hook writes it in comments, messages and the log: local time, to the second."""
    return datetime.fromtimestamp(t).strftime("%Y-%m-%dT%H:%M:%S")


class DecisionService:
    """Decisions on submissions, on the current view; no I/O but the record."""

    def __init__(self, config: HookConfig, record: DecisionRecord, view: LiveView | None = None) -> None:
        self.config = config
        self.record = record
        self.acceptance = build_acceptance(config.acceptance, min_slack=config.min_slack, share=config.share)
        self.view = view
        self.next_id = record.next_id()
        # (time, submission, nodes it was pinned to, begin time it was given, decision id) accepted
        # since the sync began
        self.since_snapshot: list[list] = []
        self.decisions = 0
        self.fail_opens = record.events("fail_open")
        self.started_s = time.time()
        self.max_array_size: int | None = None      # Slurm's MaxArraySize, when the backend can say
        # per hook load: the requests it reported it gave up on (a late decision of one is not applied)
        self.failed_requests: dict[str, set[int]] = {}
        # the pending jobs whose deadline a decision covers, as of the last sync: job id -> deadline
        self.checked_deadlines: dict[str, float] = {}
        # (snapshot, key, view, ends): the plan without a change, kept for the next change (see modify)
        self._kept_plan: tuple | None = None
        self.forecast = Forecast()
        self.power = NodePower(config.node_idle_w, config.node_busy_w, config.gpu_idle_w, config.gpu_max_w)

    def install_view(self, snapshot: Snapshot, started_s: float) -> LiveView:
        config = self.config
        supply, note = usable_supply(self.forecast, snapshot.now_s, config.supply_max_age_s, config.supply_stale)
        if config.renewable == "grid":
            supply = None
        elif supply is not None:
            supply = within_horizon(supply, snapshot.now_s, config.supply_horizon_s)
        view = LiveView(snapshot, self.acceptance, config.select, config.max_array_tasks, power=self.power,
                        supply=supply, renewable=config.renewable,
                        no_deadline_shift_s=config.no_deadline_max_shift_s if config.no_deadline == "shift" else 0.0,
                        boot_s=config.boot_s if config.power_save else 0.0)
        view.supply_note = note if self.forecast.source else ""
        view.snapshot = snapshot
        return view

    def swap_view(self, view: LiveView, started_s: float) -> None:
        self.since_snapshot = [entry for entry in self.since_snapshot if entry[0] >= started_s]
        replan(view, self.since_snapshot)
        self.view = view
        self._kept_plan = None            # (planned on the snapshot before)

    def view_age_s(self, now_s: float | None = None) -> float | None:
        if self.view is None:
            return None
        return max(0.0, (time.time() if now_s is None else now_s) - self.view.snapshot_time_s)

    def handle(self, line: bytes) -> dict:
        """One request line -> one answer (never raises on bad input)."""
        try:
            request = parse_request(line)
        except ProtocolError as exc:
            log.warning("bad request: %s", exc)
            return {"action": "error", "message": f"greenslurm: bad request: {exc}"}
        return self.handle_request(request)

    def handle_request(self, request: dict) -> dict:
        """One checked request (see :func:`~greenslurm.slurm_plugin.protocol.parse_request`) -> one answer."""
        try:
            self._note_fail_opens(request)
        except Exception:                # the count must not cost the decision
            log.exception("cannot record the hook's fail-opens")
        if request.get("op") == "modify":
            try:
                return self.modify(request)
            except Exception:        # a bug must not stop a user's change: it is applied unchecked
                log.exception("request %s: checking a change failed", request.get("id"))
                return {"id": request.get("id"), "action": "error", "message": "greenslurm: internal error"}
        if request.get("op", "submit") == "ping":
            age = self.view_age_s()
            return {"ok": True, "id": request.get("id"), "view": self.view is not None,
                    "view_age_s": None if age is None else round(age, 3),
                    "skipped": getattr(self.view, "skipped", 0) if self.view is not None else 0,
                    "shadow": self.config.shadow, "decisions": self.decisions, "fail_opens": self.fail_opens,
                    "next_id": self.next_id, **self.forecast_status()}
        try:
            return self.decide(request)
        except Exception:            # a bug must not take the service down; the hook fails open/closed
            log.exception("request %s: decision failed", request.get("id"))
            return {"id": request.get("id"), "action": "error", "message": "greenslurm: internal error"}

    def note_runs(self, snapshot: Snapshot) -> None:
        """Record the jobs Slurm shows running or ended, and the estimated energy of those that ended
        (:mod:`greenslurm.slurm_plugin.energy`)."""
        node_cpus = {node.name: float(max(node.cpus, 1)) for node in snapshot.nodes}
        power = self.power

        def energy_of(run) -> float:
            cpus = tuple(node_cpus.get(name, max(c, 1.0)) for name, c in zip(run.nodes, run.cpus))
            return run_energy_j(run.cpus, run.gpus, cpus, power.busy_w, power.gpu_max_w, run.end_s - run.start_s)
        self.record.note_runs(snapshot.runs, snapshot.nodes, snapshot.now_s, energy_of)
        from greenslurm.slurm_plugin.power import drawn_state
        self.record.note_power_states({node.name: drawn_state(node.state) for node in snapshot.nodes}, snapshot.now_s)

    def forecast_status(self, now_s: float | None = None) -> dict:
        """The forecast as ``ping`` says it: its source, age, last error and whether the view uses it."""
        if not self.forecast.source:
            return {}
        age = self.forecast.age_s(time.time() if now_s is None else now_s)
        return {"forecast": self.forecast.source, "forecast_age_s": None if age is None else round(age, 1),
                "forecast_error": self.forecast.error, "forecast_use": getattr(self.view, "supply_note", None)}

    def _note_fail_opens(self, request: dict) -> None:
        count = int(request.get("failed_open") or 0)
        if count <= 0:
            return
        instance = request.get("hook_instance") or ""
        ids = failed_ids(request)
        known = self.failed_requests.setdefault(instance, set())
        if len(known) > 100_000:
            known.clear()
        known.update(ids)
        marked = self.record.mark_not_applied(instance, ids)
        earlier, _, earlier_ids = (request.get("failed_earlier") or "").partition(":")
        if earlier:                      # failures of an earlier load (before slurmctld restarted)
            marked += self.record.mark_not_applied(earlier, failed_ids({"failed_ids": earlier_ids}))
        # requests queued while the service was stopped each carry the count so far: only what is new
        # since the last report counts (the hook's running total; a hook without one reports each anew)
        total = request.get("failed_total")
        detail = f"hook {instance}: requests {_ranges(ids)}"
        if total is not None:
            # its first totals may be failures of earlier loads it read back, which the service may
            # hold already (a report recorded whose answer came too late): counted as theirs
            inherited = parse_segments(request.get("failed_segments") or "", min(count, int(total)), instance)
            if inherited is None:
                log.warning("job_submit.lua %s: unreadable failed_segments %.200r; its failures count as its own",
                            instance or "?", request.get("failed_segments"))
            count = self.record.note_failures(instance, int(total), detail, inherited or ())
            if count <= 0:
                return
        else:
            self.record.event("fail_open", count, detail)
        self.fail_opens += count
        log.warning("job_submit.lua %s reports %d submission(s) it let through unchecked or rejected without an "
                    "answer since its last answer (%d of them had decisions here, now marked not applied)",
                    instance or "?", count, marked)

    def note_leftover(self, name: str, kept: Kept) -> int | None:
        """Count the failures of a line job_submit.lua never renamed over its file (a slurmctld
        killed between the write and the rename), once (:meth:`DecisionRecord.fold`); how many were
        new, None when this name was counted before or its line does not say its totals."""
        count = self.record.fold(name, kept, failed_ids({"failed_ids": kept.earlier.partition(":")[2]}))
        if count is None:
            return None
        after, upto = kept.own_totals
        self.fail_opens += count
        log.warning("job_submit.lua %s left %s (slurmctld stopped between writing and renaming it): %d "
                    "failure(s) no load reads back, %d of them not counted before", kept.instance, name,
                    upto - after, count)
        return count

    # -- one decision -------------------------------------------------------------------------------
    def decide(self, request: dict, now_s: float | None = None) -> dict:
        """The answer to one submission, on the current view, at ``now_s`` (None: the clock's time; the
        replay's admission gives its own time, see :mod:`greenslurm.slurm_plugin.admission`)."""
        started = time.perf_counter()
        config = self.config
        decision_id = self.next_id
        self.next_id += 1
        token = secrets.token_hex(4)
        now = time.time() if now_s is None else now_s
        row: dict = {"id": decision_id, "token": token, "time_s": now, "uid": request.get("uid"),
                     "user": _text(request.get("user")), "shadow": int(config.shadow),
                     "hook_instance": request.get("hook_instance"), "request_id": request.get("id")}
        late = request.get("id") in self.failed_requests.get(request.get("hook_instance") or "", ())
        answer: dict = {"id": request.get("id"), "decision": decision_id}

        def finish(would: str, message: str, *, policy: str = "greenslurm", reason: str = "",
                   error_code: str | None = None, sets: dict | None = None) -> dict:
            if would == "reject":
                answer["error_code"] = error_code or config.reject_error
            answer["message"] = message
            answer.update(sets or {})
            if config.shadow and would != "error":
                shown = {"id": answer["id"], "decision": decision_id, "action": "accept", "shadow": would}
            else:
                shown = dict(answer, action=would)
            row.update(action=shown["action"], would_action=would, policy=policy, reason=reason, message=message,
                       decide_us=(time.perf_counter() - started) * 1e6)
            self.record.add(row)                 # committed before the answer leaves
            if late:                             # the hook already gave up on this request
                self.record.not_applied(row["hook_instance"], row["request_id"])
            self.decisions += 1
            log.info("decision %d (%s): %s%s", decision_id, row.get("user") or "?", would,
                     " (shadow: answered accept)" if config.shadow and would != "error" else "")
            return shown

        refused = self._slurm_refuses(request)
        if refused:
            # Slurm refuses the job right after the answer: it is decided as any other (a rejection
            # names the hook's reason) but reserves nothing, and its row says not applied; an array
            # past MaxArraySize is not even planned (thousands of tasks for a job that never exists)
            late = True
            if request.get("slurm_refuses") is None:
                return finish("accept", f"greenslurm: not checked: Slurm refuses this job ({refused})",
                              reason="refused by Slurm")
        untrusted = self._untrusted_answer(request, finish)
        if untrusted is not None:
            return untrusted
        try:
            sub = submission_from_request(request, now_s=now, default_time_limit_s=config.default_time_limit_s,
                                          known_nodes=getattr(self.view, "host_names", None))
        except InputError as exc:
            where = f" ({exc.field})" if exc.field else ""
            return finish("reject", f"greenslurm: {exc.reason}{where}", reason="bad input",
                          error_code="ESLURM_INVALID_TIME_VALUE" if exc.field and "deadline" in exc.field else None)
        job = sub.job
        row.update(partition=job.partition, cpus=job.cpus, nodes=job.nodes, gpus_per_node=gpus_asked(job),
                   time_limit_s=job.requested_time_s, deadline_s=job.deadline_s,
                   deadline_source=sub.deadline_source, array_tasks=sub.array_tasks)
        age = self.view_age_s(now)
        row["view_age_s"] = age
        stale = self._stale_view_answer(age, finish)
        if stale is not None:
            return stale
        named = job_partitions(job.partition)
        if named and self.view.partitions and self.view.partitions.isdisjoint(named):
            return _unusable_partition_answer(job, named, finish)
        # a job held at submission, waiting on another job, or that the hook already gave up on is
        # checked but not reserved: the sync plans it once it can run (Slurm's view of it)
        reserve = not (late or request.get("hold") or waits_for(request.get("dependency")) != ())
        outcome = self.view.decide(job, max(now, job.submit_s), sub.begin_s, sub.features,
                                   tasks=sub.array_tasks, throttle=sub.array_throttle,
                                   required_nodes=sub.required_nodes, excluded_nodes=sub.excluded_nodes,
                                   commit=reserve)
        decision = outcome.decision
        if decision.reason == OWN_NODES and job.deadline_s is None:
            # Slurm holds such a job until its nodes come back: nothing to check, and the user's nodes stay
            return finish("accept", f"greenslurm: accepted unplanned: {decision.detail}", reason=decision.reason)
        # the user's own -w is kept: the hook pins only jobs that name no nodes (with -x, it pins among the others)
        own_nodes = bool(sub.required_nodes)
        if self.forecast.source:
            row.update(supply_age_s=self.forecast.age_s(now), supply_note=getattr(self.view, "supply_note", None))
        green = outcome.green
        if green is not None:
            row.update(earliest_start_s=green.earliest_start_s, renewable_share=green.share_planned,
                       renewable_share_earliest=green.share_earliest)
        if decision.accepted and outcome.start_s is not None:
            return self._planned_answer(finish, row, sub, outcome, decision_id, token, now_s, reserve, own_nodes)
        if decision.accepted:
            return finish("accept", decision.message, policy=decision.policy, reason=decision.reason)
        return finish("reject", _rejection_text(sub, outcome), policy=decision.policy, reason=decision.reason)

    def _untrusted_answer(self, request: dict, finish) -> dict | None:
        """The answer to a request with fields the hook could not decode (``untrusted``) when the
        ``undecodable`` setting rejects them; otherwise None, the fields dropped (said in the log)."""
        untrusted = request.get("untrusted") or {}
        if not untrusted:
            return None
        named = "; ".join(f"{name}: {why}" for name, why in sorted(untrusted.items()))
        if self.config.undecodable == "reject":
            return finish("reject", f"greenslurm: cannot check this job: {named}; fix it and resubmit",
                          reason="untrusted input")
        for name in untrusted:
            request.pop(name, None)
        log.info("request %s: checked without %s", request.get("id"), named)
        return None

    def _stale_view_answer(self, age: float | None, finish) -> dict | None:
        """The answer when the view is missing or older than ``max_view_age_s`` (by the ``stale``
        setting: accept unchecked, reject, or an error when there is no view); None: decide (on a
        stale view, said in the log)."""
        config = self.config
        if age is not None and age <= config.max_view_age_s:
            return None
        why = "no cluster view yet" if age is None else f"the cluster view is {age:.0f} s old"
        if config.stale == "open":
            return finish("accept", f"greenslurm: accepted unchecked ({why})", reason="stale view")
        if config.stale == "closed":
            return finish("reject", f"greenslurm: cannot check jobs now ({why}); try again later",
                          reason="stale view")
        if age is None:
            return finish("error", f"greenslurm: {why}", reason="stale view")
        log.warning("deciding on a stale view (%s)", why)
        return None

    def _planned_answer(self, finish, row: dict, sub, outcome, decision_id: int, token: str, now_s: float | None,
                        reserve: bool, own_nodes: bool) -> dict:
        """The answer to an accepted job with a plan: its reservation kept for the next sync, the
        decision's row, and what the hook sets on the job (the comment, the nodes, the begin time).
        ``now_s``: the caller's time (None: the clock's, as :meth:`decide` takes it)."""
        config = self.config
        job, decision, green = sub.job, outcome.decision, outcome.green
        now = row["time_s"]                     # decide's time: now_s, or the clock's when it began
        names = list(outcome.nodes)
        # a constraint the hook cannot read (counts, mixed & and |) is Slurm's to place: not pinned
        pin = config.set_required_nodes and not sub.constraint_unread
        pinned = tuple(names) if ((pin or own_nodes) and sub.array_tasks == 1
                                  and not config.shadow) else ()
        entry = [time.time() if now_s is None else now_s, sub, pinned, None, decision_id]
        if reserve:
            self.since_snapshot.append(entry)
        row.update(planned_start_s=outcome.start_s, planned_end_s=outcome.end_s, planned_nodes=",".join(names),
                   energy_j=outcome.energy_j)
        sets: dict = {}
        shifted = green is not None and outcome.start_s > green.earliest_start_s + 1.0
        if config.annotate_comment:
            what = f"array of {sub.array_tasks} tasks, " if sub.array_tasks > 1 else ""
            energy = f", est. {outcome.energy_j / 3.6e6:.3f} kWh above idle" if outcome.energy_j else ""
            sets["comment_append"] = (
                f"{TAG}{decision_id}.{token}: {what}planned start {when_text(outcome.start_s)} on {','.join(names)}"
                + energy + (f", {green_reason(green, outcome.start_s)}" if shifted else "")
                + (f", {DEADLINE_CHECKED} {when_text(job.deadline_s)}" if job.deadline_s is not None else "")
                + (", its own node list kept" if own_nodes else ""))
        if pin and sub.array_tasks == 1 and not own_nodes:
            # the nodes, and their number: Slurm may add nodes to a required list otherwise
            sets["req_nodes"] = ",".join(names)
            sets["min_nodes"] = sets["max_nodes"] = len(names)
        if (config.set_begin_time or shifted) and outcome.start_s > now + 1.0:
            # a job moved into greener hours must not start before them (Slurm would start it at once)
            sets["begin_time"] = int(math.ceil(outcome.start_s))
            row["begin_set_s"] = float(sets["begin_time"])
            if not config.shadow:
                entry[3] = row["begin_set_s"]
        return finish("modify" if sets else "accept", decision.message, policy=decision.policy,
                      reason=decision.reason, sets=sets)

    def _slurm_refuses(self, request: dict) -> str:
        """Why Slurm refuses this submission right after job_submit.lua (its string limits, which the
        hook checks; an array index at or above MaxArraySize), or ''."""
        field = request.get("slurm_refuses")
        if field:
            return f"{field} longer than Slurm allows"
        limit = self.max_array_size
        text = request.get("array_inx")
        if limit and isinstance(text, str) and text and "array_inx" not in (request.get("untrusted") or {}):
            # the highest index any range names (Slurm's _valid_array_inx: every index < MaxArraySize)
            bounds = [part.split(":", 1)[0].rpartition("-")[2] for part in text.split("%", 1)[0].split(",")]
            top = max((int(b) for b in bounds if b.isdigit() and len(b) < 12), default=0)
            if top >= limit:
                return f"array index {top} >= MaxArraySize {limit}"
        return ""

    # -- a change to a pending job (scontrol update) ----------------------------------------------
    def modify(self, request: dict) -> dict:
        """A user's change to a pending job (job_submit.lua's slurm_job_modify): refused when, planned
        with the change, a job whose deadline the hook checked would no longer end by it (and did
        before).  Both plans are built from the last sync's snapshot plus the jobs accepted since, so
        they differ only by the change."""
        answer = {"id": request.get("id")}
        view = self.view
        snapshot = getattr(view, "snapshot", None)
        checked = dict(self.checked_deadlines)
        for entry in self.since_snapshot:
            if entry[1].job.deadline_s is not None:
                checked[f"decision:{entry[4]}"] = entry[1].job.deadline_s
        job_id = str(request.get("job_id") or "")
        checked.pop(job_id, None)             # a job's own deadline: reconciliation looks at it again
        if snapshot is None or not checked or request.get("untrusted"):
            why = ("no checked deadline is pending" if snapshot is not None and not checked
                   else "cannot check it" if snapshot is not None else "no cluster view yet")
            return dict(answer, action="accept", message=f"greenslurm: change not checked ({why})")
        decision = tag_decision(request.get("tag"))
        entries = [e for e in self.since_snapshot if e[4] != decision]
        old = next((p for p in snapshot.pending if p.job_id == job_id), None)
        if old is None:
            entry = next((e for e in self.since_snapshot if e[4] == decision), None)
            if entry is not None:
                sub = entry[1]
                old = PendingJob(job_id, sub.job, entry[3] or sub.begin_s, sub.features, False, entry[2],
                                 sub.array_tasks, sub.array_throttle)
            else:                        # a job the view does not know yet: as its record says
                try:
                    sub = submission_from_request(dict(request, op="submit"), now_s=time.time(), known_nodes=view.host_names,
                                                  default_time_limit_s=self.config.default_time_limit_s)
                except InputError:
                    return dict(answer, action="accept", message="greenslurm: change not checked (job unreadable)")
                old = PendingJob(job_id, sub.job, sub.begin_s, sub.features)
        new = changed_job(old, request, view.host_names)
        others = [p for p in snapshot.pending if p.job_id != job_id]
        # the plan without the change is the same for every change until the next sync or accepted
        # job: kept, so that a change costs one plan (the job's place in the pending list is its
        # submission's, so a job of the snapshot leaves the snapshot's plan as it is)
        own = None if len(others) < len(snapshot.pending) else old
        key = (own, tuple((e[4], e[3]) for e in entries))
        kept = self._kept_plan
        if kept is None or kept[0] is not snapshot or kept[1] != key:
            kept = self._kept_plan = (snapshot, key, *self._plan(replace(snapshot, pending=others + [old]), entries))
        before = _planned_ends(*kept[2:], entries, checked)
        after = _planned_ends(*self._plan(replace(snapshot, pending=others + [new]), entries), entries, checked)
        endangered = [(j, d, after[j]) for j, d in sorted(checked.items())
                      if before.get(j) is not None and before[j] <= d + 1.0 and (after.get(j) is None or after[j] > d + 1.0)]
        changes = ",".join(sorted(k[4:] for k in request if k.startswith("new_")))
        if not endangered:
            log.info("change to job %s (%s) by uid %s: no checked deadline moves", job_id, changes, request.get("uid"))
            return dict(answer, action="accept", message="greenslurm: change checked")
        named = "; ".join(f"job {'(new)' if j.startswith('decision:') else j} due {when_text(d)} would end "
                          + ("nowhere" if end is None else when_text(end)) for j, d, end in endangered[:3])
        self.record.event("modify_refused", 1, f"job {job_id} ({changes}) by uid {request.get('uid')}: {named}")
        log.info("change to job %s (%s) by uid %s refused: %s", job_id, changes, request.get("uid"), named)
        return dict(answer, action="reject", error_code=self.config.reject_error,
                    message=f"greenslurm: this change to job {job_id} ({changes}) would make a job miss the "
                            f"deadline it was accepted with ({named}); not changed")

    def _plan(self, snapshot: Snapshot, entries: list) -> tuple[LiveView, list[float | None]]:
        """A view of ``snapshot`` with ``entries`` (jobs accepted since it was taken) planned on it,
        and their planned ends."""
        view = self.install_view(snapshot, snapshot.now_s)
        return view, replan(view, entries)

    def forget_plans(self) -> None:
        """Forget the plan kept for changes (the next change plans the cluster both without and with it)."""
        self._kept_plan = None

    # -- reconciliation ---------------------------------------------------------------------------
    def checked_jobs(self, deadlines: list[PendingDeadline]) -> set[str]:
        """Pending jobs whose deadline a decision of the record already covers (:func:`covered_jobs`)."""
        return covered_jobs(self.record, deadlines)

    def to_reconcile(self, deadlines: list[PendingDeadline]) -> list[tuple[PendingDeadline, str | None]]:
        """Pending jobs with a deadline that no decision covers, each with what is wrong (None: it can
        still end in time; recorded so it is not checked again for the same deadline)."""
        if self.view is None:
            return []
        done = self.record.reconciled([item.job_id for item in deadlines])
        checked = self.checked_jobs(deadlines)
        self.checked_deadlines = {item.job_id: item.deadline_s for item in deadlines if item.job_id in checked}
        out: list[tuple[PendingDeadline, str | None]] = []
        for item in deadlines:
            if item.job_id in checked or item.held or (item.job_id, item.deadline_s) in done:
                continue
            end = self.view.planned_end_s(item.job_id)
            if end is None:
                out.append((item, "greenslurm: fits no node of the cluster"))
            elif end > item.deadline_s:
                out.append((item, f"greenslurm: cannot end by its deadline {when_text(item.deadline_s)}"
                                  f" (earliest end {when_text(end)})"))
            else:
                out.append((item, None))
        return out


def _planned_ends(view: LiveView, ends: list[float | None], entries: list, checked: dict) -> dict:
    """The planned ends of the ``checked`` jobs (job ids, and ``decision:ID`` for ``entries``, whose
    ends on ``view`` are ``ends``)."""
    out = {j: view.planned_end_s(j) for j in checked if not j.startswith("decision:")}
    for entry, end in zip(entries, ends):
        out[f"decision:{entry[4]}"] = end
    return out


def replan(view: LiveView, entries: list) -> list[float | None]:
    """Plan on ``view`` the jobs accepted since its snapshot was taken (entries of
    ``DecisionService.since_snapshot``); their planned ends."""
    # (a list per entry: the begin time is filled in after the entry is made)
    return [view.plan_held(sub.job, sub.begin_s if begin_s is None else begin_s, sub.features, tasks=sub.array_tasks,
                           throttle=sub.array_throttle, required_nodes=pinned)
            for _, sub, pinned, begin_s, _ in entries]


def changed_job(job: PendingJob, request: dict, known: HostNames) -> PendingJob:
    """``job`` with a change of a ``modify`` request applied (its ``new_*`` fields); ``known``: the
    cluster's nodes, which a new node list is matched against (never expanded).

    >>> from greenslurm.clustermodel import JobSpec
    >>> j = PendingJob("7", JobSpec("7", 0.0, 600.0, cpus=2), held=True)
    >>> n = changed_job(j, {"new_time_limit": 4294967295, "new_exc_nodes": "n1", "new_priority": 4294967295},
    ...                 HostNames(["n1", "n2"]))
    >>> n.job.requested_time_s / 86400, n.required_nodes, n.held
    (365.0, ('n2',), False)
    >>> changed_job(replace(j, waiting="JobHeldUser"), {"new_priority": 4294967295}, HostNames([])).waiting
    ''

    >>> changed_job(j, {"new_time_limit": 30, "new_dependency": "afterok:5"}, HostNames([])).after
    ('5',)
    """
    from greenslurm.slurm_plugin.protocol import INFINITE, MEM_PER_CPU, node_names, time_limit_s, unset
    spec, changes = job.job, {}
    limit = request.get("new_time_limit")
    if limit is not None and (limit == INFINITE or not unset(limit)):
        changes["requested_time_s"] = time_limit_s(limit, spec.requested_time_s)
    cpus = request.get("new_min_cpus")
    tasks, per_task = request.get("new_num_tasks"), request.get("new_cpus_per_task")
    if cpus is not None and not unset(cpus) and cpus > 0:
        changes["cpus"] = int(cpus)
    elif tasks is not None and not unset(tasks) and tasks > 0:
        changes["cpus"] = int(tasks) * (int(per_task) if per_task is not None and not unset(per_task, 16) else 1)
    nodes = request.get("new_min_nodes")
    if nodes is not None and not unset(nodes):
        changes["nodes"] = int(nodes)
    memory = request.get("new_pn_min_memory")
    if memory is not None and not unset(memory, 64):
        per_node = changes.get("cpus", spec.cpus) / max(changes.get("nodes", spec.nodes), 1)
        changes["memory_mb_per_node"] = (float(memory - MEM_PER_CPU) * math.ceil(per_node)
                                         if memory >= MEM_PER_CPU else float(memory))
    if request.get("new_partition"):
        changes["partition"] = request["new_partition"]
    gres = " ".join(request.get(f"new_tres_per_{k}") or "" for k in ("node", "job", "task", "socket"))
    if gres.strip():
        from greenslurm.clustermodel.gres import gpu_count
        # counted per node whatever the form asks: a change of GPUs can only be planned as more
        changes["gpus_per_node"] = float(max(gpu_count(g) for g in gres.split()))
    if changes:
        spec = spec.with_changes(**changes)
    required = job.required_nodes
    if request.get("new_req_nodes") is not None:
        required = node_names(request, "new_req_nodes", known)
    if request.get("new_exc_nodes"):
        excluded = set(node_names(request, "new_exc_nodes", known))
        required = tuple(n for n in (required or known.names) if n not in excluded)
    begin = request.get("new_begin_time")
    begin_s = job.begin_s if begin is None or unset(begin) else (float(begin) if begin > time.time() else None)
    priority = request.get("new_priority")
    held = job.held if priority is None or unset(priority) and priority != INFINITE else priority == 0
    waiting, after = job.waiting, job.after
    if not held and waiting.startswith("JobHeld"):
        waiting = ""                     # released
    if request.get("new_dependency") is not None:
        after = waits_for(request["new_dependency"])
        waiting = "Dependency" if after is None else ("" if waiting == "Dependency" else waiting)
        after = after or ()
    features = job.features
    if request.get("new_features") is not None:
        features = features_of(request["new_features"])
    return replace(job, job=spec, begin_s=begin_s, features=features, held=held, required_nodes=required,
                   waiting=waiting, after=after)


def _ranges(ids: list[int]) -> str:
    """Request numbers as ranges.

    >>> _ranges([3, 4, 5, 9]), _ranges([])
    ('3-5,9', '')
    """
    out: list[str] = []
    for i in sorted(set(ids)):
        if out and out[-1][1] == i - 1:
            out[-1][1] = i
        else:
            out.append([i, i])
    return ",".join(f"{a}-{b}" if a != b else f"{a}" for a, b in out)


def green_reason(green: GreenNote, start_s: float) -> str:
    """Why a job starts later than it could have, for its comment.

    >>> from greenslurm.slurm_plugin.view import GreenNote
    >>> green_reason(GreenNote(0.0, 0.0, 0.75), 5400.0)
    'moved 1h30m later into greener hours (est. renewable share 75% instead of 0%)'
    """
    moved = int(round(start_s - green.earliest_start_s))
    hours, minutes = divmod(moved // 60, 60)
    later = f"{hours}h{minutes:02d}m" if hours else f"{minutes}m{moved % 60:02d}s" if minutes else f"{moved}s"

    def pct(x: float | None) -> str:
        return "n/a" if x is None else f"{100 * x:.0f}%"
    return (f"moved {later} later into greener hours (est. renewable share {pct(green.share_planned)} "
            f"instead of {pct(green.share_earliest)})")


def _text(value) -> str | None:
    if not isinstance(value, str):
        return None
    return value.encode("utf-8", "replace").decode("utf-8")


def _rejection_text(sub, outcome) -> str:
    """The message of a rejected job: the decision's, with the earliest end and the deadline in brackets."""
    job, decision = sub.job, outcome.decision
    when = [f"earliest end {when_text(outcome.earliest_end_s)}"] if outcome.earliest_end_s is not None else []
    if job.deadline_s is not None:
        when.append(f"deadline {when_text(job.deadline_s)} from {sub.deadline_source}")
    what = f"array of {sub.array_tasks} tasks " if sub.array_tasks > 1 else ""
    return f"greenslurm: job {what}{decision.message}" + (f" [{', '.join(when)}]" if when else "")


def _unusable_partition_answer(job, named: list[str], finish) -> dict:
    """No usable node in any partition the job names (all down or drained, or no such partition):
    Slurm queues it (or refuses it with its own message); a deadline cannot be checked."""
    if job.deadline_s is None:
        return finish("accept", f"greenslurm: accepted unplanned: no usable node in partition "
                                f"{','.join(named)}", reason="no usable partition")
    return finish("reject", f"greenslurm: cannot check the deadline: no usable node in partition "
                            f"{','.join(named)}", reason="no usable partition")

"""Every decision the service takes (or, in shadow mode, would have taken), in SQLite.

A decision is committed before its answer leaves the service (:meth:`DecisionRecord.add`), so
whatever answer job_submit.lua applied is in the record, even if the service is killed the next
instant (``record_sync = "normal"``, the default); with ``record_sync = "full"`` the commit is also
fsynced, so a power cut loses nothing either.  Decision ids are the table's primary key and go on from the highest one on
disk: they never repeat across restarts.  Each decision also carries a random token; the service
writes ``greenslurm#ID.TOKEN`` into the job's comment, and reconciliation trusts a comment's tag only
when the record holds that id with that token, for that user, not yet claimed by another job.

The file (and SQLite's -wal/-shm beside it) is created 0600.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import time
from pathlib import Path

from greenslurm.slurm_plugin.failures_file import Kept, uncovered

log = logging.getLogger("greenslurm.hook.record")

SCHEMA = """
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY,
    token TEXT NOT NULL DEFAULT '',
    time_s REAL NOT NULL,
    uid INTEGER, user TEXT, partition TEXT, cpus INTEGER, nodes INTEGER, gpus_per_node REAL,
    time_limit_s REAL, deadline_s REAL, deadline_source TEXT,
    array_tasks INTEGER NOT NULL DEFAULT 1,   -- a job array: its number of tasks, all checked
    action TEXT NOT NULL,            -- accept | reject | modify | error (what the service answered)
    would_action TEXT NOT NULL,      -- what the policy decided (differs from action in shadow mode)
    policy TEXT, reason TEXT, message TEXT,
    planned_start_s REAL, planned_end_s REAL, planned_nodes TEXT, energy_j REAL,
    shadow INTEGER NOT NULL, decide_us REAL,
    view_age_s REAL,                 -- how old the cluster view was when deciding
    hook_instance TEXT, request_id INTEGER,   -- which job_submit.lua load and which of its requests
    applied INTEGER NOT NULL DEFAULT 1,       -- 0: the hook reported it gave up waiting for this answer
    job_id TEXT,                     -- the Slurm job that carries this decision's tag (set by reconciliation)
    earliest_start_s REAL,           -- with a forecast: the earliest start the job could have had
    renewable_share REAL,            -- ... the renewable share of its power where it was planned
    renewable_share_earliest REAL,   -- ... and at its earliest start
    begin_set_s REAL,                -- the begin time the answer set (a job moved into greener hours)
    supply_age_s REAL, supply_note TEXT    -- how old the forecast was, and whether it was used
);
CREATE TABLE IF NOT EXISTS reconciled (
    job_id TEXT NOT NULL, deadline_s REAL NOT NULL, time_s REAL NOT NULL, action TEXT NOT NULL, message TEXT,
    PRIMARY KEY (job_id, deadline_s)
);
CREATE TABLE IF NOT EXISTS supply (         -- the renewable forecasts read, newest first from its first sample on
    time_s REAL PRIMARY KEY, watts REAL NOT NULL, produced_s REAL, source TEXT
);
CREATE TABLE IF NOT EXISTS runs (           -- every job seen running, for energy accounting
    job_id TEXT NOT NULL, start_s REAL NOT NULL, user TEXT, account TEXT, partition TEXT,
    nodes TEXT, cpus TEXT, gpus TEXT,        -- per node, comma-separated
    end_s REAL,                              -- NULL while it runs (or if its end was never seen)
    state TEXT, last_seen_s REAL NOT NULL,
    energy_j REAL,                           -- the estimate, once it ended
    measured_j REAL,                         -- Slurm's measured energy, where an energy plugin gives one
    PRIMARY KEY (job_id, start_s)
);
CREATE TABLE IF NOT EXISTS nodes (name TEXT PRIMARY KEY, cpus INTEGER, gpus INTEGER, last_seen_s REAL);
CREATE TABLE IF NOT EXISTS node_power (       -- a node's power state (the replay's ON 0, OFF 1, BOOTING 2) from then on
    name TEXT NOT NULL, time_s REAL NOT NULL, state INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS hook_failures (  -- each job_submit.lua load's running failure count, as last reported
    hook_instance TEXT PRIMARY KEY, total INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS hook_leftovers (  -- each line job_submit.lua never renamed, counted once (failures_file)
    name TEXT PRIMARY KEY, hook_instance TEXT NOT NULL, after INTEGER NOT NULL, upto INTEGER NOT NULL,
    count INTEGER NOT NULL, time_s REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    time_s REAL NOT NULL, kind TEXT NOT NULL, count INTEGER NOT NULL, detail TEXT
);
"""

COLUMNS = ("id", "token", "time_s", "uid", "user", "partition", "cpus", "nodes", "gpus_per_node", "time_limit_s",
           "deadline_s", "deadline_source", "array_tasks", "action", "would_action", "policy", "reason", "message",
           "planned_start_s", "planned_end_s", "planned_nodes", "energy_j", "shadow", "decide_us", "view_age_s",
           "hook_instance", "request_id", "earliest_start_s", "renewable_share", "renewable_share_earliest",
           "begin_set_s", "supply_age_s", "supply_note")
# columns added after the first release: a record made before gets them (ALTER TABLE) when opened
ADDED_COLUMNS = {"earliest_start_s": "REAL", "renewable_share": "REAL", "renewable_share_earliest": "REAL",
                 "begin_set_s": "REAL", "supply_age_s": "REAL", "supply_note": "TEXT"}

ROW_DEFAULTS = {"token": "", "array_tasks": 1, "shadow": 0}
# reconciliation's rows: written before acting with this suffix, replaced by the outcome after
IN_PROGRESS = " (in progress)"
FAILED = "failed"


def read_only_uri(database: str) -> str:
    """The SQLite URI that opens ``database`` read-only: its absolute path percent-encoded, so that a
    ``?`` or ``#`` in a folder's or the file's name stays part of the name (``file:{path}?mode=ro``
    read ``a?b.sqlite`` as the file ``a`` with a query, and opened -- or created -- ``a`` read-write).

    >>> read_only_uri("/srv/hook?x#1 %.sqlite")
    'file:///srv/hook%3Fx%231%20%25.sqlite?mode=ro'
    """
    return f"{Path(database).absolute().as_uri()}?mode=ro"


def create_private(path: str) -> None:
    """Create ``path`` 0600 if it does not exist; tighten it (and SQLite's -wal/-shm) if it does."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    os.close(fd)
    for name in (path, path + "-wal", path + "-shm"):
        try:
            mode = stat.S_IMODE(os.stat(name).st_mode)
        except FileNotFoundError:
            continue
        if mode & 0o077:
            log.warning("%s was mode %04o; made 0600", name, mode)
            os.chmod(name, 0o600)


def _clean(text) -> str:
    """A string SQLite can store: bytes Slurm printed that are not UTF-8 (kept as surrogate escapes)
    become U+FFFD, never an error that would lose the row."""
    text = str(text)
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    except UnicodeEncodeError:           # a surrogate no byte maps to
        return text.encode("utf-8", "replace").decode("utf-8")


WAL_BACKSTOP_PAGES = 20000
IDS_PER_STATEMENT = 900      # under SQLite's smallest limit of parameters in one statement (999), with the instance


class DecisionRecord:
    def __init__(self, path: str | Path, sync: str = "full") -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            create_private(self.path)
        old_umask = os.umask(0o077)              # SQLite's -wal and -shm files too
        try:
            self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute(f"PRAGMA synchronous={'FULL' if sync == 'full' else 'NORMAL'}")
            # SQLite copies the write-ahead log into the database (a checkpoint, with its fsyncs) on the
            # commit that crosses this many pages: the service checkpoints from its sync loop instead
            # (:meth:`checkpoint`), so no answer waits for one; this is only the backstop (80 MB)
            self.db.execute(f"PRAGMA wal_autocheckpoint={WAL_BACKSTOP_PAGES}")
            self.db.executescript(SCHEMA)
            have = {row[1] for row in self.db.execute("PRAGMA table_info(decisions)")}
            for name, kind in ADDED_COLUMNS.items():
                if name not in have:
                    self.db.execute(f"ALTER TABLE decisions ADD COLUMN {name} {kind}")
        finally:
            os.umask(old_umask)
        self._insert = (f"INSERT INTO decisions ({','.join(COLUMNS)}) VALUES ({','.join('?' * len(COLUMNS))})")

    def next_id(self) -> int:
        row = self.db.execute("SELECT COALESCE(MAX(id), 0) FROM decisions").fetchone()
        return int(row[0]) + 1

    def add(self, row: dict) -> None:
        """Commit one decision (before its answer is sent)."""
        row = {**ROW_DEFAULTS, **{k: v for k, v in row.items() if v is not None}}
        self.db.execute(self._insert, tuple(row.get(c) for c in COLUMNS))

    def checkpoint(self) -> None:
        """Copy the write-ahead log into the database (SQLite's passive checkpoint: it never waits for
        or blocks a writer) on a connection of its own, so that a worker thread of the sync loop can do
        it while decisions go on.  Every decision is durable in the log before that, as before."""
        if self.path == ":memory:":
            return
        db = sqlite3.connect(self.path, timeout=1.0)
        try:
            db.execute("PRAGMA wal_checkpoint(PASSIVE)")
        finally:
            db.close()

    def mark_not_applied(self, hook_instance: str, request_ids: list[int]) -> int:
        """The hook gave up waiting for these answers: their decisions were not applied.  The ids go
        in groups of :data:`IDS_PER_STATEMENT` (a long outage is one range of tens of thousands of
        request numbers; SQLite before 3.32 takes at most 999 parameters in a statement, later ones
        32,766 unless built otherwise)."""
        marked = 0
        for start in range(0, len(request_ids), IDS_PER_STATEMENT):
            group = request_ids[start:start + IDS_PER_STATEMENT]
            cursor = self.db.execute("UPDATE decisions SET applied = 0 WHERE hook_instance = ? AND request_id IN "
                                     f"({','.join('?' * len(group))})", (hook_instance, *group))
            marked += cursor.rowcount
        return marked

    def not_applied(self, hook_instance: str, request_id) -> None:
        """The hook gave up waiting for this request before its decision was recorded (a queued request
        answered late): its row says so."""
        self.db.execute("UPDATE decisions SET applied = 0 WHERE hook_instance = ? AND request_id = ?",
                        (hook_instance, request_id))

    def note_failures(self, hook_instance: str, total: int, detail: str | None = None,
                      inherited: tuple[tuple[str, int, int], ...] = ()) -> int:
        """A hook load's running failure count; returns how many of them are new (a request queued
        while the service was stopped repeats a total already counted: 0 then; a leftover line
        already counted some: :meth:`fold`).  ``inherited``: what the load's first totals are, the
        failures of earlier loads it read back (:meth:`Kept.inherited`): each counts as those loads'
        totals, beyond what they reported (a report recorded whose answer came too late) or a
        leftover held, and the load's own totals begin after them.  With ``detail``, the new ones
        are a ``fail_open`` event in the same transaction as the totals (a service killed in between
        leaves neither: the hook, never answered, reports the total again)."""
        with self.db:
            self.db.execute("BEGIN")
            count = 0
            for earlier, earlier_total, earlier_count in inherited:
                count += self._count_totals(earlier, earlier_total - earlier_count, earlier_total)
            count += self._count_totals(hook_instance, sum(n for _, _, n in inherited), int(total))
            if detail is not None and count > 0:
                self.event("fail_open", count, detail)
        return count

    def _count_totals(self, hook_instance: str, after: int, upto: int) -> int:
        """Note the load's running totals ``(after, upto]`` as reported; how many of them neither an
        earlier report nor a leftover counted (within the caller's transaction)."""
        known = self._reported_total(hook_instance)
        if upto <= known:
            return 0
        self.db.execute("INSERT OR REPLACE INTO hook_failures VALUES (?, ?)", (hook_instance, int(upto)))
        return uncovered(max(after, known), int(upto), self._folded(hook_instance))

    def fold(self, name: str, kept: Kept, request_ids: list[int] = ()) -> int | None:
        """Count once the failures of a line job_submit.lua wrote as ``name`` and never renamed over
        its file (:class:`~greenslurm.slurm_plugin.failures_file.Leftover`): its own running totals
        (:attr:`Kept.own_totals`) that neither the load's reports nor another leftover counted; the
        load's later reports skip them; the decisions of ``request_ids`` (its requests never answered
        in time) are marked not applied.  The line's row, its ``fail_open`` event and the marks are
        one transaction (a failure in between leaves the line to the next try, whole).  None when
        ``name`` was folded before, or the line does not say its totals (an earlier script's)."""
        totals = kept.own_totals
        if totals is None:
            return None
        after, upto = totals
        with self.db:
            self.db.execute("BEGIN")
            if self.db.execute("SELECT 1 FROM hook_leftovers WHERE name = ?", (name,)).fetchone():
                return None
            count = uncovered(max(after, self._reported_total(kept.instance)), upto, self._folded(kept.instance))
            self.db.execute("INSERT INTO hook_leftovers VALUES (?, ?, ?, ?, ?, ?)",
                            (name, kept.instance, after, upto, count, time.time()))
            self.mark_not_applied(kept.instance, list(request_ids))
            if count > 0:
                self.event("fail_open", count, f"hook {kept.instance}: {name}, never renamed (failures "
                                               f"{after + 1}-{upto} of that load)")
        return count

    def folded(self) -> set[str]:
        """The names of the leftover lines counted so far."""
        return {row[0] for row in self.db.execute("SELECT name FROM hook_leftovers")}

    def _reported_total(self, hook_instance: str) -> int:
        row = self.db.execute("SELECT total FROM hook_failures WHERE hook_instance = ?", (hook_instance,)).fetchone()
        return int(row[0]) if row else 0

    def _folded(self, hook_instance: str) -> list[tuple[int, int]]:
        return [(int(a), int(b)) for a, b in self.db.execute(
            "SELECT after, upto FROM hook_leftovers WHERE hook_instance = ?", (hook_instance,))]

    def settle_applied(self, carried: dict[int, tuple[str, str, int | None, str]], since_s: float,
                       before_s: float) -> int:
        """Decisions answered ``modify`` (a tag appended to the comment) from ``since_s`` to ``before_s``
        that no job Slurm shows carries: Slurm refused the job after the answer, so they were not
        applied.  ``carried``: decision id -> (job id, token, uid, user) of every job seen with a tag
        (lowest job id first; a tag counts for the job whose token and user match).  Returns the number
        of decisions marked."""
        records = self.tagged(sorted(carried))
        for decision_id, (job_id, token, uid, user) in carried.items():
            rec = records.get(decision_id)
            if rec is None or rec["token"] != token or rec["job_id"] is not None:
                continue
            same = int(uid) == int(rec["uid"]) if uid is not None and rec["uid"] is not None else user == rec["user"]
            if same:
                self.claim(decision_id, job_id)
        cursor = self.db.execute("UPDATE decisions SET applied = 0 WHERE action = 'modify' AND job_id IS NULL "
                                 "AND applied = 1 AND time_s >= ? AND time_s < ?", (since_s, before_s))
        return cursor.rowcount

    def note_supply(self, forecast) -> bool:
        """Keep a forecast's samples (for the energy report): from its first sample on it replaces
        what earlier forecasts said; before it, their samples stay (the supply's history).  Done
        once per forecast read; True when written."""
        series = forecast.series
        key = (forecast.source, forecast.produced_s)
        if series is None or key == getattr(self, "_supply_noted", None):
            return False
        with self.db:
            self.db.execute("BEGIN")
            self.db.execute("DELETE FROM supply WHERE time_s >= ?", (float(series.times_s[0]),))
            self.db.executemany("INSERT INTO supply VALUES (?, ?, ?, ?)",
                                ((t, w, forecast.produced_s, forecast.source)
                                 for t, w in zip(series.times_s.tolist(), series.watts.tolist())))
        self._supply_noted = key
        return True

    def supply(self):
        """The supply series kept (None when no forecast was ever read)."""
        rows = self.db.execute("SELECT time_s, watts FROM supply ORDER BY time_s").fetchall()
        if not rows:
            return None
        from greenslurm.clustermodel.renewable import SupplySeries
        return SupplySeries([r[0] for r in rows], [r[1] for r in rows], "recorded forecast")

    def note_runs(self, runs, nodes, now_s: float, energy_of) -> int:
        """Keep the jobs Slurm shows running or ended (and the nodes): a new run is added, a known one
        gets its end, state and the time it was last seen; ``energy_of(run)`` gives the estimate of
        a run that ended (stored once).  Returns the number of runs written."""
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany("INSERT OR REPLACE INTO nodes VALUES (?, ?, ?, ?)",
                                ((_clean(n.name), int(n.cpus), int(n.gpus), now_s) for n in nodes))
            rows = []
            for run in runs:
                energy = energy_of(run) if run.end_s is not None else None
                rows.append((_clean(run.job_id), run.start_s, _clean(run.user), _clean(run.account),
                             _clean(run.partition), _clean(",".join(run.nodes)), ",".join(f"{c:g}" for c in run.cpus),
                             ",".join(f"{g:g}" for g in run.gpus), run.end_s, _clean(run.state), now_s, energy))
            # a run of the same job seen before with another start and no end was not its run (Slurm
            # moves a job's start when it requeues it or waits for its nodes): it goes
            self.db.executemany("DELETE FROM runs WHERE job_id = ? AND start_s != ? AND end_s IS NULL",
                                ((row[0], row[1]) for row in rows))
            self.db.executemany(
                "INSERT INTO runs (job_id, start_s, user, account, partition, nodes, cpus, gpus, end_s, state, "
                "last_seen_s, energy_j) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (job_id, start_s) DO UPDATE SET end_s = COALESCE(runs.end_s, excluded.end_s), "
                "state = excluded.state, last_seen_s = excluded.last_seen_s, nodes = excluded.nodes, "
                "cpus = excluded.cpus, gpus = excluded.gpus, energy_j = COALESCE(runs.energy_j, excluded.energy_j)",
                rows)
        return len(rows)

    def unmeasured(self, limit: int = 200) -> list[str]:
        """Ended runs without a measured energy, newest first (the ones sacct may know about)."""
        return [r[0] for r in self.db.execute("SELECT job_id FROM runs WHERE end_s IS NOT NULL AND measured_j IS NULL "
                                              "ORDER BY end_s DESC LIMIT ?", (limit,))]

    def note_power_states(self, states: dict[str, int], now_s: float) -> int:
        """Keep each node's power state when it changed since the last one kept (for the report)."""
        last = getattr(self, "_power_states", None)
        if last is None:
            last = {}
            for name, state in self.db.execute("SELECT name, state FROM node_power ORDER BY time_s"):
                last[name] = state
            self._power_states = last
        changed = [(_clean(name), now_s, int(state)) for name, state in states.items() if last.get(name) != state]
        if changed:
            self.db.executemany("INSERT INTO node_power VALUES (?, ?, ?)", changed)
            last.update({name: state for name, _, state in changed})
        return len(changed)

    def set_measured(self, measured: dict[str, float]) -> None:
        """Slurm's measured energy of runs (the latest run of each job id)."""
        with self.db:
            self.db.execute("BEGIN")
            self.db.executemany("UPDATE runs SET measured_j = ? WHERE job_id = ? AND end_s IS NOT NULL AND start_s = "
                                "(SELECT MAX(start_s) FROM runs WHERE job_id = ?)",
                                ((j, job_id, job_id) for job_id, j in measured.items()))

    def runs(self) -> list[dict]:
        cursor = self.db.execute("SELECT * FROM runs ORDER BY start_s, job_id")
        names = [d[0] for d in cursor.description]
        return [dict(zip(names, r)) for r in cursor]

    def nodes(self) -> dict[str, dict]:
        return {r[0]: {"cpus": r[1], "gpus": r[2]} for r in self.db.execute("SELECT name, cpus, gpus FROM nodes")}

    def event(self, kind: str, count: int, detail: str = "") -> None:
        self.db.execute("INSERT INTO events VALUES (?, ?, ?, ?)", (time.time(), kind, count, detail))

    def events(self, kind: str) -> int:
        row = self.db.execute("SELECT COALESCE(SUM(count), 0) FROM events WHERE kind = ?", (kind,)).fetchone()
        return int(row[0])

    # -- reconciliation ---------------------------------------------------------------------------
    def tagged(self, ids: list[int]) -> dict[int, dict]:
        """The decisions with these ids (for checking a comment's tags)."""
        names = ("id", "token", "uid", "user", "deadline_s", "time_limit_s", "cpus", "array_tasks", "job_id",
                 "would_action", "time_s", "nodes", "gpus_per_node", "planned_nodes")
        return {r[0]: dict(zip(names, r)) for r in self._select_in("decisions", names, "id", ids)}

    def _select_in(self, table: str, columns: tuple[str, ...], key: str, values: list) -> list[tuple]:
        """Rows of ``table`` whose ``key`` is one of ``values``, in statements of at most 500
        parameters (SQLite caps the number of parameters of a statement)."""
        rows: list[tuple] = []
        for start in range(0, len(values), 500):
            chunk = values[start:start + 500]
            rows += self.db.execute(f"SELECT {','.join(columns)} FROM {table} WHERE {key} IN "
                                    f"({','.join('?' * len(chunk))})", chunk).fetchall()
        return rows

    def claim(self, decision_id: int, job_id: str) -> None:
        self.db.execute("UPDATE decisions SET job_id = ? WHERE id = ? AND job_id IS NULL", (job_id, decision_id))

    def reconciled(self, job_ids: list[str]) -> set[tuple[str, float]]:
        """The (job, deadline) pairs already acted on, among these jobs (not the whole table, which
        grows with every job ever reconciled).  A row of an action begun but not known done
        (``IN_PROGRESS``: the service may have died between the two writes) or that failed does not
        count: the job is looked at again."""
        rows = self._select_in("reconciled", ("job_id", "deadline_s", "action"), "job_id", job_ids)
        return {(job_id, deadline_s) for job_id, deadline_s, action in rows
                if action != FAILED and not action.endswith(IN_PROGRESS)}

    def add_reconciled(self, job_id: str, deadline_s: float, action: str, message: str) -> None:
        """Record what reconciliation did (or, ``action + IN_PROGRESS``, is about to do) to a job."""
        self.db.execute("INSERT OR REPLACE INTO reconciled VALUES (?, ?, ?, ?, ?)",
                        (job_id, deadline_s, time.time(), action, message))

    def rows(self, where: str = "", args: tuple = ()) -> list[dict]:
        cursor = self.db.execute(f"SELECT {','.join(COLUMNS)}, applied, job_id FROM decisions {where} ORDER BY id", args)
        return [dict(zip(COLUMNS + ("applied", "job_id"), r)) for r in cursor]

    def close(self) -> None:
        self.db.close()

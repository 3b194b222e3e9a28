"""Every decision the service takes (or, in shadow mode, would have taken), in SQLite.

Rows are kept in memory as decisions are made and written in batches by :meth:`DecisionRecord.flush`
(the service flushes every 0.2 s, off the decision path; WAL journal), so recording costs
microseconds per submission.  The record lets the service continue after a restart: decision
numbers go on from the last one, and jobs already reconciled are not acted on twice.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY,
    time_s REAL NOT NULL,
    user TEXT, partition TEXT, cpus INTEGER, nodes INTEGER, gpus_per_node REAL,
    time_limit_s REAL, deadline_s REAL, deadline_source TEXT,
    action TEXT NOT NULL,            -- accept | reject | modify (what the service answered)
    would_action TEXT NOT NULL,      -- what the policy decided (differs from action in shadow mode)
    policy TEXT, reason TEXT, message TEXT,
    planned_start_s REAL, planned_end_s REAL, planned_nodes TEXT, energy_j REAL,
    shadow INTEGER NOT NULL, decide_us REAL
);
CREATE TABLE IF NOT EXISTS reconciled (
    job_id TEXT PRIMARY KEY, time_s REAL NOT NULL, action TEXT NOT NULL, message TEXT
);
"""

COLUMNS = ("id", "time_s", "user", "partition", "cpus", "nodes", "gpus_per_node", "time_limit_s", "deadline_s",
           "deadline_source", "action", "would_action", "policy", "reason", "message", "planned_start_s",
           "planned_end_s", "planned_nodes", "energy_j", "shadow", "decide_us")


class DecisionRecord:
    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        if self.path != ":memory:":
            Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.executescript(SCHEMA)
        self.buffer: list[tuple] = []
        self.pending_rows = 0
        self.last_flush = time.monotonic()

    def next_id(self) -> int:
        row = self.db.execute("SELECT COALESCE(MAX(id), 0) FROM decisions").fetchone()
        return int(row[0]) + 1

    def add(self, row: dict) -> None:
        self.buffer.append(tuple(row.get(c) for c in COLUMNS))
        self.pending_rows += 1

    def reconciled(self) -> set[str]:
        self.flush()
        return {r[0] for r in self.db.execute("SELECT job_id FROM reconciled")}

    def add_reconciled(self, job_id: str, action: str, message: str) -> None:
        self.db.execute("INSERT OR REPLACE INTO reconciled VALUES (?, ?, ?, ?)", (job_id, time.time(), action, message))

    def flush(self) -> None:
        """Write the buffered rows in one transaction."""
        if self.buffer:
            rows, self.buffer = self.buffer, []
            with self.db:
                self.db.execute("BEGIN")
                self.db.executemany(f"INSERT INTO decisions ({','.join(COLUMNS)}) VALUES "
                                    f"({','.join('?' * len(COLUMNS))})", rows)
        self.pending_rows = 0
        self.last_flush = time.monotonic()

    def rows(self, where: str = "", args: tuple = ()) -> list[dict]:
        self.flush()
        cursor = self.db.execute(f"SELECT {','.join(COLUMNS)} FROM decisions {where} ORDER BY id", args)
        return [dict(zip(COLUMNS, r)) for r in cursor]

    def close(self) -> None:
        self.flush()
        self.db.close()

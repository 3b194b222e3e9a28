"""Jobs as columns: a :class:`JobTable` holds what a trace reader read (ids, times, processors,
labels, source lines and the reader's other columns) as numpy arrays, about 160 bytes a job for an
SWF log where a :class:`JobSpec` takes about 600, and builds a ``JobSpec`` only when one is asked
for (:class:`JobRows`, a read-only sequence over the table).

A job's ``JobSpec`` from a table is the one the reader built before the table existed, field by
field: id, submit time, time limit, run time, processors (``nodes`` 0: the cluster decides the
shape), user, partition, state, source line, and ``extra``, a read-only mapping of the other columns.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from greenslurm.clustermodel.job import JobSpec

MAX_ID_DIGITS = 18          # 10**18 - 1 < 2**63: every id of up to 18 digits fits an int64


def is_plain_number(job_id: str) -> bool:
    """Whether ``job_id`` is the decimal form of a number (ASCII digits, no sign, no leading zero),
    so that it can be kept as an int64 and written back as the same text.

    >>> [is_plain_number(s) for s in ("0", "42", "042", "-1", "4_2", "\\u0663", "1" * 19)]
    [True, True, False, False, False, False, False]
    """
    return (job_id.isdigit() and job_id.isascii() and len(job_id) <= MAX_ID_DIGITS
            and (job_id[0] != "0" or len(job_id) == 1))


def id_column(ids: Sequence[str]) -> np.ndarray:
    """Job ids as an int64 array when every one is a plain number (:func:`is_plain_number`), else
    as an object array of the strings themselves (shared, not copied).

    >>> id_column(["3", "10"]).dtype, id_column(["3", "a"]).dtype
    (dtype('int64'), dtype('O'))
    """
    if all(map(is_plain_number, ids)):
        return np.fromiter(map(int, ids), np.int64, len(ids))
    column = np.empty(len(ids), dtype=object)
    column[:] = list(ids)
    return column


def id_texts(ids: np.ndarray) -> list[str]:
    """The ids of :func:`id_column` as strings again.

    >>> id_texts(id_column(["7", "12"])), id_texts(id_column(["x", "12"]))
    (['7', '12'], ['x', '12'])
    """
    return list(map(str, ids.tolist())) if ids.dtype != object else ids.tolist()


COMPACT_ROWS = 65536       # rows compared at a time by compact_floats


def compact_floats(values: np.ndarray) -> np.ndarray:
    """``values`` (float64) as float32 when every value is a float32 exactly (then float32 gives
    back the same doubles), else as they are; compared a block of rows at a time, so the work
    arrays stay small.

    >>> compact_floats(np.array([[-1.0, 489.0], [2.5, 1e6]])).dtype, compact_floats(np.array([0.1])).dtype
    (dtype('float32'), dtype('float64'))
    """
    out = np.empty(values.shape, dtype=np.float32)
    for lo in range(0, len(values), COMPACT_ROWS):
        block = values[lo:lo + COMPACT_ROWS]
        with np.errstate(over="ignore"):          # beyond float32's range: inf, not equal, kept wide
            narrow = block.astype(np.float32)
        if not np.array_equal(narrow.astype(np.float64), block):     # NaN is never equal: kept wide
            return values
        out[lo:lo + COMPACT_ROWS] = narrow
    return out


class ExtraRow(Mapping):
    """One job's other columns by name: a read-only mapping over doubles (``names``: the column
    names in order, ``position``: name -> index, shared by every row of a table).

    >>> row = ExtraRow(array("d", [3.0, -1.0]), ("wait_s", "queue"), {"wait_s": 0, "queue": 1})
    >>> row["wait_s"], row.get("queue"), "cpu_milli" in row, dict(row)
    (3.0, -1.0, False, {'wait_s': 3.0, 'queue': -1.0})
    """

    __slots__ = ("_values", "_names", "_position")

    def __init__(self, values: array, names: tuple[str, ...], position: dict[str, int]) -> None:
        self._values = values
        self._names = names
        self._position = position

    def __getitem__(self, key: str) -> float:
        return self._values[self._position[key]]

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __repr__(self) -> str:
        return repr(dict(self))


@dataclass
class JobTable:
    """Jobs as columns, one row a job.

    ``job_id`` is int64 when every id is the decimal form of its number, else an object array of
    strings.  ``user``, ``partition`` and ``state`` are codes into the label tuples ``users``,
    ``partitions`` and ``states``.  ``extra`` holds one row of floats per job, its columns named by
    ``extra_names`` (each row is a job's ``JobSpec.extra``), float64, or float32 when every value is
    a float32 exactly (:func:`compact_floats`: the same doubles come back).

    >>> t = JobTable.from_specs([JobSpec("7", 5.0, 60.0, runtime_s=90.0, cpus=4, user="ann"),
    ...                          JobSpec("x", 1.0, 60.0, runtime_s=30.0, cpus=1)])
    >>> jobs = t.rows()
    >>> len(jobs), jobs[0].job_id, jobs[0].user, jobs[1].job_id, jobs[0].killed_at_limit
    (2, '7', 'ann', 'x', True)
    >>> [j.job_id for j in t.take(np.array([1, 0])).rows()]
    ['x', '7']
    """

    job_id: np.ndarray
    submit_s: np.ndarray
    requested_time_s: np.ndarray
    runtime_s: np.ndarray
    cpus: np.ndarray                     # float64 of whole numbers (a count beyond int64 stays exact)
    user: np.ndarray                     # int32 codes into users
    partition: np.ndarray                # int32 codes into partitions
    state: np.ndarray                    # int8 codes into states
    source_line: np.ndarray              # int64
    extra: np.ndarray                    # float64 or float32 (jobs, len(extra_names))
    users: tuple[str, ...]
    partitions: tuple[str, ...]
    states: tuple[str, ...]
    extra_names: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.submit_s)

    def __post_init__(self) -> None:
        self._extra_position = {name: i for i, name in enumerate(self.extra_names)}

    @classmethod
    def from_specs(cls, jobs: Sequence[JobSpec]) -> "JobTable":
        """A table of plain jobs (id, times, processors, user, partition, state, source line; no
        extra columns): for tests and examples."""
        n = len(jobs)

        def coded(values: list[str]) -> tuple[np.ndarray, tuple[str, ...]]:
            labels = {value: code for code, value in enumerate(dict.fromkeys(values))}
            return np.fromiter(map(labels.__getitem__, values), np.int32, n), tuple(labels)

        user, users = coded([j.user for j in jobs])
        partition, partitions = coded([j.partition for j in jobs])
        state, states = coded([j.state for j in jobs])
        return cls(id_column([j.job_id for j in jobs]), np.fromiter((j.submit_s for j in jobs), float, n),
                   np.fromiter((j.requested_time_s for j in jobs), float, n),
                   np.fromiter((j.runtime_s for j in jobs), float, n), np.fromiter((j.cpus for j in jobs), float, n),
                   user, partition, state.astype(np.int8), np.fromiter((j.source_line for j in jobs), np.int64, n),
                   np.zeros((n, 0)), users, partitions, states)

    def take(self, rows: np.ndarray) -> "JobTable":
        """The table of ``rows`` (in that order)."""
        return JobTable(self.job_id[rows], self.submit_s[rows], self.requested_time_s[rows], self.runtime_s[rows],
                        self.cpus[rows], self.user[rows], self.partition[rows], self.state[rows],
                        self.source_line[rows], self.extra[rows], self.users, self.partitions, self.states,
                        self.extra_names)

    def spec(self, i: int) -> JobSpec:
        """Row ``i`` as the reader's ``JobSpec``."""
        extra = ExtraRow(array("d", self.extra[i].astype(np.float64).tobytes()), self.extra_names,
                         self._extra_position)
        return JobSpec(job_id=str(self.job_id[i]), submit_s=float(self.submit_s[i]),
                       requested_time_s=float(self.requested_time_s[i]), runtime_s=float(self.runtime_s[i]),
                       cpus=int(self.cpus[i]), nodes=0, user=self.users[self.user[i]],
                       partition=self.partitions[self.partition[i]], state=self.states[self.state[i]],
                       source_line=int(self.source_line[i]), extra=extra)

    def specs(self, start: int, stop: int) -> list[JobSpec]:
        """Rows ``start:stop`` as ``JobSpec`` objects (one call for many rows: faster than :meth:`spec`)."""
        part = slice(start, stop)
        ids = self.job_id[part].tolist()
        users, partitions, states = self.users, self.partitions, self.states
        names, position = self.extra_names, self._extra_position
        extras = self.extra[part].astype(np.float64)
        width = extras.shape[1] * 8
        blob = extras.tobytes()
        return [JobSpec(job_id=str(job_id), submit_s=submit, requested_time_s=requested, runtime_s=runtime,
                        cpus=int(cpus), nodes=0, user=users[user], partition=partitions[partition], state=states[state],
                        source_line=line, extra=ExtraRow(array("d", blob[k * width:(k + 1) * width]), names, position))
                for k, (job_id, submit, requested, runtime, cpus, user, partition, state, line) in enumerate(zip(
                    ids, self.submit_s[part].tolist(), self.requested_time_s[part].tolist(),
                    self.runtime_s[part].tolist(), self.cpus[part].tolist(), self.user[part].tolist(),
                    self.partition[part].tolist(), self.state[part].tolist(), self.source_line[part].tolist()))]

    def rows(self) -> "JobRows":
        """The jobs as a read-only sequence of ``JobSpec`` built on demand."""
        return JobRows(self)

    def take_columns(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        """What a replay's result keeps of the jobs ``rows`` (see ``JobColumns.gather``): ids, submit
        times, time limits, whether the job ran into its limit, deadlines (none here: NaN), user and
        partition as object arrays of the shared label strings."""
        users = np.empty(len(self.users), dtype=object)
        users[:] = self.users
        partitions = np.empty(len(self.partitions), dtype=object)
        partitions[:] = self.partitions
        requested = self.requested_time_s[rows]
        return {"job_id": self.job_id[rows], "submit_s": self.submit_s[rows], "requested_time_s": requested,
                "killed_at_limit": self.runtime_s[rows] > requested, "deadline_s": np.full(len(rows), np.nan),
                "user": users[self.user[rows]], "partition": partitions[self.partition[rows]]}


BLOCK = 4096       # rows built at a time when iterating


class JobRows(Sequence):
    """A :class:`JobTable`'s jobs as a read-only sequence of ``JobSpec``, each built when asked for
    (a slice is a list).  :attr:`table` gives the columns themselves.

    >>> jobs = JobTable.from_specs([JobSpec("1", 0.0, 10.0, runtime_s=5.0)]).rows()
    >>> jobs[-1].job_id, [j.runtime_s for j in jobs], jobs == [JobSpec("1", 0.0, 10.0, runtime_s=5.0)]
    ('1', [5.0], True)
    """

    __slots__ = ("table",)

    def __init__(self, table: JobTable) -> None:
        self.table = table

    def __len__(self) -> int:
        return len(self.table)

    def __getitem__(self, index):
        if isinstance(index, slice):
            start, stop, step = index.indices(len(self.table))
            if step == 1:
                return self.table.specs(start, max(start, stop))
            return [self.table.spec(i) for i in range(start, stop, step)]
        n = len(self.table)
        i = index + n if index < 0 else index
        if not 0 <= i < n:
            raise IndexError("job index out of range")
        return self.table.spec(i)

    def __iter__(self) -> Iterator[JobSpec]:
        for start in range(0, len(self.table), BLOCK):
            yield from self.table.specs(start, start + BLOCK)

    def __eq__(self, other) -> bool:
        if isinstance(other, (JobRows, list, tuple)):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other))
        return NotImplemented

    __hash__ = None

    def __repr__(self) -> str:
        return f"<{len(self)} jobs of a job table>"

    def head(self, count: int) -> "JobRows":
        """The first ``count`` jobs, still a view of columns."""
        return JobRows(self.table.take(slice(0, count)))

    def take_columns(self, rows: np.ndarray) -> dict[str, np.ndarray]:
        return self.table.take_columns(rows)

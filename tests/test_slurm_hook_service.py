"""The decision service on its UNIX socket, without Slurm: the real ``greenslurm hook serve`` process
on a cluster state recorded from the real daemons (``tests/data/slurm-hook``: ``sinfo --json`` and
``squeue --json`` of the test cluster, 4 nodes, two with 2 GPUs).  Bad input, config errors, the
protocol's parsing, and a bounded load test."""

from __future__ import annotations

import doctest
import json
import os
import re
import socket
import threading
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from greenslurm.clustermodel import InputError
from hook_service import ServiceProcess, recorded_decisions, write_config
from greenslurm.slurm_plugin import backend, backend_pyslurm, install, protocol, slurm_json
from greenslurm.slurm_plugin.protocol import MAX_REQUEST_BYTES, ProtocolError, parse_request, submission_from_request
from greenslurm.slurm_plugin.service import HookConfig

STATE = Path(__file__).parent / "data" / "slurm-hook"


@pytest.mark.parametrize("module", [protocol, slurm_json, backend_pyslurm])
def test_doctests(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def exchange(path: str, payload: bytes, timeout_s: float = 5.0) -> dict:
    return install.exchange(path, payload, timeout_s)


def submit(i: int, deadline: str | None, now: float) -> bytes:
    request = {"op": "submit", "id": i, "user": "ana", "min_cpus": 1 + i % 4, "num_tasks": 4294967294,
               "cpus_per_task": 65534, "min_nodes": 4294967294, "time_limit": 10, "submit_time": int(now),
               "tres_per_node": "gres:gpu:1" if i % 5 == 0 else ""}
    if deadline is not None:
        request["deadline"] = deadline
    return (json.dumps(request) + "\n").encode()


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("hook-service")
    sock = str(root / "hook.sock")
    config = write_config(root / "hook.toml", socket=sock, socket_owner="root", database=str(root / "db.sqlite"),
                          backend="files", state_dir=str(STATE), sync_interval_s=1.0)
    proc = ServiceProcess(config, sock, root / "service.log").start()
    try:
        yield proc
    finally:
        proc.stop()


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS")


def test_socket_is_private(served):
    mode = os.stat(served.socket_path).st_mode & 0o777
    assert mode == 0o600


@pytest.mark.parametrize("payload, expected", [
    (b"not json\n", "not JSON"),
    (b"[1, 2]\n", "must be a JSON object"),
    (b'{"op": "launch"}\n', "unknown op"),
    (b'{"op": "submit", "min_cpus": -3}\n', "min_cpus must be a number >= 0"),
    (b'{"op": "submit", "features": 7}\n', "features must be a string"),
    (b'{"op": "submit", "deadline": "whenever"}\n', "not a Slurm time"),
    (b'{"op": "submit", "hook_instance": "\xff"}\n', "short UTF-8 string"),
    (b"\xff\xfe\n", "not JSON"),
])
def test_bad_requests_get_an_error_answer_and_the_service_lives(served, payload, expected):
    answer = exchange(served.socket_path, payload)
    assert answer["action"] in ("error", "reject") and expected in answer["message"]
    assert exchange(served.socket_path, b'{"op":"ping"}\n')["ok"] is True


def test_an_oversized_request_is_refused(served):
    answer = exchange(served.socket_path, b'{"features": "' + b"x" * (MAX_REQUEST_BYTES + 10) + b'"}\n')
    assert answer["action"] == "error" and "larger than" in answer["message"]
    assert exchange(served.socket_path, b'{"op":"ping"}\n')["ok"] is True


def test_a_client_that_sends_half_a_line_and_leaves_does_not_stall_others(served):
    stuck = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stuck.connect(served.socket_path)
    stuck.sendall(b'{"op": "sub')          # and never finishes
    try:
        answer = exchange(served.socket_path, submit(1, None, time.time()))
        assert answer["action"] in ("accept", "modify")
        # answered while the half line is still pending: the stuck connection is open, nothing on it
        stuck.setblocking(False)
        with pytest.raises(BlockingIOError):
            stuck.recv(1)
    finally:
        stuck.close()


def test_load_2000_requests_from_8_clients_none_lost_none_wrong_memory_flat(served):
    now = time.time()
    # warm up (imports, first allocations), then measure
    for i in range(200):
        exchange(served.socket_path, submit(100000 + i, None, now))
    before = rss_kib(served.proc.pid)
    clients, per_client = 8, 250
    results: dict[int, dict] = {}
    errors: list[str] = []
    lock = threading.Lock()

    def client(c: int) -> None:
        for k in range(per_client):
            i = c * per_client + k
            # every third job asks 10 minutes within 1 minute: must be rejected; the others have no
            # deadline: always accepted (and annotated)
            deadline = "now+60" if i % 3 == 0 else None
            try:
                answer = exchange(served.socket_path, submit(i, deadline, now))
            except OSError as exc:
                with lock:
                    errors.append(f"{i}: {exc}")
                continue
            with lock:
                results[i] = answer

    threads = [threading.Thread(target=client, args=(c,)) for c in range(clients)]
    started = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    took = time.perf_counter() - started
    after = rss_kib(served.proc.pid)
    assert not errors, errors[:5]
    assert len(results) == clients * per_client                       # none lost
    wrong = [i for i, a in results.items()
             if a.get("id") != i or a["action"] != ("reject" if i % 3 == 0 else "modify")]
    assert not wrong, [(i, results[i]) for i in wrong[:5]]            # none wrong
    assert all("cannot end by its deadline" in results[i]["message"] for i in range(0, 2000, 3))
    assert after - before < 20 * 1024, (before, after)                 # flat: < 20 MiB over 2,000 requests
    print(f"\nload: {len(results)} requests, {clients} clients, {took:.2f} s "
          f"({len(results) / took:,.0f}/s), RSS {before / 1024:.1f} -> {after / 1024:.1f} MiB")


# -- config and parsing ----------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("[hook]\nacceptance = \"lifo\"\n", "unknown acceptance policy 'lifo'"),
    ("[hook]\nallocation = \"bestfit\"\n", "renamed to 'select'"),
    ("[hook]\nselect = \"fastest\"\n", "field select"),
    ("[hook]\nfail = \"maybe\"\n", "'maybe' is not one of open, closed"),
    ("[hook]\nfail_deadline = \"never\"\n", "'never' is not one of open, closed"),
    ("[hook]\nstale = \"ignore\"\n", "'ignore' is not one of check, open, closed"),
    ("[hook]\nundecodable = \"keep\"\n", "'keep' is not one of reject, drop"),
    ("[hook]\nmax_array_tasks = 0\n", "must be >= 1"),
    ("[hook]\nmax_array_tasks = 2.5\n", "must be a whole number"),
    ("[hook]\nsync_interval_s = 30\nmax_view_age_s = 20\n", "at least sync_interval_s"),
    ("[hook]\ndatabase = \"hook.sqlite\"\n", "must be an absolute path"),
    ("[hook]\ntimeout_ms = 0\n", "must be > 0"),
    ("[hook]\ntimeout_ms = \"fast\"\n", "must be a number"),
    ("[hook]\nshadow = 1\n", "must be true or false"),
    ("[hook]\nsockett = \"/x\"\n", "unknown setting 'sockett'"),
    ("[hook]\nsocket = \"relative.sock\"\n", "must be an absolute path"),
    ("[hook\n", "not valid TOML"),
])
def test_bad_config_is_a_clear_error(tmp_path, text, expected):
    path = tmp_path / "hook.toml"
    path.write_text(text)
    with pytest.raises(InputError, match=expected.replace("(", r"\(").replace(")", r"\)")) as info:
        HookConfig.from_toml(path)
    assert str(path) in str(info.value)


def test_cli_bad_config_exits_2_with_one_line(tmp_path, capsys):
    from greenslurm.cli import main
    path = tmp_path / "hook.toml"
    path.write_text("[hook]\nreconcile = \"sometimes\"\n")
    assert main(["hook", "check", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "'sometimes' is not one of none, annotate, hold, cancel" in err and len(err.strip().splitlines()) == 1


def test_no_val_fields_are_unset_and_mem_per_cpu_is_multiplied():
    sub = submission_from_request({"id": 1, "min_cpus": 4, "min_nodes": 2, "pn_min_memory": 2 ** 63 + 500,
                                   "time_limit": 4294967294, "begin_time": 0}, now_s=10.0,
                                  default_time_limit_s=1800.0)
    assert (sub.job.nodes, sub.job.memory_mb_per_node, sub.job.requested_time_s, sub.begin_s) == (2, 1000.0, 1800.0, None)


def test_parse_request_limits():
    with pytest.raises(ProtocolError, match="too large"):
        parse_request(b"{" + b" " * MAX_REQUEST_BYTES + b"}")
    # a long user string is not an error (that would let the hook fail open): it is listed as untrusted
    assert parse_request(json.dumps({"features": "x" * 5000}).encode())["untrusted"] == {
        "features": "longer than 4096 bytes"}
    assert parse_request(json.dumps({"features": "a", "truncated": "features"}).encode())["untrusted"] == {
        "features": "longer than 4096 bytes"}


# -- what a user controls never decides; the record is durable; one service per socket ------------
def start_service(root: Path, **settings) -> ServiceProcess:
    sock = str(root / "hook.sock")
    base = dict(socket=sock, database=str(root / "db.sqlite"), backend="files", state_dir=str(STATE),
                sync_interval_s=1.0)
    base.update(settings)
    config = write_config(root / "hook.toml", **base)
    return ServiceProcess(config, sock, root / "service.log").start()


def rows(root: Path) -> list[dict]:
    return recorded_decisions(root / "db.sqlite")


def request(i: int, **fields) -> bytes:
    body = {"op": "submit", "id": i, "uid": 1000, "user": "ana", "min_cpus": 1, "time_limit": 10,
            "submit_time": int(time.time())}
    body.update(fields)
    return json.dumps(body).encode() + b"\n"


BAD_BYTES = [b"\xff", b"\x80", b"\xc0\xaf", b"\xed\xa0\x80"]     # lone byte, continuation, overlong '/', surrogate


@pytest.mark.parametrize("bad", BAD_BYTES)
@pytest.mark.parametrize("field", ["deadline_env", "deadline_script", "features", "partition", "array_inx"])
def test_undecodable_user_bytes_reject_by_default_naming_the_field(served, field, bad):
    # the raw bytes exactly as lua's json encoder sends them: high bytes are not escaped
    line = request(7, **{field: "X"}).replace(b'"X"', b'"now+60' + bad + b'"')
    answer = exchange(served.socket_path, line)
    assert answer["action"] == "reject", answer
    assert f"{field}: not valid UTF-8" in answer["message"]


def test_undecodable_field_dropped_when_configured_and_recorded(tmp_path):
    proc = start_service(tmp_path, undecodable="drop")
    try:
        # an undecodable deadline is dropped: the job is checked without it (reconciliation later sees
        # Slurm's own deadline); a readable earlier deadline still counts
        line = request(1, deadline_env="X", deadline_script="now+60").replace(b'"X"', b'"now+365days\xff"')
        answer = exchange(proc.socket_path, line)
        # 10 minutes cannot end within 60 s: rejected on the script's deadline
        assert answer["action"] == "reject" and "from script" in answer["message"], answer
        line = request(2, features="X").replace(b'"X"', b'"gpu\xff"')
        assert exchange(proc.socket_path, line)["action"] in ("accept", "modify")
    finally:
        proc.stop()
    recorded = rows(tmp_path)
    assert [r["action"] for r in recorded][0] == "reject" and recorded[0]["deadline_source"] == "script"


def test_the_earliest_of_the_deadlines_a_request_carries_is_checked(served):
    # GREENSLURM_DEADLINE says a year, the script says a minute: 10 minutes of work is rejected
    answer = exchange(served.socket_path, request(3, deadline_env="now+365days", deadline_script="now+60"))
    assert answer["action"] == "reject" and "from script" in answer["message"]
    answer = exchange(served.socket_path, request(4, deadline_env="now+60", deadline_script="now+365days"))
    assert answer["action"] == "reject" and "from cli_filter" in answer["message"]


def test_every_answer_is_in_the_record_before_it_is_sent(tmp_path):
    proc = start_service(tmp_path)
    try:
        for i in range(30):
            answer = exchange(proc.socket_path, request(i, deadline_env="now+60" if i % 2 else "now+1day"))
            # read the database from another connection right after the answer: the row is there
            assert rows(tmp_path)[-1]["id"] == answer["decision"]
    finally:
        proc.stop()
    assert os.stat(tmp_path / "db.sqlite").st_mode & 0o777 == 0o600


def test_no_decision_commit_runs_the_records_checkpoint_and_the_sync_loop_does(tmp_path):
    import sqlite3
    from greenslurm.slurm_plugin.record import WAL_BACKSTOP_PAGES, DecisionRecord
    database = tmp_path / "db.sqlite"
    record = DecisionRecord(database, sync="normal")
    try:
        base = {"token": "t", "time_s": 1.0, "user": "u", "action": "accept", "would_action": "accept"}
        # 3,000 decisions: some 3,000+ pages of log, past SQLite's default checkpoint at 1,000 pages
        for i in range(1, 3001):
            record.add(dict(base, id=i, message="x" * 200))
        wal = Path(f"{database}-wal")
        assert wal.stat().st_size > 1000 * 4096                        # no commit copied the log back
        assert wal.stat().st_size < WAL_BACKSTOP_PAGES * 4096
        main_before = database.stat().st_size
        reader = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
        assert reader.execute("SELECT COUNT(*) FROM decisions").fetchone()[0] == 3000   # durable in the log
        reader.close()
        record.checkpoint()                                            # what the sync loop runs
        assert database.stat().st_size > main_before + 3000 * 200
    finally:
        record.close()


def test_the_service_checkpoints_its_record_at_each_sync(tmp_path):
    proc = start_service(tmp_path)                 # sync_interval_s = 1
    try:
        for i in range(400):
            exchange(proc.socket_path, request(i))
        size = (tmp_path / "db.sqlite").stat().st_size
        for _ in range(100):                       # within a few syncs the log is copied into the database
            if (tmp_path / "db.sqlite").stat().st_size > size:
                break
            time.sleep(0.1)
        assert (tmp_path / "db.sqlite").stat().st_size > size
    finally:
        proc.stop()


def test_kill_9_loses_no_answered_decision_and_ids_never_repeat(tmp_path):
    proc = start_service(tmp_path)
    answered: list[int] = []
    errors: list[str] = []
    stop = threading.Event()

    def client(c: int) -> None:
        i = 0
        while not stop.is_set():
            try:
                answer = exchange(proc.socket_path, request(c * 100000 + i), timeout_s=2.0)
            except (OSError, ValueError) as exc:
                errors.append(str(exc))
                return
            if "decision" in answer:
                answered.append(answer["decision"])
            i += 1

    threads = [threading.Thread(target=client, args=(c,)) for c in range(4)]
    for t in threads:
        t.start()
    while len(answered) < 300:
        time.sleep(0.01)
    proc.proc.kill()                       # SIGKILL mid-load
    proc.proc.wait()
    stop.set()
    for t in threads:
        t.join(timeout=10)
    recorded = {r["id"] for r in rows(tmp_path)}
    assert set(answered) <= recorded, sorted(set(answered) - recorded)[:5]
    proc = start_service(tmp_path)         # the stale socket and lock of the killed one do not stop it
    try:
        answer = exchange(proc.socket_path, request(1))
    finally:
        proc.stop()
    assert answer["decision"] == max(recorded) + 1


def test_a_service_killed_with_9_leaves_no_helper_behind(tmp_path):
    from hook_service import end_dead_services, group_members
    proc = start_service(tmp_path)
    pgid = proc.proc.pid
    helpers = [pid for pid in group_members(pgid) if pid != pgid]
    assert helpers, "the service's forkserver and resource_tracker run in its process group"
    proc.proc.kill()                       # kill -9: multiprocessing's helpers outlive the service
    proc.proc.wait()
    assert set(group_members(pgid)) & set(helpers), "they outlive it (what the clean-up is for)"
    ended = end_dead_services()
    assert set(helpers) <= set(ended) | set(), (helpers, ended)
    for _ in range(50):
        if not group_members(pgid):
            break
        time.sleep(0.1)
    assert group_members(pgid) == []
    proc.proc = None


def test_the_leftover_check_sees_an_orphan(tmp_path):
    import signal
    import subprocess
    import sys
    from conftest import leftover_processes
    # a process of this Python mentioning greenslurm, orphaned (its parent exits at once): PPID 1
    pid_file = tmp_path / "pid"
    subprocess.run([sys.executable, "-c", "import os, subprocess, sys; p = subprocess.Popen([sys.executable, '-c', "
                    "'import time; time.sleep(60)  # greenslurm'], start_new_session=True); "
                    f"open({str(pid_file)!r}, 'w').write(str(p.pid))"], check=True, timeout=60)
    orphan = int(pid_file.read_text())
    try:
        assert orphan in leftover_processes()
    finally:
        os.kill(orphan, signal.SIGKILL)
    for _ in range(50):
        if orphan not in leftover_processes():
            break
        time.sleep(0.1)
    assert orphan not in leftover_processes()


def test_a_second_service_on_the_same_socket_exits_with_one_line_and_the_first_keeps_it(tmp_path):
    import subprocess
    import sys
    first = start_service(tmp_path)
    try:
        inode = os.stat(first.socket_path).st_ino
        second = subprocess.run([sys.executable, "-m", "greenslurm", "hook", "serve", "--config",
                                 str(tmp_path / "hook.toml")], capture_output=True, text=True, timeout=60)
        assert second.returncode == 2
        err = second.stderr.strip().splitlines()
        assert len(err) == 1 and "already serves this socket" in err[0] and str(first.proc.pid) in err[0]
        assert os.stat(first.socket_path).st_ino == inode
        assert exchange(first.socket_path, b'{"op":"ping"}\n')["ok"] is True
    finally:
        first.stop()
    assert not os.path.exists(first.socket_path)     # the first removes its own socket on exit


def test_the_service_does_not_make_its_runtime_directory(tmp_path):
    from greenslurm.cli import main
    config = write_config(tmp_path / "hook.toml", socket=str(tmp_path / "missing" / "hook.sock"),
                          database=str(tmp_path / "db.sqlite"), backend="files", state_dir=str(STATE))
    assert main(["hook", "serve", "--config", str(config)]) == 2
    assert not (tmp_path / "missing").exists()


def test_fail_opens_reported_by_the_hook_are_counted_and_mark_decisions_not_applied(tmp_path):
    proc = start_service(tmp_path)
    try:
        first = exchange(proc.socket_path, request(1, hook_instance="h1"))
        second = exchange(proc.socket_path, request(2, hook_instance="h1"))
        # the hook gave up on request 2 (timeout) and says so with its next request
        exchange(proc.socket_path, request(3, hook_instance="h1", failed_open=2, failed_ids="2,99"))
        ping = exchange(proc.socket_path, b'{"op":"ping"}\n')
    finally:
        proc.stop()
    assert ping["fail_opens"] == 2
    applied = {r["id"]: r["applied"] for r in rows(tmp_path)}
    assert applied[first["decision"]] == 1 and applied[second["decision"]] == 0


@pytest.mark.parametrize("stale, action", [("open", "accept"), ("closed", "reject"), ("check", "error")])
def test_no_view_is_the_configured_outcome(tmp_path, stale, action):
    empty = tmp_path / "state"
    empty.mkdir()                          # no sinfo.json: the service never gets a view
    sock = str(tmp_path / "hook.sock")
    config = write_config(tmp_path / "hook.toml", socket=sock, database=str(tmp_path / "db.sqlite"),
                          backend="files", state_dir=str(empty), sync_interval_s=1.0, stale=stale)
    import subprocess
    import sys
    proc = subprocess.Popen([sys.executable, "-m", "greenslurm", "hook", "serve", "--config", str(config)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    from hook_service import STARTED_GROUPS
    STARTED_GROUPS.append(proc.pid)                        # its helpers are ended after the test
    try:
        for _ in range(400):
            if os.path.exists(sock):
                break
            time.sleep(0.05)
        answer = exchange(sock, request(1, deadline_env="now+1day"))
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert answer["action"] == action
    assert rows(tmp_path)[0]["reason"] == "stale view"


def test_a_job_array_is_checked_as_its_tasks_and_recorded_so(served):
    # 100 tasks of 10 minutes, deadline in 1 hour, on the recorded 4-node cluster: cannot all end
    answer = exchange(served.socket_path, request(11, array_inx="0-99", deadline_env="now+3600", min_cpus=4))
    assert answer["action"] == "reject" and "array of 100 tasks" in answer["message"]
    # 3 tasks of 10 minutes easily can
    answer = exchange(served.socket_path, request(12, array_inx="0-2", deadline_env="now+3600"))
    assert answer["action"] in ("accept", "modify")
    assert "array of 3 tasks" in answer["comment_append"] and "req_nodes" not in answer


def _descendants(pid: int) -> dict[int, int]:
    """pid -> parent pid of every process below ``pid``."""
    parents = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    below, frontier = {}, [pid]
    while frontier:
        parent = frontier.pop()
        for child, ppid in parents.items():
            if ppid == parent and child not in below:
                below[child] = parent
                frontier.append(child)
    return below


def wait_new_views(sock: str, count: int = 2, limit_s: float = 180.0) -> list[float]:
    """The times (now - ping's ``view_age_s``) of the first ``count`` views the service installs after
    the first one seen from now on; fewer when ``limit_s`` passes first (a guard against a sync loop
    that never moves again, not a speed bound: a loaded machine only makes the syncs slower)."""
    seen: list[float] = []
    first = None
    deadline = time.monotonic() + limit_s
    while len(seen) < count and time.monotonic() < deadline:
        age = exchange(sock, b'{"op":"ping"}\n').get("view_age_s")
        if age is not None:
            made = time.time() - age
            if first is None:
                first = made
            elif made > (seen[-1] if seen else first) + 0.5:     # views are sync_interval_s = 1 s apart
                seen.append(made)
        time.sleep(0.2)
    return seen


@pytest.mark.parametrize("sig", ["SIGSTOP", "SIGKILL"])
def test_a_stopped_or_killed_state_reader_does_not_end_the_syncs(tmp_path, sig):
    import signal
    # max_view_age_s = 4: a read of Slurm's state is abandoned after 2 s
    proc = start_service(tmp_path, max_view_age_s=4.0)
    try:
        # the worker: forked by the forkserver, itself a child of the service
        below = _descendants(proc.proc.pid)
        workers = [pid for pid, parent in below.items() if parent != proc.proc.pid]
        assert workers, below
        for pid in workers:
            os.kill(pid, getattr(signal, sig))
        # syncs go on (a worker abandoned and replaced): new views keep coming; a sync loop stuck on the
        # stopped worker never installs another
        assert len(wait_new_views(proc.socket_path)) == 2
        answer = exchange(proc.socket_path, request(1, deadline_env="now+1day"))
        assert answer["action"] in ("accept", "modify"), answer
    finally:
        for pid in workers if "workers" in dir() else ():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.stop()


def test_pending_jobs_stuffed_with_tags_do_not_stop_the_syncs(tmp_path):
    # a copy of the recorded state whose pending deadline job carries 300,000 distinct tags: more than
    # SQLite takes as parameters of one statement (Slurm caps a comment at 1 KiB, but 7,000 jobs
    # of 45 tags each add up the same)
    state = tmp_path / "state"
    state.mkdir()
    (state / "sinfo.json").write_bytes((STATE / "sinfo.json").read_bytes())
    squeue = json.loads((STATE / "squeue.json").read_text())
    job = next(j for j in squeue["jobs"] if j["job_state"] == "PENDING")
    job["deadline"] = int(time.time()) + 86400
    job["comment"] = " ".join(f"greenslurm#{i}.deadbeef" for i in range(10**6, 10**6 + 300_000))
    (state / "squeue.json").write_text(json.dumps(squeue))
    proc = start_service(tmp_path, state_dir=str(state))
    try:
        assert len(wait_new_views(proc.socket_path)) == 2
    finally:
        proc.stop()


# -- the user's own nodes and every GPU form (nodes of tests/data/slurm-hook: n1, n2 with 2 GPUs; n3, n4 without)
GPU_NODES = {"n1", "n2"}
GPU_FIELDS = [{}, {"tres_per_node": "gres:gpu:1"}, {"tres_per_job": "gres:gpu:1"}, {"tres_per_job": "gres:gpu:3"},
              {"tres_per_task": "gres:gpu:1", "num_tasks": 2, "min_cpus": 2},
              {"tres_per_socket": "gres:gpu:1", "sockets_per_node": 1}]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(required=st.sets(st.sampled_from(["n1", "n2", "n3", "n4"]), max_size=2),
       excluded=st.sets(st.sampled_from(["n1", "n2", "n3", "n4"]), max_size=3),
       gpus=st.sampled_from(range(len(GPU_FIELDS))))
def test_placement_keeps_the_users_nodes_and_puts_gpu_jobs_on_gpu_nodes(served, required, excluded, gpus):
    required = required - excluded               # Slurm refuses a node both required and excluded
    fields = dict(GPU_FIELDS[gpus])
    if required:
        fields["req_nodes"] = ",".join(sorted(required))
    if excluded:
        fields["exc_nodes"] = ",".join(sorted(excluded))
    answer = exchange(served.socket_path, request(7000 + gpus, **fields))
    assert answer["action"] in ("accept", "modify", "reject"), answer
    assert "bad input" not in answer.get("message", "")
    if answer["action"] != "modify":
        return
    planned = set(re.search(r"planned start \S+ on (\S+?)(?:, |$)", answer["comment_append"]).group(1).split(","))
    assert not planned & excluded
    if required:
        # the user's -w is kept (never replaced), and the plan is on the nodes it names
        assert "req_nodes" not in answer and planned <= required, answer
    else:
        assert set(answer["req_nodes"].split(",")) == planned
    if fields.get("tres_per_node") or fields.get("tres_per_job") or fields.get("tres_per_task") \
            or fields.get("tres_per_socket"):
        assert planned <= GPU_NODES, answer


@pytest.mark.parametrize("field", ["deadline_env", "deadline_script"])
@pytest.mark.parametrize("zone", ["Pacific/Kiritimati", ":America/Adak", "UTC-14"])
def test_a_local_time_deadline_is_read_in_the_jobs_time_zone(tmp_path, field, zone):
    from datetime import datetime, timedelta, timezone
    from zoneinfo import ZoneInfo
    # 17:00 local, 3 days from now: Kiritimati and UTC-14 (POSIX: 14 h east) are UTC+14, Adak UTC-10/-9
    tz = timezone(timedelta(hours=14)) if zone == "UTC-14" else ZoneInfo(zone.lstrip(":"))
    day = datetime.now(tz) + timedelta(days=3)
    local = day.replace(hour=17, minute=0, second=0, microsecond=0)
    parsed = parse_request(request(1, **{field: local.strftime("%Y-%m-%dT%H:%M:%S"), "tz": zone}))
    sub = submission_from_request(parsed, now_s=time.time())
    assert sub.job.deadline_s == local.timestamp()


@pytest.mark.parametrize("asked, pending_gpus, covered", [
    ({"tres_per_job": "gres:gpu:1"}, {"gpus_total": 1}, True),
    ({"tres_per_job": "gres:gpu:1"}, {"gpus_total": 2}, False),      # TresPerJob raised after the check
    ({"tres_per_node": "gres:gpu:1"}, {"gpus_per_node": 2.0}, False),
])
def test_a_tag_covers_no_more_gpus_than_were_checked(tmp_path, asked, pending_gpus, covered):
    from greenslurm.clustermodel import JobSpec
    from greenslurm.slurm_plugin.backend import PendingDeadline
    from greenslurm.slurm_plugin.record import DecisionRecord
    from greenslurm.slurm_plugin.service import DecisionService
    service = DecisionService(HookConfig(database=str(tmp_path / "db.sqlite")), DecisionRecord(tmp_path / "db.sqlite"))
    snapshot, _ = backend.FilesBackend(str(STATE)).snapshot()
    service.swap_view(service.install_view(snapshot, time.time()), time.time())
    answer = service.handle_request(parse_request(request(1, deadline_env="now+1day", **asked)))
    assert answer["action"] == "modify", answer
    checked = service.record.rows("WHERE id = ?", (answer["decision"],))[0]["deadline_s"]
    extra = {"gpus_total": pending_gpus["gpus_total"]} if "gpus_total" in pending_gpus else {}
    job = JobSpec("101", submit_s=time.time(), requested_time_s=600.0, cpus=1, deadline_s=checked,
                  gpus_per_node=pending_gpus.get("gpus_per_node", 0.0), extra=extra)
    item = PendingDeadline("101", checked, job, None, answer["comment_append"], False, "ana", 600.0, 1000)
    assert (service.checked_jobs([item]) == {"101"}) is covered

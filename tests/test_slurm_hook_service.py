"""The decision service on its UNIX socket, without Slurm: the real ``greenslurm hook serve`` process
on a cluster state recorded from the real daemons (``tests/data/slurm-hook``: ``sinfo --json`` and
``squeue --json`` of the test cluster, 4 nodes, two with 2 GPUs).  Bad input, config errors, the
protocol's parsing, and a bounded load test."""

from __future__ import annotations

import doctest
import json
import os
import socket
import threading
import time
from pathlib import Path

import pytest

from greenslurm.clustermodel import InputError
from hook_service import ServiceProcess, write_config
from greenslurm.slurm_plugin import backend, install, protocol
from greenslurm.slurm_plugin.protocol import MAX_REQUEST_BYTES, ProtocolError, parse_request, submission_from_request
from greenslurm.slurm_plugin.service import HookConfig

STATE = Path(__file__).parent / "data" / "slurm-hook"


@pytest.mark.parametrize("module", [protocol, backend])
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
    (b'{"op": "submit", "comment": 7}\n', "comment must be a string"),
    (b'{"op": "submit", "deadline": "whenever"}\n', "not a Slurm time"),
    (b"\xff\xfe\n", "not JSON"),
])
def test_bad_requests_get_an_error_answer_and_the_service_lives(served, payload, expected):
    answer = exchange(served.socket_path, payload)
    assert answer["action"] in ("error", "reject") and expected in answer["message"]
    assert exchange(served.socket_path, b'{"op":"ping"}\n')["ok"] is True


def test_an_oversized_request_is_refused(served):
    answer = exchange(served.socket_path, b'{"comment": "' + b"x" * (MAX_REQUEST_BYTES + 10) + b'"}\n')
    assert answer["action"] == "error" and "larger than" in answer["message"]
    assert exchange(served.socket_path, b'{"op":"ping"}\n')["ok"] is True


def test_a_client_that_sends_half_a_line_and_leaves_does_not_stall_others(served):
    stuck = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stuck.connect(served.socket_path)
    stuck.sendall(b'{"op": "sub')          # and never finishes
    try:
        started = time.perf_counter()
        answer = exchange(served.socket_path, submit(1, None, time.time()))
        assert answer["action"] in ("accept", "modify")
        assert time.perf_counter() - started < 1.0
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
    ("[hook]\nallocation = \"backfill\"\n", "without backfilling"),
    ("[hook]\nfail = \"maybe\"\n", "fail must be 'open' or 'closed'"),
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
    assert "unknown reconcile action" in err and len(err.strip().splitlines()) == 1


def test_no_val_fields_are_unset_and_mem_per_cpu_is_multiplied():
    sub = submission_from_request({"id": 1, "min_cpus": 4, "min_nodes": 2, "pn_min_memory": 2 ** 63 + 500,
                                   "time_limit": 4294967294, "begin_time": 0}, now_s=10.0,
                                  default_time_limit_s=1800.0)
    assert (sub.job.nodes, sub.job.memory_mb_per_node, sub.job.requested_time_s, sub.begin_s) == (2, 1000.0, 1800.0, None)


def test_parse_request_limits():
    with pytest.raises(ProtocolError, match="too large"):
        parse_request(b"{" + b" " * MAX_REQUEST_BYTES + b"}")
    with pytest.raises(ProtocolError, match="longer than"):
        parse_request(json.dumps({"comment": "x" * 5000}).encode())

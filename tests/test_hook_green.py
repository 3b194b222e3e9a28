"""The live hook's renewable forecast and green placement, without Slurm daemons: the forecast file
and command (bad bytes, a FIFO, a hang, a flood), its age and the stale outcome, exact green
placements, the same answers as the replay's deadline queue (exact cases and a property), and the
real ``greenslurm hook serve`` process with a forecast command that hangs.  The same on real
daemons: tests/test_hook_green_live.py."""

from __future__ import annotations

import doctest
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from greenslurm.allocation import green as green_module
from greenslurm.clustermodel.renewable import SupplySeries
from greenslurm.slurm_plugin import decision_replay, forecast as forecast_module
from greenslurm.slurm_plugin import service as service_module
from greenslurm.slurm_plugin.config import HookConfig
from greenslurm.slurm_plugin.decision_replay import replay_decisions
from greenslurm.slurm_plugin.forecast import Forecast, ForecastSource, usable_supply
from greenslurm.slurm_plugin.record import DecisionRecord
from greenslurm.slurm_plugin.service import DecisionService
from greenslurm.slurm_plugin.snapshot import LiveNode, Snapshot
from hook_service import ServiceProcess, write_config

STATE = Path(__file__).parent / "data" / "slurm-hook"
T = 1_800_000_000.0          # an epoch time on the hour (2027-01-15 08:00 UTC)


@pytest.mark.parametrize("module", [forecast_module, green_module, decision_replay])
def test_doctests(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


# -- the forecast ------------------------------------------------------------------------------------
def test_a_forecast_file_is_read_again_when_it_changes_and_says_its_age(tmp_path):
    path = tmp_path / "supply.csv"
    path.write_text("time_s,watts\n1800000000,0\n1800003600,2000\n")
    os.utime(path, (T, T))
    source = ForecastSource(str(path))
    first = source.refresh(T + 90.0)
    assert first.series.watts.tolist() == [0.0, 2000.0] and first.error is None
    assert first.age_s(T + 90.0) == 90.0
    path.write_text("1800000000,5\n")
    os.utime(path, (T + 100, T + 100))
    second = source.refresh(T + 130.0)
    assert second.series.watts.tolist() == [5.0] and second.age_s(T + 130.0) == 30.0


@pytest.mark.parametrize("content, expected", [
    (b"time_s,watts\n1800000000,0\n1800003600,\xff\xfe\n", "supply.csv:3: field watts: not UTF-8 (byte 0xff)"),
    (b"1800000000,0\n1800003600,-5\n", "supply.csv:2: time must be finite and watts finite and >= 0"),
    (b"1800000000,0\n1700000000,5\n", "supply.csv:2: time 1700000000 does not come after"),
    (b"1800000000,0,7\n", "supply.csv:1: expected 2 comma-separated fields"),
    (b"1800000000,nan\n", "supply.csv:1: time must be finite"),
    (b"time_s,watts\n", "supply.csv: no samples"),
    (b"1800000000,0\x00\n", "supply.csv: holds NUL bytes"),
    (b"", "supply.csv: no samples"),
])
def test_a_bad_forecast_keeps_the_one_read_before_and_names_line_and_field(tmp_path, content, expected):
    path = tmp_path / "supply.csv"
    path.write_text("1800000000,1000\n")
    os.utime(path, (T, T))
    source = ForecastSource(str(path))
    assert source.refresh(T).error is None
    path.write_bytes(content)
    os.utime(path, (T + 600, T + 600))
    after = source.refresh(T + 700)
    assert expected in after.error, after.error
    assert after.series.watts.tolist() == [1000.0]           # the good one, still ageing from its own time
    assert after.age_s(T + 700) == 700.0


def test_a_fifo_a_directory_a_missing_file_and_a_huge_file_never_block_or_load(tmp_path):
    fifo = tmp_path / "fifo.csv"
    os.mkfifo(fifo)                      # opening it for reading would block until a writer came
    assert "not a regular file" in ForecastSource(str(fifo)).refresh(T).error
    assert "Is a directory" in ForecastSource(str(tmp_path)).refresh(T).error or \
        "not a regular file" in ForecastSource(str(tmp_path)).refresh(T).error
    assert "No such file" in ForecastSource(str(tmp_path / "none.csv")).refresh(T).error
    huge = tmp_path / "huge.csv"
    with open(huge, "wb") as handle:
        handle.truncate(forecast_module.MAX_FORECAST_BYTES + 1)   # sparse: no disk used
    assert "larger than" in ForecastSource(str(huge)).refresh(T).error


def test_a_forecast_command_that_hangs_is_killed_with_its_children(tmp_path):
    pids = tmp_path / "pids"
    # the shell forks a sleeping child and then sleeps itself: both must go
    command = f"sh -c 'sleep 1000 & echo $! > {pids}; echo $$ >> {pids}; printf \"1800000000,5\\n\"; sleep 1000'"
    source = ForecastSource(command=command, timeout_s=0.5)
    result = source.refresh(T)
    assert "gave no complete answer within 0.5 s; killed" in result.error
    assert result.series is None
    for pid in map(int, pids.read_text().split()):
        # killed and reaped (the child of the shell is reaped by init; wait until it is gone or a zombie)
        for _ in range(100):
            try:
                state = Path(f"/proc/{pid}/stat").read_text().split()[2]
            except FileNotFoundError:
                break
            if state == "Z":
                break
            time.sleep(0.02)
        else:
            raise AssertionError(f"process {pid} still runs")


@pytest.mark.parametrize("command, expected", [
    ("yes 1800000000,5", "printed more than"),
    ("false", "exited with 1"),
    ("sh -c 'echo broken >&2; exit 3'", "exited with 3: 'broken'"),
    ("/nonexistent/forecast", "cannot run"),
    ("printf '1800000000,\\377\\n'", "field watts: not UTF-8"),
])
def test_a_forecast_command_that_fails_says_why(command, expected):
    result = ForecastSource(command=command, timeout_s=5.0).refresh(T)
    assert expected in result.error and result.series is None


def test_a_forecast_command_runs_every_refresh_interval_and_its_age_is_its_answer():
    source = ForecastSource(command="printf '1800000000,0\\n1800003600,2500\\n'", refresh_s=300.0)
    first = source.refresh(T)
    assert first.series.watts.tolist() == [0.0, 2500.0] and first.source.startswith("printf")
    produced = first.produced_s
    assert source.refresh(T + 299.0).produced_s == produced       # not run again within 300 s
    assert source.refresh(T + 301.0).produced_s >= produced


def test_a_stale_forecast_is_the_configured_outcome():
    f = Forecast(SupplySeries([T], [5.0]), produced_s=T, source="f.csv")
    assert usable_supply(f, T + 21600.0, 21600.0, "grid")[0] is f.series      # exactly the limit: fresh
    assert usable_supply(f, T + 21601.0, 21600.0, "grid")[0] is None
    assert usable_supply(f, T + 21601.0, 21600.0, "use")[0] is f.series


@pytest.mark.parametrize("settings_, field", [
    ({"renewable": "green"}, "renewable"),
    ({"renewable": "sunny", "supply_file": "/a.csv"}, "renewable"),
    ({"supply_file": "rel.csv"}, "supply_file"),
    ({"supply_file": "/a.csv", "supply_command": "x"}, "supply_command"),
    ({"supply_command": "unbalanced 'quote"}, "supply_command"),
    ({"supply_timeout_s": 0}, "supply_timeout_s"),
    ({"supply_stale": "panic"}, "supply_stale"),
    ({"no_deadline": "later"}, "no_deadline"),
    ({"no_deadline_max_shift_s": -1}, "no_deadline_max_shift_s"),
    ({"node_idle_w": 500.0, "node_busy_w": 100.0}, "node_busy_w"),
    ({"gpu_max_w": 1e9}, "gpu_max_w"),
])
def test_bad_forecast_settings_are_one_line_naming_the_key(tmp_path, settings_, field):
    path = write_config(tmp_path / "hook.toml", **settings_)
    result = subprocess.run([sys.executable, "-m", "greenslurm", "hook", "install", "--config", str(path),
                             "--print", "job_submit"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 2, result.stdout[-300:]
    assert f"field {field}:" in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


# -- green placement -----------------------------------------------------------------------------------
def service_at(supply: SupplySeries, nodes=(LiveNode("n1", 4, 4000), LiveNode("n2", 4, 4000)),
               **settings_) -> DecisionService:
    config = HookConfig(renewable=settings_.pop("renewable", "green"), supply_file="/x.csv",
                        **settings_)
    config.check()
    service = DecisionService(config, DecisionRecord(":memory:"))
    service.forecast = Forecast(supply, T, "/x.csv")
    service.view = service.install_view(Snapshot(T, list(nodes)), T)
    return service


def submit(service: DecisionService, i: int, at_s: float, deadline_s: float | None = None, cpus: int = 4,
           minutes: int = 30, monkeypatch=None) -> dict:
    monkeypatch.setattr(service_module.time, "time", lambda: at_s)
    request = {"op": "submit", "id": i, "user": "ana", "min_cpus": cpus, "num_tasks": 1, "time_limit": minutes,
               "submit_time": int(at_s)}
    if deadline_s is not None:
        request["deadline"] = str(int(deadline_s))
    return service.handle((json.dumps(request) + "\n").encode())


# No supply until T + 1 h, 2,000 W for an hour, none after.  Two idle nodes of 4 CPUs, 100 W idle and
# 350 W busy: the cluster idles at 200 W, so the headroom is -200 W, then 1,800 W, then -200 W; a
# 4-CPU job adds 4 * (350 - 100) / 4 = 250 W.
WINDOW = SupplySeries([T, T + 3600, T + 7200], [0.0, 2000.0, 0.0])


def test_a_job_with_room_before_its_deadline_moves_into_the_green_hour(monkeypatch):
    service = service_at(WINDOW)
    answer = submit(service, 1, T, deadline_s=T + 3 * 3600, monkeypatch=monkeypatch)
    # candidate starts: T (headroom -200 W: no renewable power), T + 3600 (1,800 W >= 250 W for the
    # whole half hour: all of it renewable), T + 7200 (none): the green hour wins
    assert answer["action"] == "modify" and answer["begin_time"] == int(T + 3600)
    assert "moved 1h00m later into greener hours (est. renewable share 100% instead of 0%)" in answer["comment_append"]
    row = service.record.rows()[-1]
    assert (row["planned_start_s"], row["earliest_start_s"], row["renewable_share"],
            row["renewable_share_earliest"], row["begin_set_s"]) == (T + 3600, T, 1.0, 0.0, T + 3600)
    assert row["supply_note"] == "forecast /x.csv, 0 s old" and row["supply_age_s"] == 0.0


def test_a_job_whose_deadline_comes_before_the_green_hour_is_not_moved(monkeypatch):
    service = service_at(WINDOW)
    answer = submit(service, 1, T, deadline_s=T + 2700, monkeypatch=monkeypatch)   # must end by T + 45 min
    assert "begin_time" not in answer and "greener hours" not in answer["comment_append"]
    assert service.record.rows()[-1]["planned_start_s"] == T


def test_partly_green_windows_are_ranked_by_their_renewable_energy(monkeypatch):
    # 400 W from T + 1 h: headroom 200 W (the job gets 200 of its 250 W: 80%); 2,000 W from T + 2 h
    supply = SupplySeries([T, T + 3600, T + 7200, T + 9000], [0.0, 400.0, 2000.0, 0.0])
    service = service_at(supply)
    answer = submit(service, 1, T, deadline_s=T + 4 * 3600, monkeypatch=monkeypatch)
    assert answer["begin_time"] == int(T + 7200)
    row = service.record.rows()[-1]
    assert row["renewable_share"] == 1.0
    # had the full hour not been there, the 80% window would have won over now (0%)
    service = service_at(SupplySeries([T, T + 3600], [0.0, 400.0]))
    submit(service, 1, T, deadline_s=T + 4 * 3600, monkeypatch=monkeypatch)
    assert service.record.rows()[-1]["renewable_share"] == pytest.approx(0.8)


def test_jobs_without_a_deadline_are_untouched_or_shifted_within_the_limit(monkeypatch):
    untouched = service_at(WINDOW)
    answer = submit(untouched, 1, T, monkeypatch=monkeypatch)
    assert "begin_time" not in answer and untouched.record.rows()[-1]["planned_start_s"] == T
    # shift by at most 2 h: the placement deadline is the earliest end (T + 30 min) + 2 h
    shifted = service_at(WINDOW, no_deadline="shift", no_deadline_max_shift_s=7200.0)
    assert submit(shifted, 1, T, monkeypatch=monkeypatch)["begin_time"] == int(T + 3600)
    # at most 20 minutes: the green hour is out of reach, the job starts now
    near = service_at(WINDOW, no_deadline="shift", no_deadline_max_shift_s=1200.0)
    assert "begin_time" not in submit(near, 1, T, monkeypatch=monkeypatch)


def test_grid_mode_and_a_stale_forecast_place_as_without_one(monkeypatch):
    grid = service_at(WINDOW, renewable="grid")
    assert "begin_time" not in submit(grid, 1, T, deadline_s=T + 3 * 3600, monkeypatch=monkeypatch)
    stale = service_at(WINDOW, supply_max_age_s=60.0)
    stale.forecast = Forecast(WINDOW, T - 3600.0, "/x.csv")          # an hour old
    stale.view = stale.install_view(Snapshot(T, [LiveNode("n1", 4, 4000), LiveNode("n2", 4, 4000)]), T)
    assert "begin_time" not in submit(stale, 1, T, deadline_s=T + 3 * 3600, monkeypatch=monkeypatch)
    assert "is stale (3600 s old > 60 s): planned as without one" in stale.record.rows()[-1]["supply_note"]
    used = service_at(WINDOW, supply_max_age_s=60.0, supply_stale="use")
    used.forecast = Forecast(WINDOW, T - 3600.0, "/x.csv")
    used.view = used.install_view(Snapshot(T, [LiveNode("n1", 4, 4000), LiveNode("n2", 4, 4000)]), T)
    assert submit(used, 1, T, deadline_s=T + 3 * 3600, monkeypatch=monkeypatch)["begin_time"] == int(T + 3600)


def test_recorded_decisions_replayed_through_the_deadline_queue_agree(monkeypatch):
    service = service_at(WINDOW, no_deadline="shift", no_deadline_max_shift_s=7200.0)
    for i, (at, deadline) in enumerate([(T, T + 3 * 3600), (T + 5, T + 2700), (T + 9, None), (T + 20, T + 3 * 3600),
                                        (T + 30, T + 3 * 3600)]):
        submit(service, i, at, deadline, monkeypatch=monkeypatch)
    rows = service.record.rows()
    replayed = replay_decisions(rows, service.view.cluster, WINDOW, renewable="green", no_deadline_shift_s=7200.0)
    assert [r.same for r in replayed] == [True] * 5, replayed
    # two jobs moved into the green hour fill n1 and n2 there; the third deadline job cannot be
    # placed in it any more (both nodes hold the first two until T + 1h30) and goes after
    assert sorted(r.recorded_start_s for r in replayed)[-1] > T + 3600


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(watts=st.lists(st.sampled_from([0.0, 300.0, 800.0, 3000.0]), min_size=1, max_size=6),
       jobs=st.lists(st.tuples(st.integers(0, 600), st.integers(1, 4), st.integers(5, 90),
                               st.one_of(st.none(), st.integers(0, 6 * 3600))), min_size=1, max_size=8),
       shift=st.sampled_from([0.0, 3600.0]))
def test_property_live_decisions_equal_the_replay(monkeypatch, watts, jobs, shift):
    supply = SupplySeries([T + 1800.0 * k for k in range(len(watts))], watts)
    service = service_at(supply, no_deadline="shift" if shift else "untouched", no_deadline_max_shift_s=shift or 1.0)
    at = T
    for i, (gap, cpus, minutes, slack) in enumerate(jobs):
        at += gap
        deadline = None if slack is None else at + minutes * 60 + slack
        submit(service, i, at, deadline, cpus=cpus, minutes=minutes, monkeypatch=monkeypatch)
    rows = [r for r in service.record.rows() if r["would_action"] in ("accept", "modify")]
    rejected = {r["id"] for r in service.record.rows()} - {r["id"] for r in rows}
    replayed = replay_decisions(service.record.rows(), service.view.cluster, supply, renewable="green",
                                no_deadline_shift_s=shift)
    for r in replayed:
        if r.decision in rejected:
            assert r.replay_start_s is None
        else:
            assert r.same, r


# -- the service process --------------------------------------------------------------------------------
def test_the_service_answers_while_its_forecast_command_hangs(tmp_path):
    sock = str(tmp_path / "hook.sock")
    config = write_config(tmp_path / "hook.toml", socket=sock, socket_owner="root",
                          database=str(tmp_path / "db.sqlite"), backend="files", state_dir=str(STATE),
                          sync_interval_s=1.0, renewable="green", supply_command="sleep 1000",
                          supply_timeout_s=0.5, supply_refresh_s=1.0)
    proc = ServiceProcess(config, sock, tmp_path / "service.log").start()
    try:
        from greenslurm.slurm_plugin.install import ping
        answer = {}
        for _ in range(100):
            answer = ping(sock, 2.0)
            if answer.get("forecast_error"):
                break
            time.sleep(0.1)
        assert "gave no complete answer within 0.5 s; killed" in answer["forecast_error"]
        assert answer["forecast_age_s"] is None and answer["view"]
        assert answer["forecast_use"].startswith("no forecast yet")
        assert ping(sock, 2.0)["ok"]                # the process stays up: it still answers
        check = subprocess.run([sys.executable, "-m", "greenslurm", "hook", "check", "--config", str(config),
                                "--slurm-conf", str(tmp_path / "none.conf")], capture_output=True, text=True,
                               timeout=120, env=dict(os.environ, COLUMNS="250"))
        line = next(line for line in check.stdout.splitlines() if " forecast " in line)
        assert "WARN" in line and "no forecast yet" in line and "last read failed" in line, line
    finally:
        proc.stop()


def test_the_planner_sees_the_forecast_up_to_its_horizon(monkeypatch):
    # the green hour lies 2 h ahead; with a 1-hour horizon the planner sees only "0 W from now on"
    service = service_at(SupplySeries([T, T + 7200, T + 10800], [0.0, 2000.0, 0.0]), supply_horizon_s=3600.0)
    assert "begin_time" not in submit(service, 1, T, deadline_s=T + 5 * 3600, monkeypatch=monkeypatch)
    service = service_at(SupplySeries([T, T + 7200, T + 10800], [0.0, 2000.0, 0.0]))
    assert submit(service, 1, T, deadline_s=T + 5 * 3600, monkeypatch=monkeypatch)["begin_time"] == int(T + 7200)

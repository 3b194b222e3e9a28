"""The slurm queue with the site's slurmctld log (``--slurmctld-log``): slurmctld's threads timed as the
log shows them and the jobs' submissions and run times to its millisecond.

Expected starts and nodes come from real Slurm 22.05 (the recordings' sacct exports and logs in
bench/data/slurm-workloads), never from the replay."""

from __future__ import annotations

import logging
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from greenslurm.clustermodel import InputError, JobSpec
from greenslurm.scenario_run import read_slurmctld_log, with_logged_moments
from greenslurm.traces.slurmctld_log import _stamped, read_log, scan_log, thread_timing

REPO = Path(__file__).resolve().parents[1]
WORKLOADS = REPO / "bench" / "data" / "slurm-workloads"
sys.path.insert(0, str(REPO / "bench"))


def epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp).replace(tzinfo=timezone.utc).timestamp()


def test_logged_moments_refine_whole_second_stamps_and_nothing_else(caplog):
    jobs = [JobSpec("1", submit_s=100.0, requested_time_s=60.0, runtime_s=10.0, cpus=1),
            JobSpec("2", submit_s=100.0, requested_time_s=60.0, runtime_s=10.0, cpus=1),
            JobSpec("3", submit_s=100.0, requested_time_s=60.0, runtime_s=10.0, cpus=1)]
    moments = {"1": {"submit": 100.4, "start": 101.7, "end": 111.9},   # in the stamp's second; 10.2 s run
               "2": {"submit": 101.2, "start": 102.0, "end": 140.0},   # another second; a 38 s run: not this job
               }                                                       # 3: not in the log
    with caplog.at_level(logging.WARNING, logger="greenslurm"):
        out = with_logged_moments(jobs, moments, "ctld.log")
    assert out[0].submit_s == 100.4 and out[0].runtime_s == pytest.approx(10.2)     # 111.9 - 101.7
    assert (out[1].submit_s, out[1].runtime_s) == (100.0, 10.0)
    assert out[2] == jobs[2]
    assert "1 of 3 jobs" in caplog.text and "the other 2 keep" in caplog.text


def test_thread_timing_of_a_real_log():
    # s90 (8 nodes of 16 CPUs, 3 partitions, recorded on real Slurm 22.05): slurmctld started 21:28:45.969; backfill
    # started JobId=9 at 21:29:16.523 (the log's own lines)
    log = (WORKLOADS / "s90" / "run1" / "slurmctld.log").read_text()
    timing = thread_timing(log, before_s=epoch("2026-11-28T21:28:52"))
    assert timing.start_s == epoch("2026-11-28T21:28:45.969")
    assert epoch("2026-11-28T21:29:16.523") in timing.backfill_looks_s
    assert timing.restarts_after == 0


S90_LOG = WORKLOADS / "s90" / "run1" / "slurmctld.log"


@settings(max_examples=30, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=10 ** 9), max_size=12))
def test_a_log_read_in_pieces_gives_what_its_whole_text_gives(cuts):
    # the reader goes through a log a piece at a time (a year's log need not fit in memory): any
    # cutting of a real log (s90, recorded on Slurm 22.05) at line ends reads as the whole text
    text = S90_LOG.read_text()
    ends = [i + 1 for i, char in enumerate(text) if char == "\n"]
    at = sorted({ends[cut % len(ends)] for cut in cuts})
    pieces = [text[a:b] for a, b in zip([0, *at], [*at, len(text)])]
    assert scan_log(pieces) == scan_log(text)


@settings(max_examples=300, deadline=None)
@given(moment=st.datetimes(min_value=datetime(1971, 1, 1), max_value=datetime(2200, 1, 1)),
       digits=st.integers(min_value=0, max_value=7), later_s=st.integers(min_value=0, max_value=90_000),
       later_us=st.integers(min_value=0, max_value=999_999))
def test_a_stamp_reads_as_datetime_reads_it_whatever_its_fraction(moment, digits, later_s, later_us):
    # a line on the same day as the line before reads its time of day alone: the same float as
    # datetime.fromisoformat(...).timestamp() (to the bit), for 0 to 7 digits of fraction
    def stamp(at):
        return at.strftime("%Y-%m-%dT%H:%M:%S") + ("." + f"{at.microsecond:06d}{at.microsecond % 10}"[:digits]
                                                    if digits else "")
    # in time order (a stamp before the one above is refused), across a midnight where later_s takes them
    later = moment + timedelta(seconds=later_s, microseconds=later_us)
    last = later + timedelta(seconds=later_s)
    lines = [f"[{stamp(moment)}] a", f"[{stamp(later)}] b", f"[{stamp(last)}] c"]
    expected = [datetime.fromisoformat(line[1:line.index("]")]).replace(tzinfo=timezone.utc).timestamp()
                for line in lines]
    assert [at for at, _ in _stamped("\n".join(lines))] == expected


@pytest.mark.parametrize("damage, message", [
    (lambda data: data[:3000], "gzip data is corrupt or truncated"),                       # cut short
    (lambda data: data[:200] + bytes(b ^ 0x5A for b in data[200:400]) + data[400:],         # bytes flipped
     "gzip data is corrupt or truncated"),
    (lambda data: b"[2026-11-28T21:28:45.969] slurmctld version 22.05.8 started on c\n"
                  b"[2026-11-28T21:28:46.000] sched: Allocate JobId=1 NodeList=n1\n"
                  b"[2026-11-28T25:28:46.000] sched: Allocate JobId=2 NodeList=n1\n",         # hour 25, line 3
     "line 3: time stamp '2026-11-28T25:28:46.000' is no time (hour must be in 0..23)")])
def test_a_bad_log_is_one_error_naming_the_file(damage, message, tmp_path):
    import gzip
    log = tmp_path / "slurmctld.log.gz"
    log.write_bytes(damage(gzip.compress(S90_LOG.read_bytes())) if "gzip" in message
                    else gzip.compress(damage(b"")))
    with pytest.raises(InputError) as error:
        read_log(str(log))
    assert str(error.value) == f"{log}: {message}"


def test_a_log_of_another_period_is_refused(tmp_path):
    log = tmp_path / "ctld.log"
    log.write_text("[2026-11-28T21:28:45.969] slurmctld version 22.05.8 started on cluster c\n")
    with pytest.raises(InputError, match="after the trace's first submission"):
        read_slurmctld_log(str(log), epoch("2026-11-28T21:00:00"))


S98 = WORKLOADS / "s98" / "second"         # its log: slurmctld's start line 3, take-over line 28


def s98_log_with_line_28(tmp_path, line: str) -> Path:
    """s98/second's slurmctld log (real Slurm 22.05) with its line 28, the take-over, replaced."""
    lines = (S98 / "slurmctld.log").read_text().splitlines()
    assert lines[27] == "[2026-11-29T01:15:44.475] Running as primary controller"
    lines[27] = line
    log = tmp_path / "ctld.log"
    log.write_text("\n".join(lines) + "\n")
    return log


def test_a_garbled_stamp_is_refused_naming_its_line(tmp_path):
    # a NUL inside the take-over's stamp: the line has a stamp's start but no stamp; skipped, the
    # replay silently counted backfill's loop from the start line instead (other starts, no message)
    log = s98_log_with_line_28(tmp_path, "[2026-11-29T01:15:4\x004.475] Running as primary controller")
    with pytest.raises(InputError, match=r"line 28: time stamp '2026-11-29T01:15:4\\x004.475\] Runn' is no time"):
        read_slurmctld_log(str(log), epoch("2026-11-29T01:15:50"))


def test_rfc5424_stamps_are_read_as_their_wall_clock(tmp_path):
    # LogTimeFormat=rfc5424_ms (slurm.conf) stamps "[2026-11-29T01:15:44.475+01:00]" (log.c,
    # log_timestamp: %Y-%m-%dT%T%z with the colon put in); sacct's times carry no zone and read as
    # UTC, so the log's wall clock is read the same way and the two line up: the same timing as the
    # iso8601_ms log (which was refused for having no start line: every stamp was skipped)
    lines = (S98 / "slurmctld.log").read_text().splitlines()
    rfc = [line[:24] + "+01:00" + line[24:] if line.startswith("[2026-") else line for line in lines]
    log = tmp_path / "rfc5424.log"
    log.write_text("\n".join(rfc) + "\n")
    assert thread_timing(log.read_text()) == thread_timing("\n".join(lines))
    assert thread_timing(log.read_text()).controller_s == epoch("2026-11-29T01:15:44.475")


def test_a_take_over_after_the_threads_it_starts_is_refused(tmp_path):
    # slurmctld starts its background loop and backfill only once it runs as primary controller
    # (controller.c), so a take-over stamped after their first logged work (s98: the main scheduler
    # allocated JobId=1 at 01:15:50.749) is a log out of order; it anchored backfill's loop 2 hours late, silently
    # stamped 03:00 where it stands (line 28), the next line's stamp goes back: refused at line 29
    log = s98_log_with_line_28(tmp_path, "[2026-11-29T03:00:00.000] Running as primary controller")
    with pytest.raises(InputError, match=r"line 29: time stamp 2026-11-29T01:15:44.651 comes 6255.349 s before "
                                         r"line 28's 2026-11-29T03:00:00.000"):      # 03:00:00 - 01:15:44.651
        read_slurmctld_log(str(log), epoch("2026-11-29T01:15:50"))
    # moved after JobId=1's allocation (line 37 then 36) with its stamps in order: the take-over check
    lines = (S98 / "slurmctld.log").read_text().splitlines()
    take_over = lines.pop(27)
    assert lines[35].startswith("[2026-11-29T01:15:50.749] sched: Allocate JobId=1 ")
    lines.insert(36, "[2026-11-29T01:15:50.750]" + take_over[len("[2026-11-29T01:15:44.475]"):])
    log.write_text("\n".join(lines) + "\n")
    with pytest.raises(InputError, match=r"line 37: slurmctld's take-over as primary controller at "
                                         r"2026-11-29T01:15:50.750 comes after its threads' first logged work "
                                         r"at 2026-11-29T01:15:50.749"):
        read_slurmctld_log(str(log), epoch("2026-11-29T01:15:50"))


def test_a_garbled_log_is_one_line_and_exit_2(tmp_path):
    log = s98_log_with_line_28(tmp_path, "[2026-11-29T01:15:4\x004.475] Running as primary controller")
    run = subprocess.run([sys.executable, "-m", "greenslurm", "replay", str(S98 / "trace.txt"), "--format", "sacct",
                          "--slurm-conf", str(S98 / "slurm.conf"), "--queue", "slurm", "--slurmctld-log", str(log)],
                         capture_output=True, text=True, cwd=tmp_path)
    assert run.returncode == 2 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and f"{log}: line 28: time stamp" in run.stderr, run.stderr


def with_log(recording: str) -> dict:
    """The bench's comparison (bench/bench_slurm_workloads.py) of a development recording replayed with
    its slurmctld log against what real Slurm recorded."""
    from bench_slurm_workloads import compare, recorded_schedule, replayed_schedule
    folder = WORKLOADS / recording / "run1"
    return compare(recorded_schedule(folder / "trace.txt"),
                   replayed_schedule(folder / "trace.txt", folder / "slurm.conf",
                                     slurmctld_log=str(folder / "slurmctld.log")), "replay+log")


def test_s84_with_its_log_starts_every_job_within_5_s_on_slurms_nodes():
    # development recording s84 (8 nodes of 16 CPUs, backfill, CR_Core_Memory): from the trace alone the
    # replay's passes run 2-4 s ahead of Slurm's from j07 on (37 of 60 within 5 s); with the log's
    # thread timing and millisecond submissions every job starts within 5 s of Slurm's start and on
    # Slurm's nodes (both from the recording's sacct export)
    row = with_log("s84")
    assert row["jobs"] == 60
    assert row["within_5s"] == 1.0 and row["same_nodes"] == 1.0, row



def test_s81_with_its_log_waits_as_long_as_slurm_in_slurms_whole_seconds():
    # development recording s81: sacct's Submit and Start are slurmctld's time(NULL), truncated to the
    # second: 71 s of waiting over 60 jobs (1.18 s).  The replay with the log starts each job to the
    # millisecond, 0.2-0.9 s into a second (Slurm's allocations in the log fall there too), and in
    # those fractional stamps its mean wait was 1.65 s (+39.5%); stamped as Slurm stamps them it is
    # 71 s over 60 jobs as well (58 of 60 started in Slurm's very second), every job on Slurm's nodes
    row = with_log("s81")
    assert row["jobs"] == 60 and round(row["mean_wait_slurm_s"] * 60) == 71
    assert round(row["mean_wait_other_s"] * 60) == 71, row
    assert row["within_5s"] == 1.0 and row["same_nodes"] == 1.0, row


def test_s54_with_its_log_starts_every_job_within_5_s_on_slurms_nodes():
    # development recording s54 (6 nodes, backfill with bf_interval=5, multifactor, CR_CPU): backfill's
    # cycles are bf_interval apart on the looks its log shows; with the trace's epoch seconds the look
    # bf_interval after a cycle was taken for the one after it (tests/test_slurmctld_loop.py), every
    # cycle came a second late, and j19 (submitted 61 s in) was backfilled at 61.9 s on n05,n06 where
    # Slurm's main scheduler gave it n01,n02 at 64 s: 32 of 60 within 5 s, 41 on Slurm's nodes.  On the
    # looks' own chain every job starts within 5 s of Slurm's start and on Slurm's nodes (sacct)
    row = with_log("s54")
    assert row["jobs"] == 60
    assert row["within_5s"] == 1.0 and row["same_nodes"] == 1.0, row

def test_backfills_first_cycle_waits_bf_interval_from_the_threads_start():
    # s90 (bf_interval=10): backfill_agent sleeps bf_interval first (s90 re-recorded with backfill's debug
    # log: plugin loaded at 23.663, cycles at 33.665, 43.666, 53.673), so its cycles fall ~4.5, 14.5,
    # 24.5 s after the first submission, and the one at 24.5 s backfilled j08 (submitted at 21 s; p0,
    # 5 CPUs, 2 min) on n04 before the tier-10 jobs submitted at 29 s took n03/n04 (sacct: j08 +24 s
    # on n04).  Timed from the first submission instead (cycles at 0, 10, 20, 30 s) j08 waited 240 s.
    from bench_slurm_workloads import recorded_schedule, replayed_schedule
    folder = WORKLOADS / "s90" / "run1"
    recorded = recorded_schedule(folder / "trace.txt")
    replayed = replayed_schedule(folder / "trace.txt", folder / "slurm.conf",
                                 slurmctld_log=str(folder / "slurmctld.log"))
    origin = min(submit for submit, _, _ in recorded.values())
    assert recorded["j08"][1] - origin == 24.0 and recorded["j08"][2] == ("n04",)
    assert abs(replayed["j08"][1] - recorded["j08"][1]) < 1.0 and replayed["j08"][2] == ("n04",)


def test_the_background_loop_starts_at_the_take_over_on_the_phase_of_its_passes():
    # s70 (sched_interval=10): slurmctld took over as primary controller 0.6 s after its start line and
    # its passes fall on one phase from there (Slurm's allocations at .6-.8 of their seconds); its
    # full passes come every sched_interval from that take-over.  Timed from the start line instead,
    # every full pass came a pass early and 33 of 60 jobs started within 5 s of Slurm's; on the phase
    # of the passes, at least 57 (development numbers: 58) within 5 s, all on Slurm's nodes
    row = with_log("s70")
    assert row["jobs"] == 60
    assert row["within_5s"] * 60 >= 57 and row["same_nodes"] == 1.0, row


def off_table(folder: Path, table: dict) -> dict:
    """The jobs of ``table`` (job -> (start in whole seconds after the first submission, nodes), as the
    recording's sacct export has them: checked first) that the replay with the recording's log starts a
    second or more away or on other nodes: job -> (its start, its nodes)."""
    from bench_slurm_workloads import recorded_schedule, replayed_schedule
    recorded = recorded_schedule(folder / "trace.txt")
    origin = min(submit for submit, _, _ in recorded.values())
    assert {job: (round(recorded[job][1] - origin), recorded[job][2]) for job in table} == table
    replayed = replayed_schedule(folder / "trace.txt", folder / "slurm.conf", slurmctld_log=str(folder / "slurmctld.log"))
    return {job: (round(replayed[job][1] - origin, 2), replayed[job][2]) for job, (start, nodes) in table.items()
            if abs(replayed[job][1] - origin - start) >= 1.0 or replayed[job][2] != nodes}


# Two development recordings at slurmctld's default log level, each job's start as sacct recorded it
# (whole seconds after the first submission) and its nodes; the replay with the log starts each
# within a second (its passes carry their phase, 0.6-0.7 s into the second) on the same nodes.
# s72 (compressed: submissions 0.2-0.4 s apart; tier 20 "high"): the pass at 14:08:05.647 (3 passes
# after the first, logged at 02.630) allocated j01 and j00 before j02 (tier 20, 7 CPUs) came at 05.700;
# a pass at 05.85 (1.003 s passes from the start line, 58.831) came after j02, which took n01, and j00
# waited 58 s.  s53 (sched/builtin, sched_interval=10): the full pass at 39.686 counts from the
# take-over (19.292), 3 passes before the first (22.594); counted from the start line (18.635) every
# full pass came a pass early, and the request pass 3 s after it (44.66) started j08 alone before
# j09's submission at 44.895; Slurm's at 45.726 started both on n02 (j09 waited 93 s otherwise).
LOGGED_LOOP_TABLES = {
    "s72": {"j00": (0, ("n01", "n02")), "j01": (0, ("n03", "n04")), "j02": (3, ("n04",)), "j05": (3, ("n02", "n04"))},
    "s53": {"j05": (14, ("n03", "n04")), "j06": (14, ("n03", "n04")), "j07": (14, ("n08",)),
            "j08": (17, ("n02",)), "j09": (17, ("n02",)), "j10": (20, ("n01", "n02", "n07"))},
}


@pytest.mark.parametrize("recording", sorted(LOGGED_LOOP_TABLES))
def test_the_logged_loop_starts_each_job_when_and_where_slurm_did(recording):
    assert off_table(WORKLOADS / recording / "run1", LOGGED_LOOP_TABLES[recording]) == {}


# s98/second (12 nodes of 8 CPUs, sched/backfill, bf_interval=10): slurmctld's start line 01:15:43.918, its
# take-over as primary controller 44.475 (the scheduling plugin, and with it backfill_agent, starts right
# after: controller.c), backfill's logged cycles 01:16:04.475, 14.476, 24.477 (20.000, 30.001, 40.002 s after
# the take-over).  Each job's start (whole seconds after the first submission, 01:15:50) and nodes as sacct
# recorded them; with the log the replay starts each within a second, on the same nodes.  Its backfill loop
# counted from the start line instead put every cycle a second early (53.47, 03.47 ...): j08 (p1, -N 2 -n
# 2, submitted 14.0) missed the cycle at 14.48 and went on n11,n12 at the main pass 2.8 s later; j17 and j18
# (submitted at 24.2) waited 1.9 s for the next main pass, j25 went on n09 before j26 took it.
BACKFILL_LOOP_TABLE = {"j08": (24, ("n10", "n11")), "j11": (32, ("n11",)), "j17": (34, ("n06",)),
                       "j18": (34, ("n05",)), "j19": (38, ("n02", "n03", "n04", "n12")),
                       "j25": (54, ("n10", "n11")), "j26": (54, ("n09",)), "j27": (60, ("n02", "n04", "n09", "n10"))}


def test_backfills_loop_starts_at_the_take_over_as_real_slurm_did():
    folder = WORKLOADS / "s98" / "second"
    timing = thread_timing((folder / "slurmctld.log").read_text(), before_s=epoch("2026-11-29T01:15:50"))
    assert timing.controller_s - timing.start_s == pytest.approx(0.557)
    assert off_table(folder, BACKFILL_LOOP_TABLE) == {}


# s2 (4 nodes, sched/backfill, bf_interval=5): slurmctld took over at 03:27:42.879, the first job was submitted
# at 50.525 and allocated by the main scheduler at 51.195; backfill's first start (JobId 3, j02) came at
# 57.886, 15.007 s after the take-over: its thread had cycled with no job at 47.88 (its first look finds
# slurmctld's start-up changes) and slept bf_interval twice.  Each job's start (whole seconds after the first
# submission) and nodes as sacct recorded them; the replay with the log starts each within a second, on the
# same nodes.  Without that empty cycle backfill's first cycle came at the look after the first submission
# (50.9 s) and every later one on that phase: j02 started 9.2 s after the first submission's stamp, and j05
# (p0, 1 CPU) 346 s after it, on n01.
EMPTY_CYCLE_TABLE = {"j02": (7, ("n02",)), "j05": (52, ("n02",)), "j17": (52, ("n04",)), "j19": (73, ("n02",)),
                     "j22": (73, ("n03", "n04"))}


def test_backfills_first_cycle_before_any_job_is_empty_as_real_slurm_did():
    assert off_table(WORKLOADS / "s2" / "run1", EMPTY_CYCLE_TABLE) == {}


def test_a_backfill_start_makes_the_look_bf_interval_later_cycle_again():
    # s93 (bf_interval=2, log at the default level): backfill started j00 at 21:44:05.460; its start set
    # last_job_update to second 05 (backfill.c _start_job: time(NULL)) and the cycle's end set
    # last_backfill_time to 05, so _more_work (>=) held at the look 2 s later: cycles at 07.46 and,
    # after j01's submission and allocation in second 08, at 09.46, each followed by a bf_interval
    # sleep.  j02 (partition high), submitted at 10.188, waited for the cycle at 11.461 ("Started
    # JobId=3 in high on n01"); likewise j05 (21.173 -> 22.464) and j07 (27.175 -> 28.466).  Table:
    # sacct's whole seconds after the first submission (21:44:05) and nodes.  Without the rule the
    # replay's chain had no cycle at 09.46 and started j02 at the look at 10.46 (second 10, +5 s)
    from bench_slurm_workloads import recorded_schedule, replayed_schedule
    from greenslurm.sim.studies.slurm_fidelity import as_slurm_stamps
    folder = WORKLOADS / "s93" / "run1"
    table = {"j02": (6, ("n01",)), "j05": (17, ("n03", "n04", "n05")), "j07": (23, ("n06",))}
    recorded = recorded_schedule(folder / "trace.txt")
    origin = min(submit for submit, _, _ in recorded.values())
    assert {job: (recorded[job][1] - origin, recorded[job][2]) for job in table} == table
    replayed = as_slurm_stamps(replayed_schedule(folder / "trace.txt", folder / "slurm.conf",
                                                 slurmctld_log=str(folder / "slurmctld.log")))
    assert {job: (replayed[job][1] - origin, replayed[job][2]) for job in table} == table


def test_a_log_larger_than_the_memory_is_one_line_and_exit_2(tmp_path):
    # a gzip bomb: 0.3 MB that decompress to 300 MiB of NUL bytes, read by a process allowed 700 MiB of
    # address space (RLIMIT_AS): the log is read a line at a time, and this one line of 300 MiB ran out of
    # memory; the MemoryError came out as a traceback (exit 1)
    import gzip
    import resource
    bomb = tmp_path / "slurmctld.log.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as handle:
        for _ in range(300):
            handle.write(bytes(2 ** 20))
    limit = 700 * 2 ** 20
    run = subprocess.run([sys.executable, "-m", "greenslurm", "replay", str(S98 / "trace.txt"), "--format", "sacct",
                          "--slurm-conf", str(S98 / "slurm.conf"), "--queue", "slurm", "--slurmctld-log", str(bomb)],
                         capture_output=True, text=True, cwd=tmp_path,
                         preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_AS, (limit, limit)))
    assert run.returncode == 2 and run.stdout == "", run.stderr[-2000:]
    assert run.stderr.count("\n") == 1 and f"{bomb}: the slurmctld log does not fit in memory" in run.stderr, run.stderr

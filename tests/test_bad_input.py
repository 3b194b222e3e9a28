"""Malformed input to every command and option: each case ends as ONE line on stderr
``greenslurm: error: ...`` naming the file or the option/field, exit code 2, never a traceback, a hang
or a silently accepted value that cannot be physical.

The cases are generated from tables (bad files x the options that read them, bad numbers x the numeric
options, bad TOML keys x the TOML files, options that do not apply, output paths that cannot be
written) and run in-process through :func:`greenslurm.cli.main` (a case that does not return within
``STALL_S`` fails as stalled; that is a hang detector, not a timing assertion).  ``test_case_count``
prints the number of cases per command.

The property tests at the end feed random bytes and random lines as a trace to the commands.
"""

from __future__ import annotations

import argparse
import collections
import json
import signal
import traceback
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from greenslurm.cli import build_parser, main
from test_cli import TINY_SWF

DATA = Path(__file__).parent / "data"
STALL_S = 120
D = "{d}"                      # the fixture folder, filled in when a case runs

SACCT = ("JobID|Submit|Start|End|NCPUS|Timelimit|State\n"
         "1|2024-01-01T00:00:00|2024-01-01T00:00:10|2024-01-01T00:10:00|2|00:20:00|COMPLETED\n"
         "2|2024-01-01T00:01:00|2024-01-01T00:02:00|2024-01-01T00:05:00|1|00:10:00|COMPLETED\n")
PODS = ("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
        "scheduled_time\n"
        "a,1000,1024,1,500,,LS,Running,0,1000,0\n"
        "b,1000,1024,1,500,,LS,Running,10,1000,10\n")
NODES = "sn,cpu_milli,memory_mib,gpu,model\nn0,8000,65536,1,T4\nn1,8000,65536,1,T4\n"
CLUSTER = 'name = "tiny"\n[[node_group]]\nname = "n"\ncount = 2\ncpus = 2\nidle_w = 100.0\nbusy_w = 200.0\n'
SLURM_CONF = ("ClusterName=tiny\nNodeName=c[1-2] CPUs=2 RealMemory=8000\n"
              "PartitionName=p Nodes=c[1-2] Default=YES MaxTime=UNLIMITED\n")
STUDY = ('[sweep]\nname = "s"\nseeds = 1\n[[trace]]\nname = "t"\nsynthetic = { jobs = 5 }\n'
         'cluster = { nodes = 2, cpus = 2 }\n[[policy]]\nname = "fcfs"\nqueue = "fcfs"\n')
SCENARIO = '[trace]\npath = "tiny.swf"\n'
INFLATE_CSV = ("trace,policy,normalization,ties,seed,arrived_pct,arrived_gpu,allocated_gpu,grar,allocated_gpu_pct,"
               "unallocated_gpu_pct,eopc_w,eopc_cpu_w,eopc_gpu_w,frag_gpu,frag_pct_of_free,tasks,failed_tasks\n"
               "t,fgd,paper,first,42,1.0,1,1,1.0,50.0,50.0,300.0,100.0,200.0,0.5,10.0,1,0\n")


def swf_line(run_s="100", procs="2", limit="100", submit="0") -> str:
    return f"1 {submit} -1 {run_s} {procs} -1 -1 {procs} {limit} -1 1 1 1 -1 -1 -1 -1 -1\n"


HEADER = "; MaxNodes: 2\n; MaxProcs: 2\n"
# name -> content (bytes or text); a name ending in "/" is a folder
FILES = {
    "tiny.swf": TINY_SWF, "sacct.txt": SACCT, "pods.csv": PODS, "nodes.csv": NODES, "cluster.toml": CLUSTER,
    "slurm.conf": SLURM_CONF, "study.toml": STUDY, "tiny.toml": SCENARIO, "inflate.csv": INFLATE_CSV,
    "sinfo.json": (DATA / "sinfo-json-v0.0.38.json").read_text(),
    "empty.swf": "", "empty.toml": "", "empty.csv": "", "empty.json": "", "blank.txt": "\n  \n\n",
    "binary.bin": bytes(range(256)) * 4, "binary.toml": b"\x00\xff\xfe" * 50,
    "binary.json": b"\x89PNG\r\n\x1a\n\x00\x00" * 20,
    "latin1.txt": "JobID|Submit\n1|caf\xe9\n".encode("latin-1"),
    "truncated.json": '{"jobs": [{"job_id": 1, "time": {"submission": 1',
    "truncated.gz": b"\x1f\x8b\x08\x00" + b"\x00" * 5,
    "junk.toml": "this is = = not toml [[[\n",
    "junk.csv": "a;b;c\n1;2;3\n",
    "a-dir/": None,
    "\udcff\udcfe.swf": TINY_SWF,                       # a file name that is not UTF-8 (Linux allows it)
    # physically impossible records (refused under --strict; counted as skipped otherwise)
    "huge-runtime.swf": HEADER + swf_line(run_s="1e300", limit="1e300"),
    "nan-runtime.swf": HEADER + swf_line(run_s="nan"),
    "inf-limit.swf": HEADER + swf_line(limit="inf"),
    "century.swf": HEADER + swf_line(run_s=str(200 * 365 * 86400), limit=str(200 * 365 * 86400)),
    "huge-procs.swf": HEADER + swf_line(procs="1e30"),
    "swapped.swf": HEADER + "1 0 -1 100 abc -1 -1 2 100 -1 1 1 1 -1 -1 -1 -1 -1\n",
    "huge-runtime.txt": "JobID|Submit|Start|End|NCPUS|Timelimit|State\n"
                        "1|2024-01-01T00:00:00|2024-01-01T00:00:10|9999-01-01T00:10:00|2|UNLIMITED|COMPLETED\n",
    "huge-limit.txt": "JobID|Submit|Start|End|NCPUS|Timelimit|State\n"
                      "1|2024-01-01T00:00:00|2024-01-01T00:00:10|2024-01-01T00:10:00|2|99999999-00:00:00|COMPLETED\n",
    "huge-pods.csv": PODS.splitlines()[0] + "\na,1000,1024,1,500,,LS,Running,0,1e300,0\n",
    "huge-time.json": json.dumps({"jobs": [{"job_id": 1, "state": {"current": ["COMPLETED"]},
                                            "time": {"submission": 0, "start": 10, "end": 1e300, "limit": 60},
                                            "required": {"CPUs": 1}}]}),
    "neg-power.toml": CLUSTER.replace("idle_w = 100.0", "idle_w = -100.0"),
    "inverted.toml": CLUSTER.replace("idle_w = 100.0", "idle_w = 500.0"),
    "nan-power.toml": CLUSTER.replace("busy_w = 200.0", "busy_w = nan"),
    "inf-power.toml": CLUSTER.replace("busy_w = 200.0", "busy_w = inf"),
    "zero-nodes.toml": CLUSTER.replace("count = 2", "count = 0"),
    "huge-nodes.toml": CLUSTER.replace("count = 2", "count = 100000000000"),
    "neg-cpus.toml": CLUSTER.replace("cpus = 2", "cpus = -2"),
    "str-cpus.toml": CLUSTER.replace("cpus = 2", 'cpus = "two"'),
    "unknown-key.toml": CLUSTER + "colour = \"green\"\n",
    "no-groups.toml": 'name = "x"\n',
    "bad-conf.conf": "NodeName=c[1-2] CPUs=-4\nPartitionName=p Nodes=c[1-2]\n",
    "binary.conf": b"\x00\x01\x02NodeName=\xff\xfe\n",
    "bad-sinfo.json": '{"nodes": [{"name": "n1", "cpus": -4, "real_memory": 1000, "state": "idle"}]}',
    "list-sinfo.json": "[1, 2, 3]",
    "bad-supply.csv": "time_s,watts\n0,-50\n3600,100\n",
    "nan-supply.csv": "time_s,watts\n0,nan\n3600,100\n",
    "unsorted-supply.csv": "time_s,watts\n3600,10\n0,100\n",
    "assoc.txt": "garbage without any header\n\x01\x02\n",
    "good-assoc.txt": "Cluster|Account|User|Partition|Share|QOS|Def QOS\nc|root|||1|normal|\n"
                      "c| root|root||1|normal|\n",
    "qos.txt": "Name|Priority\nnormal|-5\n",
    "results.parquet": b"PAR1 not really parquet",
}


def _options_of_commands() -> dict[str, dict[str, bool]]:
    """command -> {option string: shown in --help} (an option hidden from help is a deprecated alias)."""
    found: dict[str, dict[str, bool]] = {}

    def walk(parser: argparse.ArgumentParser, name: str) -> None:
        found[name] = {}
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub_name, sub in action.choices.items():
                    walk(sub, f"{name} {sub_name}".strip())
            for option in action.option_strings:
                found[name][option] = action.help != argparse.SUPPRESS
    walk(build_parser(), "")
    return found


OPTIONS = _options_of_commands()


def opt(command: str, *spellings: str) -> str:
    """The first of ``spellings`` that ``command`` has and shows in its help (option names are being
    unified across commands: the current name, never a deprecated alias that would add a warning line)."""
    for spelling in spellings:
        if OPTIONS[command].get(spelling):
            return spelling
    raise AssertionError(f"greenslurm {command} has none of {spellings}")


@dataclass(frozen=True)
class Case:
    command: str               # the command it exercises, for the counts
    argv: tuple[str, ...]
    names: str                 # what the error line must name: a file name, an option or a TOML field
    #                            ('a|b': either; an option also matches without its dashes, or as a_b)


CASES: list[Case] = []
# options being renamed (the current name; the old one is a deprecated alias that adds a warning line)
SLACK = opt("whatif", "--slack-mean", "--slack")
SUPPLY = opt("whatif", "--renewable", "--supply")
SUPPLY_PEAK = opt("whatif", "--renewable-scale", "--supply-peak")
IDLE_NODE_W = opt("replay", "--colocation-idle-node-w", "--idle-node-w")
FIRST_JOBS = opt("compare", "--limit", "--first-jobs")


def case(command: str, names: str, *argv: str) -> None:
    CASES.append(Case(command, tuple(argv), names))


def toml_file(name: str, text: str) -> str:
    """A TOML file the case writes (returned as the path inside the fixture folder)."""
    GENERATED[name] = text
    return f"{D}/{name}"


GENERATED: dict[str, str] = {}


# -- bad files where a file is read ------------------------------------------------------------
BAD_FILES = ["missing.swf", "empty.swf", "a-dir", "binary.bin", "blank.txt"]
TRACE_ONLY = ["truncated.json", "truncated.gz", "latin1.txt", "junk.csv", "/dev/null", "/dev/zero"]
for name in BAD_FILES + TRACE_ONLY:
    shown = name if name.startswith("/") else f"{D}/{name}"
    case("replay", name, "replay", shown, "--cluster", f"{D}/cluster.toml")
    case("traces info", name, "traces", "info", shown)
    case("whatif", name, "whatif", shown, "--cluster", f"{D}/cluster.toml", "-j", "1")
    case("compare", name, "compare", shown, "--cores", "2")
for name in ["missing.swf", "empty.swf", "a-dir", "binary.bin", "/dev/zero"]:
    path = name if name.startswith("/") else f"{D}/{name}"      # /dev/zero never ends: never read it
    # an empty hook.toml or power profile is the defaults (the shipped hook.toml is all comments)
    configs = ("install", "check", "serve") if name != "empty.swf" else ()
    for option in ("--cluster", "--nodes", "--slurm-conf", "--power-config", "--renewable"):
        if not (option == "--power-config" and name == "empty.swf"):
            case("replay", name, "replay", f"{D}/tiny.swf", option, path)
    case("demo", name, "demo", "--cluster", path)
    case("run", name, "run", path)
    case("sweep", name, "sweep", path)
    case("inflate", name, "inflate", "--nodes", path, "--pods", f"{D}/pods.csv")
    case("inflate", name, "inflate", "--nodes", f"{D}/nodes.csv", "--pods", path)
    case("compare", name, "compare", f"{D}/tiny.swf", "--cluster", path)
    case("whatif", name, "whatif", f"{D}/sacct.txt", "--cluster-from-slurm", path, "-j", "1")
    case("whatif", name, "whatif", f"{D}/sacct.txt", "--slurm-conf", path, "-j", "1")
    case("report", name, "report", path)      # /dev/zero: refused unread (it was read until memory ran out)
    for action in configs:
        case(f"hook {action}", name, "hook", action, "--config", path)
case("report", "results.parquet", "report", f"{D}/results.parquet")
case("report", "junk.csv", "report", f"{D}/junk.csv")
case("replay", "sacctmgr", "replay", f"{D}/tiny.swf", "--slurm-conf", f"{D}/slurm.conf", "--queue", "slurm",
     "--sacctmgr-assoc", f"{D}/assoc.txt")
case("replay", "qos.txt", "replay", f"{D}/tiny.swf", "--slurm-conf", f"{D}/slurm.conf", "--queue", "slurm",
     "--sacctmgr-assoc", f"{D}/good-assoc.txt", "--sacctmgr-qos", f"{D}/qos.txt")
# the site's slurmctld log (the slurm queue's threads timed from it): unreadable, of another period,
# with a stamp that is no time, without slurmctld's start, or given to a queue that has no such threads
SLURM_TINY = ("replay", f"{D}/sacct.txt", "--slurm-conf", f"{D}/slurm.conf", "--queue", "slurm")
for name in ["missing.swf", "empty.swf", "a-dir", "binary.bin", "/dev/zero"]:
    case("replay", name, *SLURM_TINY, "--slurmctld-log", name if name.startswith("/") else f"{D}/{name}")
for name, text in [("late.log", "[2030-01-01T00:00:00.000] slurmctld version 22.05.8 started on cluster c\n"),
                   ("month13.log", "[2023-13-01T00:00:00.000] slurmctld version 22.05.8 started on cluster c\n"),
                   ("nostart.log", "[2023-12-31T23:00:00.000] _job_complete: JobId=1 done\n")]:
    case("replay", name, *SLURM_TINY, "--slurmctld-log", toml_file(name, text))
case("replay", "--slurmctld-log", "replay", f"{D}/sacct.txt", "--slurm-conf", f"{D}/slurm.conf", "--queue", "easy",
     "--slurmctld-log", toml_file("ok.log", "[2023-12-31T23:00:00.000] slurmctld version 22.05.8 started on c\n"))
case("replay", "\\xff\\xfe.swf", "replay", f"{D}/\udcff\udcfe.swf", "--format", "sacct", "--strict")
case("traces info", "\\xff\\xfe.swf", "traces", "info", f"{D}/\udcff\udcfe.swf", "--format", "sacct-json")

# -- records that cannot be physical, under --strict ----------------------------------------------
for name in ["huge-runtime.swf", "nan-runtime.swf", "inf-limit.swf", "century.swf", "huge-procs.swf",
             "swapped.swf", "huge-runtime.txt", "huge-limit.txt", "huge-pods.csv", "huge-time.json"]:
    case("traces info", name, "traces", "info", f"{D}/{name}", "--strict")
    case("replay", name, "replay", f"{D}/{name}", "--strict", "--cluster", f"{D}/cluster.toml")
case("traces info", "sacct.txt", "traces", "info", f"{D}/sacct.txt", "--format", "swf", "--strict")
case("traces info", "tiny.swf", "traces", "info", f"{D}/tiny.swf", "--format", "sacct-json")
case("traces info", "tiny.swf", "traces", "info", f"{D}/tiny.swf", "--format", "alibaba")

# -- cluster files and node power that cannot be physical -----------------------------------------------
for name in ["neg-power.toml", "inverted.toml", "nan-power.toml", "inf-power.toml", "zero-nodes.toml",
             "huge-nodes.toml",
             "neg-cpus.toml", "str-cpus.toml", "unknown-key.toml", "no-groups.toml", "junk.toml", "binary.toml"]:
    case("replay", name, "replay", f"{D}/tiny.swf", "--cluster", f"{D}/{name}")
    case("whatif", name, "whatif", f"{D}/sacct.txt", "--cluster", f"{D}/{name}", "-j", "1")
for name in ["neg-power.toml", "inverted.toml", "zero-nodes.toml"]:
    case("compare", name, "compare", f"{D}/tiny.swf", "--cluster", f"{D}/{name}")
for name in ["bad-conf.conf", "binary.conf"]:
    case("replay", name, "replay", f"{D}/tiny.swf", "--slurm-conf", f"{D}/{name}")
for name in ["bad-sinfo.json", "list-sinfo.json", "truncated.json", "binary.json"]:
    case("whatif", name, "whatif", f"{D}/sacct.txt", "--cluster-from-slurm", f"{D}/{name}", "-j", "1")
for idle, busy, option in [("-100", "200", "--node-idle-w|idle_w"), ("100", "-5", "--node-busy-w|busy_w"),
                           ("500", "200", "--node-busy-w|busy_w"), ("nan", "200", "--node-idle-w|idle_w"),
                           ("100", "inf", "--node-busy-w|busy_w"), ("1e300", "1e301", "--node-idle-w|idle_w")]:
    case("whatif", option, "whatif", f"{D}/sacct.txt", "--cluster-from-slurm", f"{D}/sinfo.json",
         "--node-idle-w", idle, "--node-busy-w", busy, "-j", "1")
    case("whatif", option, "whatif", f"{D}/sacct.txt", "--slurm-conf", f"{D}/slurm.conf",
         "--node-idle-w", idle, "--node-busy-w", busy, "-j", "1")
for name in ["bad-supply.csv", "nan-supply.csv", "unsorted-supply.csv", "empty.csv"]:
    case("replay", name, "replay", f"{D}/tiny.swf", "--renewable", f"{D}/{name}")
    case("whatif", name, "whatif", f"{D}/sacct.txt", "--cluster", f"{D}/cluster.toml", SUPPLY, f"{D}/{name}",
         "-j", "1")

# -- numbers out of range on every numeric option -------------------------------------------------------
REPLAY_NUMBERS = {
    "--arrival-scale": ["0", "-1", "nan", "inf", "1e300"], "--seed": ["-1", "x"], "--fgd-coverage": ["0", "1.5", "nan"],
    "--slack-mean": ["0", "-1", "nan", "inf"], "--slack-sigma": ["-1", "nan"], "--slack-seed": ["-1"],
    "--threshold-share": ["2", "-0.1", "nan"], "--threshold-slack": ["-1", "nan"],
    "--renewable-scale": ["0", "-1", "inf"], "--renewable-seed": ["-1"],
    "--power-down-after": ["-1", "nan", "1e300"], "--boot-s": ["-1", "1e300"], "--boot-w": ["-1", "nan"],
    "--off-w": ["-1", "inf"], "--power-budget": ["0", "-5", "nan"], "--phases": ["0", "-1", "100000"],
    "--nodes-per-cabinet": ["0", "-3"], "--consolidate-every": ["0", "nan"],
    "--gpu-nodes": ["0", "-1", "1e12", "99999999"],
    "--max-jobs-per-set": ["0", "-1"], IDLE_NODE_W: ["-1", "nan"],
}
# what each option needs beside it to apply (so that the value, not the combination, is refused)
NEEDS = {
    "--fgd-coverage": ["--select", "fgd", "--queue", "none"], "--slack-sigma": ["--slack-mean", "1"],
    "--slack-seed": ["--slack-mean", "1"], "--threshold-share": ["--acceptance", "threshold"],
    "--threshold-slack": ["--acceptance", "threshold"], "--renewable-scale": ["--renewable", "solar"],
    "--renewable-seed": ["--renewable", "solar"], "--boot-s": ["--power-down-after", "60"],
    "--boot-w": ["--power-down-after", "60"], "--off-w": ["--power-down-after", "60"],
    "--phases": ["--power-down-after", "60"], "--nodes-per-cabinet": ["--power-down-after", "60"],
    "--consolidate-every": ["--power-down-after", "60"], "--gpu-nodes": ["--colocation", "eaco"],
    "--max-jobs-per-set": ["--colocation", "eaco"], IDLE_NODE_W: ["--colocation", "eaco"],
}
GPU_OPTIONS = {"--fgd-coverage"}
for option, values in REPLAY_NUMBERS.items():
    for value in values:
        trace = ([f"{D}/pods.csv", "--nodes", f"{D}/nodes.csv"] if option in GPU_OPTIONS else [f"{D}/tiny.swf"])
        case("replay", option, "replay", *trace, *NEEDS.get(option, []), option, value)
    case("demo", option, "demo", *NEEDS.get(option, []), option, values[0])
NAMES = {"--max-jobs-per-set": "--max-jobs-per-set|max_jobs"}
COMPARE_NUMBERS = {"--cores": ["0", "-1"], "--parallelism-limit": ["0", "-2"], FIRST_JOBS: ["0", "-5"],
                   "--workers": ["0", "-1"], "--slack-mean": ["0", "nan"], "--slack-sigma": ["-1"],
                   "--threshold-share": ["5"], "--renewable-scale": ["0"], "--power-budget": ["-1", "nan"],
                   "--phases": ["0"], "--gpu-nodes": ["0"], "--max-jobs-per-set": ["0"], "--boot-s": ["-1"]}
for option, values in COMPARE_NUMBERS.items():
    for value in values:
        extra = ["--cores", "2"] if option != "--cores" else []
        case("compare", NAMES.get(option, option), "compare", f"{D}/tiny.swf", *extra, *NEEDS.get(option, []),
             option, value)
INFLATE_NUMBERS = {"--seeds": ["0", "-1"], "--first-seed": ["-1"], "--until": ["0", "-1", "nan", "inf", "1e9"],
                   "--fgd-coverage": ["0", "2", "nan"], "--step": ["0", "-1", "nan", "inf"],
                   "--workers": ["0", "-1"], "--select": ["nope", "pwr=-1,fgd=1", "pwr=nan", "pwr=0,fgd=0"],
                   "--seeds ": ["10000000"], "--step ": ["1e-9"]}
for option, values in INFLATE_NUMBERS.items():
    for value in values:
        case("inflate", option.strip(), "inflate", "--nodes", f"{D}/nodes.csv", "--pods", f"{D}/pods.csv", "--seeds",
             "1", "--no-progress", "--csv", f"{D}/out-inflate.csv", option.strip(), value)
SWEEP_NUMBERS = {"--workers": ["0", "-1"], "-j": ["0"], "--max-cells": ["-1", "x"]}
for option, values in SWEEP_NUMBERS.items():
    for value in values:
        case("sweep", option.lstrip("-") if option != "-j" else "workers", "sweep", f"{D}/study.toml",
             "--out", f"{D}/sweep-results", "--no-progress", option, value)
case("report", "gantt-jobs", "report", f"{D}/inflate.csv", "--gantt-jobs", "-1")
case("report", "gantt-jobs", "report", f"{D}/inflate.csv", "--gantt-jobs", "0")
WHATIF_NUMBERS = {SLACK: ["0", "-1", "nan", "inf"], "--seed": ["-1"], SUPPLY_PEAK: ["-1", "nan", "0"],
                  "--limit": ["-5", "0"], "--workers": ["0", "-2"], "-j": ["0"],
                  "--start-tolerance": ["-1", "nan"]}
for option, values in WHATIF_NUMBERS.items():
    for value in values:
        extra = [SUPPLY, "solar"] if option == SUPPLY_PEAK else []
        case("whatif", option.lstrip("-") if option != "-j" else "workers", "whatif", f"{D}/sacct.txt",
             "--cluster", f"{D}/cluster.toml", *extra, option, value)
for policy, names in [("nope", "nope"), ("easy:foo=1", "foo"), ("deadline:acceptance=nope", "acceptance"),
                      ("easy:power_states.boot_s=-1", "boot_s"), ("easy:select", "select"),
                      ("easy:power_states.phases=x", "phases"), ("easy:select=nope", "select"),
                      ("deadline:renewable=green", "renewable"), ("fcfs:share=0.5", "share"),
                      ("easy:power_states.budget_w=nan", "budget_w"), ("=easy", "policy"),
                      ("recorded=easy", "recorded"), ("easy:power_states.suspend_after_s=1e300", "suspend_after_s"),
                      ("easy:power_states.suspend_rate=-1", "suspend_rate"),
                      ("easy:power_states.resume_rate=1.5", "resume_rate"),
                      ("slurm:power_states.resume_rate=5", "resume_rate")]:
    case("whatif", names, "whatif", f"{D}/sacct.txt", "--cluster", f"{D}/cluster.toml", "-j", "1",
         "--candidate", policy)
case("whatif", "lifo", "whatif", f"{D}/sacct.txt", "--cluster", f"{D}/cluster.toml", "--current", "lifo")
case("whatif", "format", "whatif", f"{D}/sacct.txt", "--cluster", f"{D}/cluster.toml", "--format", "csvx")
case("whatif", "columns", "whatif", f"{D}/sacct.txt", "--cluster", f"{D}/cluster.toml", "--columns", "A||B")

# -- options that do not apply ------------------------------------------------------------------------
for extra, names in [(["--threshold-share", "0.5"], "threshold-share"), (["--slack-sigma", "1"], "slack-sigma"),
                     (["--normalization", "clean"], "normalization"), (["--ties", "random"], "ties"),
                     (["--sacctmgr-assoc", f"{D}/assoc.txt"], "sacctmgr-assoc"),
                     (["--renewable-mode", "green"], "renewable"), (["--boot-s", "100"], "boot-s"),
                     (["--gpu-nodes", "2"], "gpu-nodes"), (["--columns", "JobID|Submit"], "columns"),
                     (["--colocation", "nope"], "colocation"), (["--select", "nope"], "select"),
                     (["--acceptance", "maybe"], "acceptance"), (["--queue", "lifo"], "queue"),
                     (["--select", "fgd"], "select"), (["--save-scenario", "-", "--json", "-"], "save-scenario"),
                     (["--cluster", f"{D}/cluster.toml", "--nodes", f"{D}/nodes.csv"], "nodes"),
                     (["--renewable", "tidal"], "tidal"), (["--bogus"], "bogus")]:
    case("replay", names, "replay", f"{D}/tiny.swf", *extra)
case("compare", "cores", "compare", f"{D}/tiny.swf", "--cores", "2", "--cluster", f"{D}/cluster.toml")
case("compare", "select", "compare", f"{D}/tiny.swf", "--cores", "2", "--select", "pwr")
case("compare", "colocation", "compare", f"{D}/tiny.swf", "--cores", "2", "--colocation", "nope")
case("demo", "format", "demo", "--format", "swf")
case("inflate", "nodes", "inflate", "--pods", f"{D}/pods.csv")
case("inflate", "tiny.swf", "inflate", "--nodes", f"{D}/tiny.swf", "--pods", f"{D}/pods.csv", "--seeds", "1")
case("whatif", "cluster", "whatif", f"{D}/sacct.txt")
case("hook install", "print", "hook", "install", "--print", "everything")
case("hook serve", "bogus", "hook", "serve", "--bogus")
case("traces info", "COMMAND", "traces")
case("traces info", "format", "traces", "info", f"{D}/tiny.swf", "--format", "csv")

# -- output paths that are folders or cannot be written -------------------------------------------------
for option, value, names in [("--json", f"{D}/a-dir", "a-dir"), ("--json", "/dev/null/x.json", "x.json"),
                             ("--out", f"{D}/tiny.swf", "tiny.swf"),
                             ("--out", "/proc/greenslurm-out", "greenslurm-out"),
                             ("--save-scenario", f"{D}/a-dir", "a-dir"), ("--json", "", "json"), ("--out", "", "out")]:
    case("replay", names, "replay", f"{D}/tiny.swf", option, value)
case("demo", "a-dir", "demo", "--json", f"{D}/a-dir")
case("run", "a-dir", "run", f"{D}/tiny.toml", "--json", f"{D}/a-dir")
case("run", "tiny.swf", "run", f"{D}/tiny.toml", "--out", f"{D}/tiny.swf")
case("traces info", "a-dir", "traces", "info", f"{D}/tiny.swf", "--json", f"{D}/a-dir")
case("compare", "a-dir", "compare", f"{D}/tiny.swf", "--cores", "2", "--csv", f"{D}/a-dir")
case("compare", "x.csv", "compare", f"{D}/tiny.swf", "--cores", "2", "--csv", "/dev/null/x.csv")
case("inflate", "a-dir", "inflate", "--nodes", f"{D}/nodes.csv", "--pods", f"{D}/pods.csv", "--csv", f"{D}/a-dir")
case("inflate", "tiny.swf", "inflate", "--nodes", f"{D}/nodes.csv", "--pods", f"{D}/pods.csv", "--seeds", "1",
     "--csv", f"{D}/o.csv", "--plots", f"{D}/tiny.swf")
case("sweep", "tiny.swf", "sweep", f"{D}/study.toml", "--out", f"{D}/tiny.swf")
case("report", "tiny.swf", "report", f"{D}/inflate.csv", "--plots", f"{D}/tiny.swf")
case("whatif", "a-dir", "whatif", f"{D}/sacct.txt", "--cluster", f"{D}/cluster.toml", "-j", "1",
     "--json", f"{D}/a-dir")
case("whatif", "x.json", "whatif", f"{D}/sacct.txt", "--cluster", f"{D}/cluster.toml", "-j", "1",
     "--json", "/dev/null/x.json")
case("whatif", "tiny.swf", "whatif", f"{D}/sacct.txt", "--cluster", f"{D}/cluster.toml", "-j", "1",
     "--out", f"{D}/tiny.swf")
case("hook install", "tiny.toml", "hook", "install", "--write-config", f"{D}/tiny.toml")
case("hook install", "x.toml", "hook", "install", "--write-config", "/dev/null/x.toml")
case("hook install", "tiny.swf", "hook", "install", "--dest", f"{D}/tiny.swf")
case("hook install", "tiny.swf", "hook", "install", "--unit-dir", f"{D}/tiny.swf")
case("hook install", "service-user", "hook", "install", "--print", "unit", "--service-user", "bad\nuser")
case("hook install", "greenslurm", "hook", "install", "--print", "unit", "--greenslurm", "")

# -- TOML files: wrong types, unknown keys, values out of range -------------------------------------------
for i, (body, names) in enumerate([
    ("", "trace"), ("queue = 5\n" + SCENARIO, "queue"), ("colour = 1\n" + SCENARIO, "colour"),
    ("seed = -1\n" + SCENARIO, "seed"), ("arrival_scale = 0.0\n" + SCENARIO, "arrival_scale"),
    ("arrival_scale = nan\n" + SCENARIO, "arrival_scale"), ("arrival_scale = inf\n" + SCENARIO, "arrival_scale"),
    ("arrival_scale = 1e300\n" + SCENARIO, "arrival_scale"),
    ('[trace]\npath = "missing.swf"\n', "missing.swf"), ('[trace]\npath = 5\n', "trace.path"),
    ('[trace]\npath = "a-dir"\n', "a-dir"),
    (SCENARIO + "limit = -5\n", "limit"), (SCENARIO + "limit = 0\n", "limit"),
    (SCENARIO + '[cluster]\nfile = "neg-power.toml"\n', "neg-power.toml"),
    (SCENARIO + '[cluster]\nfile = "inverted.toml"\n', "inverted.toml"),
    (SCENARIO + "[cluster]\nhomogeneous = { nodes = 2, cpus = 2, idle_w = nan }\n", "idle_w"),
    (SCENARIO + "[cluster]\nhomogeneous = { nodes = 2, cpus = 2, busy_w = inf }\n", "busy_w"),
    (SCENARIO + "[power_states]\nbudget_w = -1.0\n", "budget_w"),
    (SCENARIO + "[power_states]\nsuspend_after_s = 1e300\n", "suspend_after_s"),
    (SCENARIO + "[power_states]\nboot_s = -5.0\nsuspend_after_s = 60.0\n", "boot_s"),
    (SCENARIO + "[power_states]\nphases = 0\nsuspend_after_s = 60.0\n", "phases"),
    ('queue = "deadline"\n' + SCENARIO + "[deadlines]\nslack_mean = inf\n", "slack_mean"),
    ('queue = "deadline"\n' + SCENARIO + "[deadlines]\nslack_mean = -1.0\n", "slack_mean"),
    (SCENARIO + '[selection]\nname = "nope"\n', "selection"),
    (SCENARIO + '[supply]\nsource = "tidal"\n', "tidal"),
    (SCENARIO + '[supply]\nsource = "solar"\nscale = -1.0\n', "scale"),
    (SCENARIO + "[colocation]\nmax_jobs = 0\n", "colocation"),
    ("[trace]\nsynthetic = { jobs = 0 }\n[cluster]\nhomogeneous = { nodes = 2, cpus = 2 }\n", "jobs"),
    ("[trace]\nsynthetic = { jobs = 100000000000 }\n[cluster]\nhomogeneous = { nodes = 2, cpus = 2 }\n", "jobs"),
    ("[trace]\nsynthetic = { jobs = 5, runtime_median_s = 1e300 }\n[cluster]\nhomogeneous = { nodes = 2, cpus = 2 }\n",
     "runtime_median_s"),
]):
    case("run", names, "run", toml_file(f"scenario-{i}.toml", body))
for i, (body, names) in enumerate([
    (STUDY.replace("seeds = 1", "seeds = 0"), "seeds"), (STUDY.replace("seeds = 1", "seeds = -3"), "seeds"),
    (STUDY.replace("seeds = 1", 'seeds = "many"'), "seeds"), (STUDY + "colour = 1\n", "colour"),
    (STUDY.replace("jobs = 5", "jobs = 0"), "jobs"), (STUDY.replace("jobs = 5", "jobs = -5"), "jobs"),
    (STUDY.replace('queue = "fcfs"', 'queue = "lifo"'), "lifo"), (STUDY + "[grid]\nload = [-1.0]\n", "load"),
    (STUDY + "[grid]\nload = [nan]\n", "load"), (STUDY + "[grid]\nslack = [0.0]\n", "slack"),
    (STUDY + "[grid]\nlimit = [-5]\n", "limit"), (STUDY + "[grid]\nspeed = [1]\n", "speed"),
    (STUDY.replace("cpus = 2 }", "cpus = 2, idle_w = 300.0, busy_w = 100.0 }"), "busy_w"),
    (STUDY.replace("cpus = 2 }", "cpus = 2, idle_w = -1.0 }"), "idle_w"),
    (STUDY.replace("cpus = 2 }", "cpus = 2, busy_w = nan }"), "busy_w"),
    (STUDY.replace("synthetic = { jobs = 5 }", 'path = "missing.swf"'), "missing.swf"),
    (STUDY.replace("[sweep]", "[sweep]\nresults = 5"), "results"),
    (STUDY + "[grid]\narrival_scale = [0.0]\n", "arrival_scale"),
    (STUDY + "[grid]\nruntime_median_s = [1e300]\n", "runtime_median_s"),
]):
    case("sweep", names, "sweep", toml_file(f"study-{i}.toml", body), "--out", f"{D}/sweep-{i}", "-j", "1",
         "--no-progress")
for i, (body, names) in enumerate([
    ("[power_states]\nboot_s = -1.0\n", "boot_s"), ("[power_states]\noff_w = nan\n", "off_w"),
    ("[power_states]\nbudget_w = inf\n", "budget_w"), ("[power_states]\ncolour = 1\n", "colour"),
    ("[power_states]\nphases = 1.5\n", "phases"), ("[power_states]\nsuspend_after_s = \"soon\"\n", "suspend_after_s"),
    ("[colocation]\nmax_jobs = -1\n", "max_jobs"), ("[colocation]\nbeta = nan\n", "beta"),
    ("[other]\nx = 1\n", "other"), ("power_states = 5\n", "power_states"),
]):
    case("replay", names, "replay", f"{D}/tiny.swf", "--power-config", toml_file(f"profile-{i}.toml", body))
for i, (body, names) in enumerate([
    ('[hook]\ntimeout_ms = "x"\n', "timeout_ms"), ("[hook]\ncolour = 1\n", "colour"),
    ("[hook]\ntimeout_ms = -1.0\n", "timeout_ms"), ("[hook]\ntimeout_ms = inf\n", "timeout_ms"),
    ("[hook]\ntimeout_ms = nan\n", "timeout_ms"), ("[hook]\nmax_array_tasks = 0\n", "max_array_tasks"),
    ("[hook]\ndefault_time_limit_s = inf\n", "default_time_limit_s"),
    ("[hook]\ndefault_time_limit_s = 1e300\n", "default_time_limit_s"),
    ("[hook]\nshare = nan\n", "share"), ("[hook]\nshare = 2.0\n", "share"), ("[hook]\nmin_slack = -1.0\n", "min_slack"),
    ("[hook]\nmin_slack = nan\n", "min_slack"), ("[hook]\nsync_interval_s = inf\n", "sync_interval_s"),
    ("[hook]\nretry_after_s = nan\n", "retry_after_s"), ("[hook]\nselect = \"nope\"\n", "select"),
    ('[hook]\nsocket = "relative.sock"\n', "socket"), ("[hook]\nmax_connections = 1e9\n", "max_connections"),
    ("hook = 5\n", "hook"), ('[hook]\nbackend = "files"\n', "state_dir"),
    ("[hook]\nmax_array_tasks = 1000000000000\n", "max_array_tasks"),
    ('[hook]\nreject_error = "SUCCESS"\n', "reject_error"), ('[hook]\nreject_error = "log_info"\n', "reject_error"),
]):
    for action in ("install", "check", "serve"):
        case(f"hook {action}", names, "hook", action, "--config", toml_file(f"hook-{i}.toml", body))


# -- running a case --------------------------------------------------------------------------------------
class Stalled(Exception):
    pass


def _alarm(signum, frame):
    raise Stalled(f"no answer within {STALL_S} s")


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("bad-input")
    for name, content in {**FILES, **GENERATED}.items():
        path = root / name
        if content is None:
            path.mkdir()
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    return root


def run_case(argv: list[str], capsys) -> tuple[int | None, str]:
    """(exit code, stderr) of ``greenslurm ARGV`` run in this process; a traceback or a stall is
    returned as the code None and the text of what happened."""
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(STALL_S)
    try:
        code = main(argv)
    except SystemExit as stop:
        code = stop.code
    except Stalled as exc:
        return None, f"stalled: {exc}"
    except BaseException:              # noqa: BLE001 - any escaping exception is the failure looked for
        return None, capsys.readouterr().err + traceback.format_exc()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return code, capsys.readouterr().err


def assert_refused(code, err: str, names: str) -> None:
    assert "Traceback" not in err, err
    assert code == 2, f"exit {code}: {err}"
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert lines[0].startswith("greenslurm: error: "), err
    line = lines[0]
    assert any(name in line or name.lstrip("-") in line or name.lstrip("-").replace("-", "_") in line
               for name in names.split("|")), (names, err)


def _id(item: Case) -> str:
    return f"{item.command}:{' '.join(item.argv[1:])}".replace(D, "").encode("ascii", "backslashreplace").decode()


@pytest.mark.parametrize("item", CASES, ids=[_id(c) for c in CASES])
def test_bad_input_is_one_line(item: Case, folder, capsys, monkeypatch):
    monkeypatch.chdir(folder)
    argv = [part.replace(D, str(folder)) for part in item.argv]
    code, err = run_case(argv, capsys)
    assert_refused(code, err, item.names)


COMMANDS = ("replay", "demo", "run", "traces info", "inflate", "compare", "sweep", "report", "whatif",
            "hook install", "hook check", "hook serve")


def test_case_count():
    """Every command has bad-input cases; the counts (for the record): pytest -s prints them."""
    counts = collections.Counter(item.command for item in CASES)
    print("bad-input cases per command: " + ", ".join(f"{c} {counts[c]}" for c in COMMANDS)
          + f"; total {len(CASES)}")
    assert set(counts) == set(COMMANDS)
    assert all(counts[c] >= 5 for c in COMMANDS), counts
    assert len(CASES) >= 200


# -- garbage as a trace, through the commands --------------------------------------------------------
FORMAT_FILES = {"swf": "garbage.swf", "sacct": "garbage.txt", "sacct-json": "garbage.json", "alibaba": "garbage.csv"}
SWF_TOKENS = ["1", "0", "-1", "100", "2", "nan", "inf", "1e300", "-5", "x", "3.5", "99999999999999999999", ""]
SACCT_TOKENS = ["7", "7.batch", "7_[1-3]", "COMPLETED", "CANCELLED by 3", "2024-01-01T00:00:00", "9999-12-31T23:59:59",
                "Unknown", "00:10:00", "99999999-00:00:00", "UNLIMITED", "-1", "0", "", "x", "9" * 40]
POD_TOKENS = ["p", "1000", "-1", "", "nan", "1e300", "x", "T4", "0", "1500", "Running"]
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.sampled_from(["job_id", "time", "submission", "start", "end", "elapsed", "limit", "state", "current",
                         "required", "CPUs", "set", "number", "infinite"]), inner, max_size=5), max_leaves=15)


def _lines(fmt: str):
    if fmt == "swf":
        line = st.lists(st.sampled_from(SWF_TOKENS), min_size=16, max_size=19).map(" ".join)
        return st.lists(line, min_size=1, max_size=5).map(lambda ls: HEADER + "\n".join(ls) + "\n")
    if fmt == "sacct":
        line = st.lists(st.sampled_from(SACCT_TOKENS), min_size=6, max_size=8).map("|".join)
        return st.lists(line, min_size=1, max_size=5).map(
            lambda ls: "JobID|Submit|Start|End|NCPUS|Timelimit|State\n" + "\n".join(ls) + "\n")
    if fmt == "alibaba":
        line = st.lists(st.sampled_from(POD_TOKENS), min_size=10, max_size=12).map(",".join)
        return st.lists(line, min_size=1, max_size=5).map(lambda ls: PODS.splitlines()[0] + "\n" + "\n".join(ls) + "\n")
    return st.lists(JSON_VALUES, min_size=1, max_size=4).map(lambda jobs: json.dumps({"jobs": jobs}))


def _garbage():
    return st.sampled_from(sorted(FORMAT_FILES)).flatmap(
        lambda fmt: st.tuples(st.just(fmt), st.one_of(st.binary(max_size=300), _lines(fmt).map(str.encode))))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(garbage=_garbage())
def test_garbage_trace_through_the_commands(garbage, tmp_path, capsys):
    """Random bytes or lines as a trace: ``traces info``, ``replay`` and ``whatif`` each refuse it in one
    line naming the file, or account for every record (kept + skipped == read; the replay counts the
    same jobs and skips as the reader)."""
    fmt, data = garbage
    trace = tmp_path / FORMAT_FILES[fmt]
    trace.write_bytes(data)
    cluster = tmp_path / "cluster.toml"
    cluster.write_text(CLUSTER if fmt != "alibaba" else CLUSTER.replace("cpus = 2", "cpus = 8\ngpus = 1"))
    out = tmp_path / "out.json"
    code, err = run_case(["traces", "info", str(trace), "--format", fmt, "--json", str(out)], capsys)
    if code != 0:
        assert_refused(code, err, trace.name)
        info = None
    else:
        info = json.loads(out.read_text())
        kept_and_skipped = info["jobs"] + sum(info["skipped"].values())
        if "array range expanded" in info["adjusted"]:
            assert kept_and_skipped >= info["records_read"]
        else:
            assert kept_and_skipped == info["records_read"]
    for argv in (["replay", str(trace), "--format", fmt, "--cluster", str(cluster), "--no-progress"],
                 ["whatif", str(trace), "--format", fmt, "--cluster", str(cluster), "-j", "1",
                  "--candidate", "fcfs"]):
        out.unlink(missing_ok=True)
        code, err = run_case([*argv, "--json", str(out)], capsys)
        if code != 0 or info is None:
            assert_refused(code, err, trace.name)       # a file the reader refused is refused by every command
            continue
        summary = json.loads(out.read_text())
        if argv[0] == "replay":
            assert summary["jobs_total"] == info["jobs"] + sum(info["skipped"].values())
            assert summary["skipped_by_reason"]["reader"] == info["skipped"]

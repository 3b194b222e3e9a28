"""Every shell block of README.md and docs/*.md runs, as a new user would type it.

The blocks of one page run in order in one folder (later blocks use what earlier ones wrote), with the
files the pages name made from real traces (the first jobs of each, so the page runs in seconds) and
the page's absolute site paths (``/etc/slurm``, ``/etc/greenslurm``, ``/var/lib/greenslurm``, ``/tmp``)
moved into that folder.  A block that cannot run in a test (it installs system packages, starts
systemd units or runs real Slurm for many minutes) says so in its fence, ```` ```sh no-run: REASON ````,
and the list of those is checked to stay short and explained.  The user guide's blocks are run by
test_docs.py, which also checks what they wrote.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.S | re.M)
SHELL = {"sh", "bash", "shell"}
RUN_ELSEWHERE = {"user-guide.md",                 # test_docs.py runs it and checks its outputs
                 "hook-green.md"}                 # test_hook_walkthrough.py runs it on real Slurm daemons
SITE_PATHS = ("/etc/slurm", "/etc/greenslurm", "/etc/systemd", "/var/lib/greenslurm", "/tmp/")
SLURM_CONF = """\
ClusterName=phillips
SchedulerType=sched/backfill
SelectType=select/cons_tres
GresTypes=gpu
PriorityType=priority/multifactor
PriorityWeightAge=1000
PriorityWeightJobSize=100
NodeName=cpn-f13-[03-14,32-42]-[01-02] CPUs=8 RealMemory=24000
NodeName=cpn-f11-31,cpn-f12-03-01,cpn-f12-19-02,cpn-f12-20-[01-02] CPUs=12 RealMemory=64000 Gres=gpu:k80:2
PartitionName=crumpet Nodes=cpn-f13-[03-14,32-42]-[01-02] Default=YES
PartitionName=black Nodes=cpn-f13-42-[01-02]
PartitionName=focaccia Nodes=cpn-f11-31,cpn-f12-03-01,cpn-f12-19-02,cpn-f12-20-[01-02]
"""
CLUSTER_TOML = """\
name = "phillips"
[[node_group]]
name = "cpn"
count = 46
cpus = 8
memory_mb = 24000
idle_w = 90.0
busy_w = 280.0
[[node_group]]
name = "gpu"
count = 5
cpus = 12
memory_mb = 64000
gpus = 2
gpu_model = "P100"
idle_w = 120.0
busy_w = 400.0
"""
STUDY_TOML = """\
[sweep]
name = "study"
seeds = 2

[[trace]]
name = "synthetic"
synthetic = { jobs = 60 }
cluster = { nodes = 4, cpus = 8 }

[[policy]]
name = "easy"
queue = "easy"

[[policy]]
name = "fcfs"
queue = "fcfs"

[grid]
slack = [0.5, 2.0]
"""
# sacctmgr's dumps of a site whose users are all under root (every job the same fair-share)
ASSOC_DUMP = """\
Cluster|Account|User|Partition|Share|QOS|Def QOS
phillips|root|||1|normal|
phillips| root|root||1|normal|
"""
QOS_DUMP = "Name|Priority|UsageFactor|GrpTRES|MaxJobsPU\nnormal|0|1.000000||\n"
POWER_TOML = """\
[power_states]
suspend_after_s = 600
boot_s = 300
off_w = 10
"""


def fences(page: Path) -> list[tuple[str, str]]:
    """(info string, body) of every fenced block of the page."""
    return [(info.strip(), body) for info, body in FENCE.findall(page.read_text(encoding="utf-8"))]


def shell_blocks(page: Path) -> list[str]:
    return [body for info, body in fences(page) if info.split()[:1] and info.split()[0] in SHELL
            and "no-run" not in info]


def not_run(page: Path) -> list[str]:
    return [info for info, _ in fences(page) if info.split()[:1] and info.split()[0] in SHELL and "no-run" in info]


def _head(source: Path, target: Path, lines: int, keep_comments: bool = False) -> None:
    """The first ``lines`` records of a trace (with an SWF header's ``;`` lines, which are not records)."""
    out, records = [], 0
    with source.open(encoding="utf-8", errors="surrogateescape") as handle:
        for line in handle:
            if keep_comments and line.startswith(";"):
                out.append(line)
                continue
            if records >= lines:
                break
            out.append(line)
            records += 1
    target.write_text("".join(out), encoding="utf-8", errors="surrogateescape")


def make_site(folder: Path, shared: Path) -> None:
    """The files the pages name, cut from real traces."""
    demo = ROOT / "greenslurm" / "data" / "KTH-SP2-1996-2.1-cln-first2000.swf"
    _head(demo, folder / "log.swf", 400, keep_comments=True)
    _head(shared / "sacct" / "xdmod-phillips.log", folder / "jobs.txt", 301)     # header + 300 jobs
    shutil.copy(folder / "jobs.txt", folder / "sacct-export.txt")
    shutil.copy(ROOT / "tests" / "data" / "sinfo-json-v0.0.38.json", folder / "sinfo.json")
    gpu = shared / "alibaba-gpu-2023"
    for name in ("pods.csv", "openb_pod_list_default.csv"):
        _head(gpu / "openb_pod_list_default.csv", folder / name, 201)                # header + 200 tasks
    for name in ("nodes.csv", "openb_node_list_gpu_node.csv"):
        shutil.copy(gpu / "openb_node_list_gpu_node.csv", folder / name)
    (folder / "cluster.toml").write_text(CLUSTER_TOML)
    (folder / "slurm.conf").write_text(SLURM_CONF)
    (folder / "study.toml").write_text(STUDY_TOML)
    (folder / "power.toml").write_text(POWER_TOML)
    (folder / "assoc.txt").write_text(ASSOC_DUMP)
    (folder / "qos.txt").write_text(QOS_DUMP)
    for site_dir in ("etc/slurm", "etc/greenslurm", "etc/systemd/system", "var/lib/greenslurm", "tmp"):
        (folder / site_dir).mkdir(parents=True, exist_ok=True)
    shutil.copy(folder / "slurm.conf", folder / "etc" / "slurm" / "slurm.conf")


def local_paths(script: str, folder: Path) -> str:
    """The site paths of a page moved into the test's folder."""
    pattern = "|".join(re.escape(path) for path in SITE_PATHS)
    return re.sub(rf"(?<![\w./-])({pattern})", lambda found: f"{folder}{found.group(1)}", script)


def run_blocks(blocks: list[str], folder: Path) -> subprocess.CompletedProcess:
    bin_dir = folder / "bin"
    bin_dir.mkdir(exist_ok=True)
    shim = bin_dir / "greenslurm"                 # this checkout's code, whatever is installed
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m greenslurm "$@"\n')
    shim.chmod(0o755)
    python = bin_dir / "python"
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", MPLBACKEND="Agg", COLUMNS="120",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    script = "set -euo pipefail\n" + "\n".join(local_paths(block, folder) for block in blocks)
    # bench scripts and their data are named relative to the checkout
    script = re.sub(r"(?<![\w./-])bench/", f"{ROOT}/bench/", script)
    return subprocess.run(["bash", "-c", script], cwd=folder, env=env, capture_output=True, text=True,
                          timeout=900)


RUNNABLE = [page for page in PAGES if page.name not in RUN_ELSEWHERE and shell_blocks(page)]


def test_every_fence_names_its_language():
    unnamed = [f"{page.relative_to(ROOT)}: block {number}" for page in PAGES
               for number, (info, _) in enumerate(fences(page), 1) if not info]
    assert not unnamed, "fences without a language (sh, text, toml, ini, python ...): " + ", ".join(unnamed)


def test_blocks_not_run_say_why_and_are_few():
    reasons = [(page.name, info) for page in PAGES for info in not_run(page)]
    for page, info in reasons:
        assert re.search(r"no-run: \S.{8,}", info), f"{page}: '{info}' must give its reason"
    # installing packages, systemd, a running hook service, a site's slurmdbd or Dask scheduler, and
    # real-Slurm benchmark runs of many minutes; everything else runs
    assert len(reasons) <= 12, reasons


def test_pages_with_commands_are_run():
    names = {page.name for page in RUNNABLE}
    assert {"README.md", "power-and-colocation.md", "gpu-scoring.md", "hook-install.md"} <= names, names


@pytest.mark.parametrize("page", RUNNABLE, ids=lambda page: page.name)
def test_shell_blocks_run(page, tmp_path, shared_data):
    make_site(tmp_path, shared_data)
    done = run_blocks(shell_blocks(page), tmp_path)
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{page.name}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    assert "Traceback" not in output, output[-4000:]


def test_readme_python_runs(tmp_path):
    code = "\n\n".join(body for info, body in fences(ROOT / "README.md") if info == "python")
    assert "greenslurm.replay" in code
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, MPLBACKEND="Agg"))
    assert done.returncode == 0, done.stderr[-3000:]


# what a user reads names features and papers, never the project's own bookkeeping
BOOKKEEPING = re.compile(r"\bissue\s*#?\d+\b|\bseed\s+0\d\d\b|shared/seeds|\bseeds/\d|\bsession\b", re.I)


def _help_texts() -> dict[str, str]:
    """Every command's --help, as a user sees it."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        import cli_reference
    finally:
        sys.path.pop(0)
    return {"--help of every command": cli_reference.render()}


def test_user_text_speaks_of_features_not_bookkeeping():
    texts = {page.relative_to(ROOT).as_posix(): page.read_text(encoding="utf-8") for page in PAGES}
    texts.update(_help_texts())
    found = [f"{name}: {match.group(0)!r}" for name, text in texts.items() for match in BOOKKEEPING.finditer(text)]
    assert not found, found
    # the pattern catches what it is for
    assert BOOKKEEPING.search("as in issue 6") and BOOKKEEPING.search("seed 003") and not BOOKKEEPING.search("--seeds 10")


def test_cli_reference_is_current():
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "cli_reference.py"), "--check"], cwd=ROOT,
                          capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))))
    assert done.returncode == 0, done.stderr

"""The documentation's examples run: ```sh blocks of the user guide, ```python blocks of the developer guide."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
FENCE = re.compile(r"^```(\w+)([^\n]*\n.*?)^```\s*$", re.S | re.M)
CLUSTER_TOML = """name = "site"
[[node_group]]
name = "cpn"
count = 8
cpus = 8
memory_mb = 24000
idle_w = 90.0
busy_w = 280.0
[[node_group]]
name = "gpu"
count = 2
cpus = 12
memory_mb = 64000
gpus = 2
gpu_model = "P100"
"""


def blocks(name: str, language: str) -> list[str]:
    # a fence ```sh no-run: REASON is a command a test cannot run (tests/test_doc_commands.py lists them)
    found = [(lang, *body.split("\n", 1)) for lang, body in FENCE.findall((DOCS / name).read_text())]
    return [body for lang, info, body in found if lang == language and "no-run" not in info]


@pytest.fixture
def site(tmp_path, shared_data):
    lines = (shared_data / "sacct" / "xdmod-phillips.log").read_text().splitlines(keepends=True)
    (tmp_path / "jobs.txt").write_text("".join(lines[:300]))
    shutil.copy(ROOT / "tests" / "data" / "sinfo-json-v0.0.38.json", tmp_path / "sinfo.json")
    (tmp_path / "cluster.toml").write_text(CLUSTER_TOML)
    gpu = shared_data / "alibaba-gpu-2023"
    pods = (gpu / "openb_pod_list_default.csv").read_text().splitlines(keepends=True)
    (tmp_path / "pods.csv").write_text("".join(pods[:201]))          # the header and 200 tasks
    shutil.copy(gpu / "openb_node_list_gpu_node.csv", tmp_path / "nodes.csv")
    return tmp_path


def test_the_guides_link_the_other_docs():
    text = (DOCS / "user-guide.md").read_text()
    for page in ("deadlines.md", "gpu-scoring.md", "hook.md", "power-and-colocation.md", "cli.md",
                 "replay-engine.md"):
        assert f"({page}" in text
    assert blocks("user-guide.md", "sh") and blocks("developer-guide.md", "python")


def test_user_guide_commands_run(site):
    script = "set -e\nexport COLUMNS=120\n" + "\n".join(blocks("user-guide.md", "sh"))
    # `greenslurm` is this checkout's code, whatever an installed console script points at
    bin_dir = site / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "greenslurm"
    shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m greenslurm "$@"\n')
    shim.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}", MPLBACKEND="Agg",
               PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    # the timeout guards against a hang only: the guide's commands take about a minute on a quiet machine
    # and several on a loaded one (300 s was reached at a load average of 7)
    done = subprocess.run(["bash", "-c", script], cwd=site, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (site / "first" / "jobs.csv").exists() and (site / "whatif.json").exists()
    # the composed GPU replay ran every task, with power states and the renewable split in its summary
    import json
    composed = json.loads((site / "gpu-easy.json").read_text())
    assert composed["jobs_completed"] == 200 and composed["selection"] == "pwr=0.1,fgd=0.9"
    assert composed["power_states"]["suspends"] > 0 and composed["gpu"]["peak_gpu_allocated_pct"] > 0
    assert (site / "inflate.csv").exists() and json.loads((site / "eaco.json").read_text())
    assert (site / "study-results" / "results.parquet").exists()
    assert "ran 10 cells" in done.stdout and "skipped:" in done.stdout
    assert (site / "replay-figures" / "gantt.png").stat().st_size > 5000
    assert (site / "whatif-figures" / "green-power-energy-over-time.png").exists()
    assert any(p.name.endswith("-vs-slack_mean.png") for p in (site / "figures").iterdir())


def test_developer_guide_python_runs(tmp_path):
    code = "\n\n".join(blocks("developer-guide.md", "python"))
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]

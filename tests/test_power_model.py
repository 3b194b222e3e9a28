"""Every replay report and summary.json says which power model its energy comes from, and whether the
node power was the site's or assumed: two replays of the same jobs with different energies explain
themselves (the demo's cluster file gives 100 W / 200 W; the SWF header gives no power, so 100 W / 350 W)."""

from __future__ import annotations

import json

from greenslurm.cli import main
from greenslurm.inputs import DEMO_TRACE, demo_file


def _summary(tmp_path, capsys, *argv):
    target = tmp_path / "summary.json"
    assert main([*argv, "--no-progress", "--json", str(target)]) == 0
    report = capsys.readouterr().out
    return json.loads(target.read_text()), " ".join(report.split())


def test_the_demo_says_its_cluster_file_gives_node_power(tmp_path, capsys):
    summary, report = _summary(tmp_path, capsys, "demo")
    model = summary["power_model"]
    assert model == {"text": "nodes 100 W idle to 200 W with every CPU allocated, linear in allocated CPUs "
                             "(from greenslurm's bundled kth-sp2.toml)", "assumed": False}
    assert "power model: nodes 100 W idle to 200 W" in report


def test_a_header_built_cluster_says_its_power_is_assumed(tmp_path, capsys):
    with demo_file(DEMO_TRACE) as trace:
        summary, report = _summary(tmp_path, capsys, "replay", str(trace), "--power-down-after", "600")
    model = summary["power_model"]
    assert model["assumed"] is True
    assert model["text"].startswith("nodes 100 W idle to 350 W with every CPU allocated")
    assert "ASSUMED: the trace records no power" in model["text"]
    assert "idle nodes power down after 600 s, draw 10 W while off and boot in 300 s" in model["text"]
    assert "ASSUMED" in report
    # the same 2,000 jobs, more energy: 350 W busy instead of 200 W, and the report says why
    demo, _ = _summary(tmp_path, capsys, "demo")
    assert summary["energy_kwh"] != demo["energy_kwh"]


def test_a_cluster_file_without_power_says_so(tmp_path, capsys):
    cluster = tmp_path / "c.toml"
    cluster.write_text('name = "c"\n[[node_group]]\nname = "n"\ncount = 100\ncpus = 1\n')
    with demo_file(DEMO_TRACE) as trace:
        summary, _ = _summary(tmp_path, capsys, "replay", str(trace), "--cluster", str(cluster))
    assert summary["power_model"]["assumed"] is True
    assert "the cluster file leaves it out" in summary["power_model"]["text"]


def test_mixed_node_groups_are_listed_most_common_first():
    from greenslurm.clustermodel import Cluster
    from greenslurm.clustermodel.node import NodeSpec
    from greenslurm.power_model import node_power_text

    # 2 nodes at 90-280 W, 1 at 120-400 W: the pair held by more nodes first
    cluster = Cluster([NodeSpec("a", 4, idle_w=120.0, busy_w=400.0), NodeSpec("b", 4, idle_w=90.0, busy_w=280.0),
                       NodeSpec("c", 4, idle_w=90.0, busy_w=280.0)])
    assert node_power_text(cluster) == "nodes idle-busy 2 x 90 W-280 W, 1 x 120 W-400 W, linear in allocated CPUs"

"""Admin what-if: the cluster from Slurm's node JSON (22.05 and newer shapes), the one-page report."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from greenslurm.clustermodel import InputError
from greenslurm.cli import main
from greenslurm.cmd_whatif import difference, parse_policy
from greenslurm.traces.slurm_nodes import cluster_from_slurm_nodes, parse_slurm_nodes

DATA = Path(__file__).parent / "data"
SINFO = DATA / "sinfo-json-v0.0.38.json"


def test_sinfo_v0038_fixture():
    nodes = parse_slurm_nodes(SINFO.read_text())
    assert len(nodes) == 35 and sum(n.cpus for n in nodes) == 300 and sum(n.gpus for n in nodes) == 10
    assert {n.name: n.state for n in nodes if not n.available} == {"cpn-f13-33-02": "down", "cpn-f13-36-01": "idle+drain"}
    gpu = next(n for n in nodes if n.name == "cpn-f11-31")
    assert (gpu.cpus, gpu.memory_mb, gpu.gpus, gpu.gpu_model, gpu.partitions) == (12, 64000.0, 2, "K80", ("focaccia",))
    assert next(n for n in nodes if n.name == "cpn-f13-42-01").partitions == ("black", "crumpet")
    cluster = cluster_from_slurm_nodes(nodes, exclude_unavailable=True, idle_w=80.0, busy_w=300.0)
    assert (cluster.size, cluster.total_cpus) == (33, 284)
    assert {n.idle_w for n in cluster.nodes} == {80.0}


def test_newer_sinfo_and_scontrol_shapes():
    # sinfo --json of 23.02+ (v0.0.39+): grouped entries; a node in two partitions counted once
    sinfo = {"sinfo": [
        {"nodes": {"nodes": ["a1", "a2"], "total": 2}, "cpus": {"minimum": 64, "maximum": 64},
         "memory": {"minimum": 256000, "maximum": 256000}, "gres": {"total": "gpu:a100:4(S:0-1)", "used": ""},
         "partition": {"name": "gpu"}, "node": {"state": ["IDLE"]}},
        {"nodes": {"nodes": ["a2", "b1"], "total": 2}, "cpus": {"maximum": 32}, "memory": {"maximum": 128000},
         "gres": {"total": ""}, "partition": {"name": "all"}, "node": {"state": ["DOWN", "NOT_RESPONDING"]}}]}
    nodes = parse_slurm_nodes(json.dumps(sinfo))
    assert [(n.name, n.cpus, n.gpus, n.gpu_model, n.partitions, n.available) for n in nodes] == [
        ("a1", 64, 4, "A100", ("gpu",), True), ("a2", 64, 4, "A100", ("gpu", "all"), True),
        ("b1", 32, 0, None, ("all",), False)]
    # scontrol show nodes --json of 24.x (v0.0.40+): numbers as {"set", "infinite", "number"}, state a list
    scontrol = {"nodes": [{"name": "c1", "cpus": 16, "real_memory": {"set": True, "infinite": False, "number": 64000},
                           "gres": "gpu:v100:2", "state": ["IDLE", "DRAIN"], "partitions": ["p"]}]}
    (node,) = parse_slurm_nodes(json.dumps(scontrol))
    assert (node.memory_mb, node.state, node.available) == (64000.0, "idle+drain", False)
    assert cluster_from_slurm_nodes([node]).nodes[0].gpu_model == "V100M16"     # power figures of a V100


@pytest.mark.parametrize("text, message", [("{", "not JSON"), ('{"jobs": []}', "neither 'nodes'"),
                                           ('{"nodes": []}', "no nodes"),
                                           ('{"nodes": [{"name": "x", "cpus": 0}]}', "without CPUs")])
def test_bad_node_json(text, message):
    with pytest.raises(InputError, match=message):
        parse_slurm_nodes(text)


def test_gres_and_policies():
    (node,) = parse_slurm_nodes('{"nodes": [{"name": "g1", "cpus": 8, "gres": "gpu:tesla:2(S:0),gpu:1"}]}')
    assert (node.gpus, node.gpu_model) == (3, "TESLA")          # typed 2 + untyped 1
    assert parse_policy("easy") == ("easy", "easy", {})
    with pytest.raises(InputError, match="unknown queue"):
        parse_policy("sjf")
    with pytest.raises(InputError, match="NAME=VALUE"):
        parse_policy("deadline:greedy")
    assert difference(10.0, 12.0, True, "num") == "[red]+20.0%[/]"
    assert difference(0, 3, True, "int") == "[red]+3[/]"


def test_whatif_on_phillips(shared_data, tmp_path, capsys):
    out = tmp_path / "whatif.json"
    assert main(["whatif", str(shared_data / "sacct" / "xdmod-phillips.log"), "--cluster-from-slurm", str(SINFO),
                 "--slack", "1.0", "--supply", "solar", "--exact-runtimes", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    for row in ("energy (kWh)", "peak power (kW)", "renewable share", "mean wait", "deadline misses",
                "jobs rejected", "2 nodes down or drained"):
        assert row in text
    data = json.loads(out.read_text())
    policies = data["policies"]
    assert list(policies) == ["easy", "fcfs", "easy+suspend", "greedy-bestfit"]    # the defaults with --slack
    assert policies["easy"]["jobs_completed"] == 4285 and policies["easy"]["rejected"] == 0
    assert policies["easy+suspend"]["energy_kwh"] < policies["easy"]["energy_kwh"]
    greedy = policies["greedy-bestfit"]
    assert greedy["deadline_missed"] == 0 and greedy["jobs_completed"] + greedy["rejected"] == 4285
    assert all(0 < p["renewable_share"] < 1 for p in policies.values())
    # the export's own record: 239 jobs were cancelled while pending; the sinfo fixture has 35 of the
    # 46 nodes the jobs ran on, so the record's energy is not known
    recorded = data["recorded"]
    assert recorded["jobs"] == 4046 and recorded["unusable_by_reason"] == {"cancelled before it started": 239}
    assert not recorded["energy_available"] and "which the cluster lacks" in recorded["energy_missing"]
    assert recorded["figures"]["energy_kwh"] is None and recorded["figures"]["mean_wait_s"] > 0
    assert (data["fidelity"]["policy"], data["fidelity"]["jobs"]) == ("easy", 4046)


def test_whatif_from_a_toml_cluster_and_live_sinfo(shared_data, tmp_path, capsys, monkeypatch):
    trace = str(shared_data / "sacct" / "xdmod-phillips.log")
    toml = tmp_path / "c.toml"
    toml.write_text('name = "phillips"\n[[node_group]]\nname = "cpn"\ncount = 8\ncpus = 8\nmemory_mb = 24000\n'
                    '[[node_group]]\nname = "gpu"\ncount = 2\ncpus = 12\nmemory_mb = 64000\ngpus = 2\n')
    assert main(["whatif", trace, "--cluster", str(toml), "--limit", "500", "--candidate", "fcfs",
                 "--candidate", "greedy=deadline:acceptance=greedy", "--slack", "2",
                 "--candidate", "off=easy:power_states.suspend_after_s=600:power_states.boot_s=120",
                 "--json", "-"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert list(data["policies"]) == ["easy", "fcfs", "greedy", "off"] and data["jobs"] == 500
    off, easy = data["policies"]["off"], data["policies"]["easy"]
    assert off["boots"] > 0 and off["saved_vs_idle_kwh"] > 0 and off["energy_kwh"] < easy["energy_kwh"]
    # live: a stand-in sinfo on PATH answering with the fixture
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake = bin_dir / "sinfo"
    fake.write_text(f"#!/bin/sh\n[ \"$1\" = --json ] && exec cat {SINFO}\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    assert main(["whatif", trace, "--cluster-from-slurm", "live", "--limit", "300", "--candidate", "fcfs",
                 "--exclude-unavailable"]) == 0
    text = capsys.readouterr().out
    assert "sinfo --json (live): 33 nodes" in text and "left out" in text


def test_whatif_errors(tmp_path, capsys, monkeypatch):
    assert main(["whatif", str(tmp_path / "none.log"), "--cluster-from-slurm", str(SINFO)]) == 2
    assert "no such file" in capsys.readouterr().err
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["whatif", str(SINFO), "--cluster-from-slurm", "live"]) == 2
    assert "needs sinfo on PATH" in capsys.readouterr().err


def test_whatif_out_feeds_the_renewable_figure(shared_data, tmp_path, capsys):
    import pandas as pd

    from greenslurm import plots
    out = tmp_path / "whatif"
    assert main(["whatif", str(shared_data / "sacct" / "xdmod-phillips.log"), "--cluster-from-slurm", str(SINFO),
                 "--limit", "400", "--supply", "wind", "--candidate", "fcfs", "--out", str(out), "-j", "1"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["easy", "fcfs"]
    power = pd.read_csv(out / "easy" / "power.csv")
    summary = json.loads((out / "easy" / "summary.json").read_text())
    assert power["energy_j"].sum() / 3.6e6 == pytest.approx(summary["energy_kwh"], rel=1e-9)
    assert (power["end_s"] > power["start_s"]).all() and (power["supply_w"] >= 0).all()
    figure = plots.power_over_time(power)
    assert "with renewable supply" in figure._suptitle.get_text().replace("\n", " ")     # the title is the figure's, wrapped to its width
    capsys.readouterr()
    assert main(["report", str(out / "easy"), "--plots", str(tmp_path / "figures")]) == 0
    text = capsys.readouterr().out
    assert "power-energy-over-time.png" in text and "renewable supply vs demand" not in text
    assert main(["report", str(out), "--plots", str(tmp_path / "all")]) == 0     # every policy's folder
    names = {p.name for p in (tmp_path / "all").iterdir()}
    assert {f"{policy}-{figure}.{fmt}" for policy in ("easy", "fcfs") for fmt in ("png", "svg")
            for figure in ("power-energy-over-time", "active-nodes-over-time", "gantt")} <= names
    assert {"policies-power-energy-over-time.png", "policies-wait-cdf.png"} <= names     # both policies on one axes

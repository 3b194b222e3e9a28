"""greenslurm replay/compare with power states, a peak budget (pVOCL) and GPU co-location (EaCO)."""

from __future__ import annotations

import json

import pytest

from greenslurm.cli import main

SWF = """; MaxNodes: 4
; MaxProcs: 4
1 0 0 100 2 -1 -1 2 200 -1 1 1 1 -1 -1 -1 -1 -1
2 50 0 100 1 -1 -1 1 200 -1 1 1 1 -1 -1 -1 -1 -1
3 5000 0 100 4 -1 -1 4 200 -1 1 1 1 -1 -1 -1 -1 -1
4 5000 0 300 1 -1 -1 1 400 -1 1 1 1 -1 -1 -1 -1 -1
"""


def trace(tmp_path):
    path = tmp_path / "small.swf"
    path.write_text(SWF)
    return str(path)


def test_replay_power_down_and_budget_json(tmp_path, capsys):
    out = tmp_path / "s.json"
    # 4 nodes, 100 W idle, 350 W busy: the 4-node job alone needs 1400 W; budget 1500 W
    code = main(["replay", trace(tmp_path), "--power-down-after", "600", "--boot-s", "60", "--power-budget", "1500",
                 "--no-progress", "--json", str(out)])
    assert code == 0
    summary = json.loads(out.read_text())
    power = summary["power_states"]
    assert power["peak_power_w"] <= 1500 and power["boots"] >= 1 and power["suspends"] >= 1
    assert "power states" in capsys.readouterr().out


def test_replay_power_config_toml_and_bad_queue(tmp_path, capsys):
    profile = tmp_path / "p.toml"
    profile.write_text("[power_states]\nsuspend_after_s = 100\noff_w = 5\n")
    assert main(["replay", trace(tmp_path), "--power-config", str(profile), "--no-progress"]) == 0
    # every queue composes with power states (conservative: off nodes stay allocatable, Slurm's way)
    assert main(["replay", trace(tmp_path), "--power-config", str(profile), "--queue", "conservative",
                 "--no-progress"]) == 0
    assert "boots / suspends" in capsys.readouterr().out
    bad = tmp_path / "bad.toml"
    bad.write_text("[power_states]\nsuspend_after = 100\n")
    assert main(["replay", trace(tmp_path), "--power-config", str(bad), "--no-progress"]) == 2


def test_replay_and_compare_colocation(tmp_path, capsys):
    assert main(["replay", trace(tmp_path), "--colocation", "eaco", "--gpu-nodes", "1"]) == 0
    assert "training jobs on 1 nodes" in capsys.readouterr().out
    assert main(["replay", trace(tmp_path), "--colocation", "eaco", "--queue", "easy"]) == 2
    assert "field --queue: co-location runs its training jobs under the fcfs queue" in capsys.readouterr().err
    assert main(["replay", trace(tmp_path), "--gpu-nodes", "1"]) == 2       # an option that does not apply
    assert "field --gpu-nodes: applies to GPU co-location" in capsys.readouterr().err
    assert main(["compare", trace(tmp_path), "--colocation", "fifo", "eaco", "--gpu-nodes", "1"]) == 0
    text = capsys.readouterr().out
    assert "fifo" in text and "eaco" in text


def test_compare_power_budgets(tmp_path, capsys):
    assert main(["compare", trace(tmp_path), "--power-down-after", "600", "--power-budget", "1500", "1450"]) == 0
    text = capsys.readouterr().out
    assert "budget 1,500 W" in text and "budget 1,450 W" in text and "power-down" in text


@pytest.mark.parametrize("argv, field", [
    # the power comparison (a budget, power-down, co-location) reads no deadline option: each is refused
    (["--power-budget", "1500", "--acceptance", "greedy"], "--acceptance"),
    (["--power-down-after", "600", "--exact-runtimes"], "--exact-runtimes"),
    (["--colocation", "eaco", "--gpu-nodes", "1", "--slack-mean", "1"], "--slack-mean"),
    (["--power-down-after", "600", "--csv", "rows.csv"], "--csv"),
    # and the deadline comparison reads none of the power comparison's details
    (["--boot-s", "100"], "--boot-s"),
    (["--slack-mean", "1", "--consolidate-every", "60"], "--consolidate-every"),
])
def test_compare_refuses_options_the_comparison_it_runs_would_ignore(tmp_path, capsys, argv, field):
    assert main(["compare", trace(tmp_path), "--no-progress", *argv]) == 2
    err = capsys.readouterr().err
    assert f"field {field}: {field} " in err and len(err.strip().splitlines()) == 1


def test_colocation_accounting_from_the_profile(tmp_path, capsys):
    # the EaCO paper's accounting (a node with a job draws its static power) against the sets' power
    # only: the same schedule, more energy by exactly the static part
    energy = {}
    for accounting in ("active-nodes", "jobs"):
        profile = tmp_path / f"{accounting}.toml"
        profile.write_text(f'[colocation]\npolicy = "eaco"\ngpu_nodes = 1\naccounting = "{accounting}"\n')
        out = tmp_path / f"{accounting}.json"
        assert main(["replay", trace(tmp_path), "--power-config", str(profile), "--no-progress",
                     "--json", str(out)]) == 0
        energy[accounting] = json.loads(out.read_text())["colocation"]
    assert energy["jobs"]["static_energy_j"] == 0.0 and energy["active-nodes"]["static_energy_j"] > 0
    assert energy["active-nodes"]["energy_j"] > energy["jobs"]["energy_j"]
    bad = tmp_path / "bad.toml"
    bad.write_text('[colocation]\npolicy = "eaco"\naccounting = "watts"\n')
    capsys.readouterr()
    assert main(["replay", trace(tmp_path), "--power-config", str(bad), "--no-progress"]) == 2
    error = capsys.readouterr().err.strip()
    assert "colocation.accounting" in error and len(error.splitlines()) == 1


def test_jobs_left_out_by_the_budget_are_counted_as_skipped(tmp_path, capsys):
    # 4 single-CPU nodes, 100 W idle, 350 W busy, 10 W off: the 4-node job alone needs 4 * 350 =
    # 1,400 W > 800 W and is left out; the others run (the 2-node job: 2 * 350 + 2 * 10 = 720 W).
    # 4 jobs read = 3 completed + 1 skipped.
    out = tmp_path / "s.json"
    assert main(["replay", trace(tmp_path), "--power-down-after", "60", "--power-budget", "800",
                 "--no-progress", "--json", str(out)]) == 0
    summary = json.loads(out.read_text())
    assert (summary["jobs_total"], summary["jobs_completed"], summary["jobs_skipped"]) == (4, 3, 1)
    assert summary["skipped_by_reason"]["budget"] == {"needs more power than the budget even alone": 1}
    assert summary["left_out_by_budget"] == 1

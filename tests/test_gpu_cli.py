"""``greenslurm inflate`` end to end on small samples of the real openb lists."""

from __future__ import annotations

import csv

import pytest

from greenslurm.cli import main
from greenslurm.sim.studies.inflate import COLUMNS
from gpu_fixtures import alibaba


@pytest.fixture()
def small_lists(tmp_path):
    nodes = tmp_path / "nodes.csv"
    pods = tmp_path / "openb_pod_list_default.csv"
    nodes.write_text("\n".join(alibaba("openb_node_list_gpu_node.csv").read_text().splitlines()[:101]) + "\n")
    pods.write_text("\n".join(alibaba("openb_pod_list_default.csv").read_text().splitlines()[:601]) + "\n")
    return nodes, pods


def test_inflate_writes_csv_and_summary(small_lists, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")                 # one line per table row
    nodes, pods = small_lists
    out = tmp_path / "runs.csv"
    code = main(["inflate", "--nodes", str(nodes), "--pods", str(pods), "--select", "fgd", "--select",
                 "pwr=0.1,fgd=0.9", "--seeds", "2", "--workers", "2", "--csv", str(out), "--no-progress"])
    assert code == 0
    with out.open() as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == list(COLUMNS)
    assert {r["policy"] for r in rows} == {"fgd", "pwr=0.1,fgd=0.9"}
    assert {r["seed"] for r in rows} == {"42", "43"} and {r["trace"] for r in rows} == {"default"}
    assert len(rows) == 2 * 2 * 130                     # levels 1 .. 130 % every 1 %
    last = [r for r in rows if r["arrived_pct"] == "130"]
    assert len(last) == 4 and all(0 < float(r["grar"]) <= 1 for r in last)
    text = capsys.readouterr().out
    for expected in ("fgd", "pwr=0.1,fgd=0.9", "GRAR %", "EOPC kW", "saved vs fgd", "50 %", "80 %", "90 %",
                     "100 %", "110 %", "120 %", "130 %", "4 runs (2 policies x 2 seeds)"):
        assert expected in text


def test_inflate_plot(small_lists, tmp_path, capsys):
    pytest.importorskip("matplotlib")
    nodes, pods = small_lists
    common = ["inflate", "--nodes", str(nodes), "--pods", str(pods), "--select", "gpubestfit", "--seeds", "1",
              "--until", "0.6", "--csv", str(tmp_path / "x.csv"), "--no-progress"]
    # --plots DIR, as report's: the folder is made, the figure is DIR/inflate.png
    assert main([*common, "--plots", str(tmp_path / "figures")]) == 0
    assert (tmp_path / "figures" / "inflate.png").read_bytes()[:4] == b"\x89PNG"
    assert capsys.readouterr().err == ""
    # the old --plot PNG still writes its file, and says once which option replaces it
    png = tmp_path / "curves.png"
    assert main([*common, "--plot", str(png)]) == 0
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert capsys.readouterr().err.strip() == ("greenslurm: warning: --plot is deprecated, use --plots DIR "
                                               "(it writes DIR/inflate.png)")


@pytest.mark.parametrize("extra,message", [
    (["--select", "nope"], "unknown node selection 'nope'"),
    (["--select", "fgd=-1"], "must be a finite number > 0"),
    (["--select", "bestfit,fgd"], "bestfit is not a GPU scorer"),
    (["--select", "fgd", "--select", "FGD"], "given twice"),
    (["--fgd-coverage", "2"], "fraction"),
    (["--csv", "/no/such/dir/x.csv"], "no directory"),
])
def test_inflate_bad_input_is_one_red_line(small_lists, extra, message, capsys):
    nodes, pods = small_lists
    code = main(["inflate", "--nodes", str(nodes), "--pods", str(pods), "--seeds", "1", "--no-progress", *extra])
    err = capsys.readouterr().err
    assert code == 2 and "greenslurm: error:" in err and message in err
    assert "Traceback" not in err


def test_inflate_takes_no_score_option(small_lists, capsys):
    """One option family: --select; the old --score is gone, not an alias."""
    nodes, pods = small_lists
    with pytest.raises(SystemExit) as stop:
        main(["inflate", "--nodes", str(nodes), "--pods", str(pods), "--score", "fgd"])
    assert stop.value.code == 2 and "unrecognized arguments: --score" in capsys.readouterr().err


def test_inflate_missing_file(tmp_path, capsys):
    assert main(["inflate", "--nodes", str(tmp_path / "none.csv"), "--pods", str(tmp_path / "p.csv")]) == 2
    assert "no such file" in capsys.readouterr().err


def test_inflate_cpu_only_pods(small_lists, tmp_path, capsys):
    nodes, _ = small_lists
    pods = tmp_path / "cpu.csv"
    pods.write_text("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np0,1000,100,0,0\n")
    assert main(["inflate", "--nodes", str(nodes), "--pods", str(pods)]) == 2
    assert "no pod asks for a GPU" in capsys.readouterr().err

"""The Scenario: its TOML form round-trips, bad files fail on one line naming the key, sweep cells
map onto it, and running one on the engine places GPU tasks exactly where the GPU papers' own replay
(greenslurm.sim.studies.gpu_replay) does, on the real Alibaba openb trace."""

from __future__ import annotations

import dataclasses
import tomllib
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.clustermodel import InputError
from greenslurm.clustermodel.gpu_state import GpuNodes
from greenslurm.scenario import (Acceptance, ClusterSource, Colocation, Deadlines, Homogeneous, PowerStates, Scenario,
                                 Selection, Supply, Synthetic, TraceSource)
from greenslurm.scenario_run import run
from greenslurm.sim.studies.gpu_replay import gpu_replay
from greenslurm.sweep_cell import cell_scenario, gpu_select

FULL = Scenario(
    trace=TraceSource(path="/data/jobs.txt", format="sacct", strict=True, columns=("JobID", "Submit"), limit=50,
                      exact_runtimes=True),
    cluster=ClusterSource(file="/data/cluster.toml"), queue="deadline",
    selection=Selection("minidle+backfill"),
    acceptance=Acceptance("threshold,greedy", threshold_share=0.75, threshold_slack=60.0, compress=False),
    deadlines=Deadlines(1.5, 0.25, seed=3), supply=Supply("solar", "green", 0.8, 5), arrival_scale=0.5, seed=7)


def test_a_full_scenario_round_trips():
    text = FULL.to_toml()
    assert Scenario.from_toml(text, "/data/s.toml") == FULL
    assert 'policy = "threshold,greedy"' in text and "[acceptance]" in text
    assert tomllib.loads(text)["trace"]["columns"] == ["JobID", "Submit"]


def test_relative_file_names_are_taken_from_the_scenario_folder(tmp_path):
    text = '[trace]\npath = "t.swf"\n[cluster]\nnode_list = "../n.csv"\n[supply]\nsource = "wind"\n'
    s = Scenario.from_toml(text, str(tmp_path / "s.toml"))
    assert s.trace.path == str(tmp_path / "t.swf")
    assert s.cluster.node_list == str(tmp_path.parent / "n.csv")
    assert s.supply.source == "wind"                 # a synthetic supply is not a file name


names = st.text("abcdefghij_-./", min_size=1, max_size=12).map(lambda t: "/x/" + t)
positive = st.floats(0.01, 1e6, allow_nan=False, allow_infinity=False)
scenarios = st.builds(
    Scenario,
    trace=st.one_of(st.builds(TraceSource, path=names, limit=st.none() | st.integers(1, 10**6),
                              exact_runtimes=st.booleans()),
                    st.builds(TraceSource, synthetic=st.builds(Synthetic, jobs=st.integers(1, 10**5),
                                                               load=st.none() | positive))),
    cluster=st.builds(ClusterSource, homogeneous=st.builds(Homogeneous, nodes=st.integers(1, 64),
                                                           cpus=st.integers(1, 128),
                                                           # at most the default busy power (350 W): check()
                                                           # refuses a node whose busy power is below its idle one
                                                           idle_w=st.none() | st.floats(0.01, 350.0))),
    queue=st.sampled_from(["fcfs", "easy"]),
    selection=st.builds(Selection, name=st.sampled_from([None, "firstfit", "balanced", "pwr", "pwr=0.1,fgd=0.9"])),
    deadlines=st.none() | st.builds(Deadlines, positive, st.none() | positive, st.integers(0, 99)),
    # a boot time acts only when nodes power down (check() refuses it without suspend_after_s)
    power_states=st.none() | st.builds(PowerStates, suspend_after_s=positive, boot_s=st.none() | st.floats(0.01, 86400.0),
                                       phases=st.none() | st.integers(1, 3))
    | st.builds(PowerStates, phases=st.none() | st.integers(1, 3)),
    supply=st.builds(Supply, source=st.sampled_from([None, "solar"]), mode=st.just("grid")),
    arrival_scale=st.floats(1e-6, 1000.0), seed=st.integers(0, 2**31))


@given(scenarios)
@settings(max_examples=200, deadline=None)
def test_to_toml_round_trips(scenario):
    assert Scenario.from_toml(scenario.to_toml(), "/x/s.toml") == scenario


@pytest.mark.parametrize("text, message", [
    ('[trace]\npath = "a"\n[cluster]\nfile = "c.toml"\nnode_list = "n.csv"\n',
     "s.toml: field cluster: give at most one of file, node_list, slurm_conf, homogeneous"),
    ('[trace]\nsynthetic = { jobs = 5 }\n', "s.toml: field cluster: a synthetic trace needs a cluster"),
    ('queue = "fcfs"\n[trace]\npath = "a"\n[power_states]\nphases = 0\n',
     "s.toml: field power_states.phases: phases must be within 1..12"),
    ('queue = "fcfs"\n[trace]\npath = "a"\n[power_states]\n[colocation]\npolicy = "eaco"\n',
     "s.toml: field colocation: co-location and power states are two machine models; choose one"),
    ('queue = "fcfs"\n[trace]\npath = "a"\n[colocation]\npolicy = "tetris"\n',
     "s.toml: field colocation.policy: unknown policy 'tetris'"),
    ('queue = "lifo"\n[trace]\npath = "a"\n', "s.toml: field queue: unknown queue 'lifo'"),
    ('[trace]\npath = "a"\n[supply]\nmode = "green"\nsource = "solar"\n',
     "s.toml: field supply.mode: renewable mode green plans with the deadline queue, not the easy queue"),
    ('[trace]\npath = "a"\n[trace.synthetic]\njobs = 3\n', "s.toml: field trace.path: give either path or synthetic"),
    ('[trace]\npath = ["a"]\n', 's.toml: field trace.path: must be a string, not ["a"]'),
    ('arrival_scale = 0\n[trace]\npath = "a"\n', "s.toml: field arrival_scale: must be > 0"),
    ('[cluster]\nfile = "c.toml"\n', "s.toml: field trace: missing"),
])
def test_bad_scenarios_name_the_key(text, message):
    with pytest.raises(InputError) as info:
        Scenario.from_toml(text, "s.toml")
    assert message in str(info.value) and "\n" not in str(info.value)


def test_colocation_scenario_uses_the_fcfs_queue():
    s = Scenario.from_toml('queue = "fcfs"\n[trace]\npath = "a"\n[colocation]\npolicy = "eaco"\ngpu_nodes = 2\n', "s.toml")
    assert s.colocation == Colocation("eaco", gpu_nodes=2)
    with pytest.raises(InputError, match="field queue: co-location runs its training jobs under the fcfs queue"):
        dataclasses.replace(s, queue="easy").check("s.toml")


def test_sweep_cells_are_scenarios():
    cell = {"trace": {"name": "openb", "path": "/p.csv", "nodes": "/n.csv"},
            "policy": {"name": "bf", "score": "bestfit", "options": {"ties": "random"}},
            "params": {"arrival_scale": 0.1, "limit": 300}, "seed": 4}
    s = cell_scenario(cell)
    # the GPU papers' BestFit is gpubestfit; their model is place-or-fail
    assert (s.queue, s.selection, s.seed, s.arrival_scale) == ("none", Selection("gpubestfit", ties="random"), 4, 0.1)
    assert s.trace == TraceSource(path="/p.csv", format="alibaba", limit=300)
    assert s.cluster == ClusterSource(node_list="/n.csv")
    cell = {"trace": {"name": "s", "synthetic": {"jobs": 20}, "cluster": {"nodes": 2, "cpus": 4}},
            "policy": {"name": "g", "queue": "deadline",
                       "options": {"acceptance": "threshold,greedy", "allocation": "bestfit", "share": 0.8}},
            "params": {"slack": 1.0, "supply": "wind", "load": 0.5}, "seed": 2}
    s = cell_scenario(cell)
    assert s.selection.name == "bestfit" and s.acceptance == Acceptance("threshold,greedy", threshold_share=0.8)
    assert s.deadlines == Deadlines(1.0, None, 2) and s.supply == Supply("wind", "grid", 0.5, 2, "limits")
    assert s.trace.synthetic == Synthetic(jobs=20, load=0.5)
    assert gpu_select("pwr=0.1,bestfit=0.9") == "pwr=0.1,gpubestfit=0.9"


@pytest.fixture
def openb(shared_data, tmp_path):
    data = shared_data / "alibaba-gpu-2023"
    # 30 of the openb GPU nodes and 1,000 pods at 100 x the arrival rate: about 4 in 10 pods find no room
    lines = (data / "openb_node_list_gpu_node.csv").read_text().splitlines(keepends=True)[:31]
    (tmp_path / "nodes.csv").write_text("".join(lines))
    return data / "openb_pod_list_default.csv", tmp_path / "nodes.csv"


@pytest.mark.parametrize("select, paper_name", [("fgd", "fgd"), ("pwr=0.1,fgd=0.9", "pwr=0.1,fgd=0.9"),
                                                ("gpubestfit", "bestfit")])
def test_engine_places_every_pod_where_the_gpu_papers_replay_does(openb, select, paper_name):
    pods, nodes = openb
    scenario = Scenario(TraceSource(path=str(pods), limit=1000), ClusterSource(node_list=str(nodes)), queue="none",
                        selection=Selection(select), arrival_scale=0.01).check()
    outcome = run(scenario)
    engine = {r.job_id: int(r.node_indices[0]) for r in outcome.result.records}
    engine.update({r.job_id: None for r in outcome.result.rejected})
    paper = gpu_replay(outcome.jobs, GpuNodes.from_cluster(outcome.cluster), paper_name, outcome.workload, "paper",
                       None, seed=0)
    expected = {r.job_id: (None if r.failed else r.node) for r in paper.records}
    assert len(expected) == 1000 and 300 < sum(v is None for v in expected.values()) < 500
    assert engine == expected
    again = run(scenario)                              # same scenario, same outcome
    assert again.summary == outcome.summary


def test_a_synthetic_scenario_runs_from_its_toml(tmp_path):
    text = ('queue = "fcfs"\nseed = 3\n[trace]\nsynthetic = { jobs = 40, load = 0.5 }\n'
            '[cluster]\nhomogeneous = { nodes = 4, cpus = 4 }\n[power_states]\nsuspend_after_s = 60.0\n')
    outcome = run(Scenario.from_toml(text, str(tmp_path / "s.toml")))
    assert outcome.summary["jobs_completed"] == 40 and outcome.summary["power_states"]["suspends"] > 0
    assert outcome.summary["trace"] == {"synthetic": dataclasses.asdict(Synthetic(jobs=40, load=0.5)), "seed": 3}
    assert Path(tmp_path).exists()

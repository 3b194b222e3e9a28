"""The published figures do not depend on how many threads numpy's BLAS uses.

OpenBLAS splits a long dot or matrix-vector product over its threads (one per core unless
``OPENBLAS_NUM_THREADS`` says otherwise) and adds the partial sums in another order, so a sum that goes
through BLAS can change its last digit with the core count, and FGD's node choice can flip on a near
tie.  The library's sums of products are numpy's own (``np.multiply`` then a pairwise ``np.add.reduce``)
or ``math.fsum``.  Each case below runs in fresh processes with 1, 2 and 4 BLAS/OpenMP threads, and
with OpenBLAS's kernels for older CPUs, and must print the same text, bit for bit (float reprs and
sha256 of array bytes), on real inputs:

* FGD: F_n(M) of every openb GPU node in a crowded state, FGD's raw scores of a share and a whole-GPU
  task on every node, and the FGD paper's inflation (seed 42 to 100 % arrived demand: 8,000 FGD
  placements, the meter's fragmentation after each);
* the renewable split of KTH-SP2's power series (43,188 steps) against the solar and the wind supply,
  through ``greenslurm.replay`` and directly, with per-job renewable energy and the supply integral;
* the GPU accounting's series energy and time means of the whole openb default pod list (15,908 steps).

With the sums handed to BLAS (``@`` / ``np.dot``) the 1- and 2-thread outputs differed on this
2-core machine: FGD's mean fragmentation of the openb replay (...677 against ...681), KTH-SP2's solar
curtailed_kwh (...891 against ...894) and wind renewable_kwh (...979 against ...98).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.clustermodel.fragmentation import TargetWorkload, fragmentation_by_class_milli, node_fragmentation_milli
from greenslurm.clustermodel.sums import row_sums_of_products, sum_of_products

ALIBABA = "alibaba-gpu-2023"                       # folders of the real trace logs (the shared_data fixture)
KTH = "swf/KTH-SP2-1996-2.1-cln.swf"

SCRIPT = r'''
import hashlib, sys
import numpy as np

ALIBABA, KTH, part = sys.argv[1], sys.argv[2], sys.argv[3]


def say(name, value):
    if isinstance(value, np.ndarray):
        value = hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()
    print(name, repr(value), sep="\t")


def openb():
    from greenslurm.clustermodel.gpu_state import GpuNodes, gpu_task_from_job
    from greenslurm.sim.studies.inflate import TaskPool
    from greenslurm.traces.alibaba import read_nodes, read_pods
    nodes = GpuNodes.from_cluster(read_nodes(ALIBABA + "/openb_node_list_gpu_node.csv"))
    jobs = read_pods(ALIBABA + "/openb_pod_list_default.csv").jobs
    pool = TaskPool.from_tasks([gpu_task_from_job(j) for j in jobs])
    return nodes, jobs, pool, pool.workload(nodes.models)


if part == "fgd":
    from greenslurm.allocation.scorers.fgd import FgdScorer
    from greenslurm.clustermodel.fragmentation import node_fragmentation_milli
    from greenslurm.clustermodel.gpu_state import GpuState, GpuTask
    from greenslurm.sim.studies.inflate import inflate
    nodes, jobs, pool, workload = openb()
    say("classes", workload.size)
    state = GpuState(nodes)
    rng = np.random.default_rng(7)
    exists = state.gpu_free_milli >= 0      # a crowded state: free shares in steps of 50 milli-GPU
    state.gpu_free_milli[...] = np.where(exists, 50 * rng.integers(0, 21, size=exists.shape), -1)
    state.cpu_free_milli[...] = rng.integers(0, nodes.cpu_milli + 1)
    every = np.arange(nodes.size)
    say("F_n(M)", node_fragmentation_milli(state.cpu_free_milli, state.gpu_free_milli, nodes.model_index, workload))
    scorer = FgdScorer(workload)
    for task in (GpuTask(cpu_milli=4000, num_gpu=1, gpu_milli=450), GpuTask(cpu_milli=8000, num_gpu=2, gpu_milli=1000)):
        say(f"raw {task.gpu_milli}x{task.num_gpu}", scorer.raw(state, task, every, rng))
    run = inflate(nodes, pool, workload, "fgd", seed=42, until=1.0)
    for column in ("allocated_milli", "frag_milli", "failed", "cpu_w", "gpu_w"):
        say(f"inflate {column}", getattr(run, column))
    say("inflate last frag", float(run.frag_milli[-1]))
elif part == "renewable":
    import greenslurm
    from greenslurm.clustermodel.renewable import job_renewable_j, solar_supply, split_energy, wind_supply
    for source in ("solar", "wind"):
        result = greenslurm.replay(str(KTH), renewable=source)
        say(f"replay {source}", result.summary["admission"])
    times, watts = result.power["start_s"].to_numpy(), result.power["power_w"].to_numpy()
    end = float(result.power["end_s"].iloc[-1])
    say("steps", len(times))
    for supply in (solar_supply(times[0], end, 0.6 * watts.max(), seed=5),
                   wind_supply(times[0], end, 0.8 * watts.max(), seed=5)):
        say(f"split {supply.name}", split_energy(times, watts, end, supply))
        say(f"integral {supply.name}", supply.integral_j(times[0] + 1234.5, end - 99.0))
        starts = times[::500]
        say(f"jobs {supply.name}", [job_renewable_j(s, s + 86400.0 * 3, 1000.0, times, watts, supply) for s in starts])
elif part == "gpu_series":
    from greenslurm.sim.studies.gpu_replay import gpu_replay
    nodes, jobs, pool, workload = openb()
    result = gpu_replay(jobs, nodes, "gpubestfit", workload)
    say("steps", len(result.times_s))
    say("energy_j", result.energy_j())
    say("summary", result.summary())
'''


# (BLAS threads, OpenBLAS kernel): 1, 2 and 4 threads with the kernel OpenBLAS picks for this CPU, and
# 2 threads with OpenBLAS's generic x86 kernels (OPENBLAS_CORETYPE; numpy's OpenBLAS carries every x86
# kernel): another machine's core count or CPU.  On this machine's Haswell kernels the matrix-vector
# product of FGD gave the same bits with 1, 2 and 4 threads but not with the generic ones.
CONFIGS = [(1, None), (2, None), (4, None), (2, "Prescott")]


def run_with(part: str, data: Path, threads: int, core: str | None) -> str:
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads),
               MKL_NUM_THREADS=str(threads))
    env.pop("OPENBLAS_CORETYPE", None)
    if core is not None:
        env["OPENBLAS_CORETYPE"] = core
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(data / ALIBABA), str(data / KTH), part], env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.parametrize("part", ["fgd", "renewable", "gpu_series"])
def test_same_bytes_with_any_blas_threads_and_kernel(part, shared_data):
    # the whole openb node and pod lists and KTH-SP2's whole log, four processes each: a whole-trace test
    assert (shared_data / ALIBABA / "openb_node_list_gpu_node.csv").is_file() and (shared_data / KTH).is_file()
    lines = {config: dict(line.split("\t", 1) for line in run_with(part, shared_data, *config).splitlines())
             for config in CONFIGS}
    first = lines[CONFIGS[0]]
    assert len(first) >= 3 and all(line.keys() == first.keys() for line in lines.values())
    differing = sorted(k for k in first if len({line[k] for line in lines.values()}) > 1)
    assert not differing, {k: {config: line[k][-200:] for config, line in lines.items()} for k in differing}


def test_sum_of_products_by_hand_and_on_hostile_values():
    # 0.1 W x 3 s three times: each product rounds to 0.30000000000000004, their exact sum to 0.9000000000000001
    assert sum_of_products(np.full(3, 0.1), np.full(3, 3.0)) == 0.9000000000000001
    # 1e16 + 1 - 1e16: a left-to-right or pairwise float sum loses the 1
    assert sum_of_products(np.array([1e16, 1.0, -1e16]), np.ones(3)) == 1.0
    # integer milli-GPU columns times float seconds: (0 x 10 + 1500 x 20) = 30000
    assert sum_of_products(np.array([0, 1500]), np.array([10.0, 20.0])) == 30000.0
    assert sum_of_products(np.array([], float), np.array([], float)) == 0.0
    # beyond the float range, inf and NaN: numpy's answers (no exception out of math.fsum)
    assert sum_of_products(np.array([1e308, 1e308]), np.ones(2)) == math.inf
    assert sum_of_products(np.array([-1e308, -1e308]), np.ones(2)) == -math.inf
    assert sum_of_products(np.array([math.inf, 1.0]), np.ones(2)) == math.inf
    assert math.isnan(sum_of_products(np.array([math.inf, -math.inf]), np.ones(2)))
    assert math.isnan(sum_of_products(np.array([math.nan, 1.0]), np.ones(2)))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 1e7), st.floats(0, 1e6)), max_size=300))
def test_sum_of_products_is_the_correctly_rounded_sum_in_any_order(pairs):
    values, weights = (np.array([p[i] for p in pairs], dtype=float) for i in (0, 1))
    exact = math.fsum(v * w for v, w in pairs)
    assert sum_of_products(values, weights) == exact
    assert sum_of_products(values[::-1], weights[::-1]) == exact


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 40), st.integers(1, 12), st.integers(0, 2**32 - 1))
def test_a_node_alone_gets_the_bits_it_gets_among_all_nodes(nodes, classes, seed):
    """The meter recomputes one node after a start or an end; FGD scores many at once: the same F_n(M)."""
    rng = np.random.default_rng(seed)
    popularity = rng.random(classes)
    workload = TargetWorkload(cpu_milli=rng.integers(0, 9000, classes), gpu_milli=rng.integers(0, 1001, classes),
                              num_gpu=rng.integers(0, 3, classes), access=rng.random((classes, 2)) < 0.8,
                              popularity=popularity / popularity.sum(), models=("A", "B"))
    cpu = rng.integers(0, 64001, nodes)
    gpu = np.where(rng.random((nodes, 8)) < 0.8, rng.integers(0, 1001, (nodes, 8)), -1)
    model = rng.integers(0, 2, nodes)
    together = node_fragmentation_milli(cpu, gpu, model, workload)
    alone = np.concatenate([node_fragmentation_milli(cpu[i:i + 1], gpu[i:i + 1], model[i:i + 1], workload)
                            for i in range(nodes)])
    assert together.tobytes() == alone.tobytes()
    # and it is the pairwise-rounded sum of the products: within a few ulps of the exact one
    products = [[float(f) * float(p) for f, p in zip(row, workload.popularity)]
                for row in fragmentation_by_class_milli(cpu, gpu, model, workload)]
    assert together.tolist() == pytest.approx([math.fsum(row) for row in products], rel=1e-14, abs=1e-9)


def test_row_sums_by_hand():
    # 0.5 x 300 + 0.3 x 1900 + 0.2 x 1900 = 150 + 570 + 380 (each product rounds to the integer)
    assert row_sums_of_products(np.array([[300.0, 1900.0, 1900.0]]), np.array([0.5, 0.3, 0.2])).tolist() == [1100.0]
    # eleven terms 1 x 0.1, numpy's pairwise order: eight partial sums ((0.1+0.1)+(0.1+0.1))+((0.1+0.1)+(0.1+0.1))
    # = 0.8 exactly (doublings), then + 0.1 + 0.1 + 0.1 = 1.1; left to right the same terms give 1.0999999999999999
    assert row_sums_of_products(np.ones((2, 11)), np.full(11, 0.1)).tolist() == [1.1, 1.1]
    assert sum([0.1] * 11) == 1.0999999999999999

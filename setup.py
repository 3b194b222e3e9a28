"""The compiled replay core, SWF scanner and output cells (optional: without a C compiler the package installs
without them and uses the same code in pure Python, with identical results)."""

from setuptools import Extension, setup

# no fused multiply-add and no reassociation: the same doubles as the Python definitions
FLAGS = ["-O2", "-ffp-contract=off", "-fno-fast-math"]

LEDGER = ["sim/engine/_pool_ledger.h"]          # shared by the two cores (and shipped with them: depends)

setup(ext_modules=[
    Extension("greenslurm.sim.engine._pool_core", ["sim/engine/_pool_core.c"],
              depends=[*LEDGER, "sim/engine/_conservative_plan.h"], extra_compile_args=FLAGS,
              optional=True),
    Extension("greenslurm.sim.engine._deadline_core", ["sim/engine/_deadline_core.c"],
              depends=[*LEDGER, "sim/engine/_deadline_node_plans.h", "sim/engine/_deadline_gap_index.h"],
              extra_compile_args=FLAGS, optional=True),
    # Slurm's spread node choice (allocation/consecutive.py), the slurm queue's will-run test's inner step
    Extension("greenslurm.allocation._consecutive", ["allocation/_consecutive.c"], extra_compile_args=FLAGS,
              optional=True),
    # the slurm queue's will-run test for a job Slurm spreads (sim/engine/slurm_queue.py is its reference)
    Extension("greenslurm.sim.engine._will_run", ["sim/engine/_will_run.c"], depends=["allocation/_consecutive.c"],
              extra_compile_args=FLAGS, optional=True),
    # the slurm queue's backfill cycle for a queue of jobs Slurm spreads (its reference: slurm_queue.py's cycle)
    Extension("greenslurm.sim.engine._backfill_cycle", ["sim/engine/_backfill_cycle.c"],
              depends=["sim/engine/_will_run.c", "sim/engine/_backfill_plan.h", "allocation/_consecutive.c"],
              extra_compile_args=FLAGS, optional=True),
    Extension("greenslurm.traces._swf_scan", ["traces/_swf_scan.c"], extra_compile_args=FLAGS, optional=True),
    # the output files' cells (calls CPython's repr of a float: loaded with ctypes.PyDLL)
    Extension("greenslurm.sim.reporting._cells", ["sim/reporting/_cells.c"], extra_compile_args=FLAGS, optional=True),
])

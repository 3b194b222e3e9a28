"""The compiled replay core and SWF scanner (optional: without a C compiler the package installs without it and the
replay uses the same core in pure Python, with identical results)."""

from setuptools import Extension, setup

# no fused multiply-add and no reassociation: the same doubles as the Python definitions
FLAGS = ["-O2", "-ffp-contract=off", "-fno-fast-math"]

setup(ext_modules=[
    Extension("greenslurm.sim.engine._pool_core", ["sim/engine/_pool_core.c"], extra_compile_args=FLAGS, optional=True),
    Extension("greenslurm.traces._swf_scan", ["traces/_swf_scan.c"], extra_compile_args=FLAGS, optional=True),
])

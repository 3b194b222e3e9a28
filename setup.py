"""The compiled replay core (optional: without a C compiler the package installs without it and the
replay uses the same core in pure Python, with identical results)."""

from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "greenslurm.sim.engine._pool_core", ["sim/engine/_pool_core.c"],
    # no fused multiply-add and no reassociation: the same doubles as the Python core
    extra_compile_args=["-O2", "-ffp-contract=off", "-fno-fast-math"],
    optional=True)])

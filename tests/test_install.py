"""One import namespace, checked the way a user meets it: a wheel of this checkout installed into a fresh
virtual environment next to other distributions that own the top-level names ``traces`` and ``sim``.

The wheel must bring only ``greenslurm`` (and its dist-info) into site-packages, must not replace the
other packages' modules, and ``greenslurm demo`` must run from an unrelated folder.

Network: pip fetches the dependencies (numpy, pandas, pyarrow, scipy, rich, sortedcontainers; its cache
serves them after the first run) and PyPI's ``traces``.  PyPI has no distribution called ``sim`` (its
JSON API answers 404), so a one-module wheel named ``sim`` is built here for the other clash.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
IGNORED = shutil.ignore_patterns(".git", ".hypothesis", ".benchmarks", "build", "dist", "*.egg-info", "__pycache__",
                                 "*.pyc", "*.so")


# the child processes see neither this checkout (a cwd on sys.path) nor its PYTHONPATH
CLEAN_ENV = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP")}


def sh(*argv, cwd: Path) -> subprocess.CompletedProcess:
    done = subprocess.run([str(a) for a in argv], cwd=cwd, env=CLEAN_ENV, capture_output=True, text=True,
                          timeout=1800)
    assert done.returncode == 0, f"{' '.join(map(str, argv))}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def stub_sim_wheel(folder: Path) -> Path:
    """A wheel of a distribution ``sim`` 1.0 with one top-level package ``sim`` (its marker: OWNER)."""
    path = folder / "sim-1.0-py3-none-any.whl"
    record = ["sim/__init__.py,,", "sim-1.0.dist-info/METADATA,,", "sim-1.0.dist-info/WHEEL,,",
              "sim-1.0.dist-info/RECORD,,"]
    with zipfile.ZipFile(path, "w") as wheel:
        wheel.writestr("sim/__init__.py", 'OWNER = "the other sim"\n')
        wheel.writestr("sim-1.0.dist-info/METADATA", "Metadata-Version: 2.1\nName: sim\nVersion: 1.0\n")
        wheel.writestr("sim-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\n"
                                                  "Tag: py3-none-any\n")
        wheel.writestr("sim-1.0.dist-info/RECORD", "\n".join(record) + "\n")
    return path


@pytest.fixture
def work(tmp_path):
    """The test's folder, removed when it ends, passed or failed: its virtual environment alone is
    some 500 MB."""
    yield tmp_path
    shutil.rmtree(tmp_path, ignore_errors=True)


@pytest.mark.long_run                     # builds the wheel and installs it into a new venv: minutes
def test_wheel_installs_one_namespace_beside_traces_and_sim(work):
    tmp_path = work
    # 1. a wheel of this checkout, built from a copy (the build must not write into the checkout)
    source, wheels = tmp_path / "source", tmp_path / "wheels"
    shutil.copytree(ROOT, source, ignore=IGNORED)
    sh(sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", wheels, source, cwd=tmp_path)
    (ours,) = wheels.glob("greenslurm-*.whl")
    dist_info = "-".join(ours.name.split("-")[:2]) + ".dist-info"
    names = zipfile.ZipFile(ours).namelist()
    tops = {name.split("/")[0] for name in names}
    assert tops == {"greenslurm", dist_info}, tops
    # the replay's compiled pool core is built into the wheel (a C compiler is among the test packages)
    assert any(name.startswith("greenslurm/sim/engine/_pool_core.") for name in names), names

    # 2. a fresh venv: PyPI's traces and a sim first, then ours with its dependencies
    venv = tmp_path / "venv"
    sh(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    sh(python, "-m", "pip", "install", "--quiet", "traces", stub_sim_wheel(wheels), cwd=tmp_path)
    site = Path(sh(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=tmp_path).stdout.strip())
    before = set(os.listdir(site))
    traces_before = sh(python, "-c", "import traces; print(traces.__file__)", cwd=tmp_path).stdout
    assert traces_before.startswith(str(site / "traces"))
    sh(python, "-m", "pip", "install", "--quiet", ours, cwd=tmp_path)
    added = set(os.listdir(site)) - before

    # 3. what came with the wheel: greenslurm and its dist-info, plus the dependencies' own folders
    ours_added = {name for name in added if name.lower().startswith("greenslurm")}
    assert ours_added == {"greenslurm", dist_info}, ours_added
    dependency_names = ("numpy", "pandas", "pyarrow", "scipy", "rich", "sortedcontainers", "markdown_it", "mdurl",
                        "pygments", "dateutil", "python_dateutil", "pytz", "tzdata", "six", "tomli_w", "__pycache__", "bin",
                        "share", "include", "lib")
    stray = {name for name in added - ours_added
             if not name.lower().replace("-", "_").startswith(dependency_names) and not name.endswith(".libs")
             and not name.endswith(".pth") and not name.startswith("_")}
    assert stray <= {"six.py"}, stray                # nothing named traces, sim, clustermodel, allocation ...
    for name in ("traces", "sim", "clustermodel", "acceptance", "allocation", "slurm_plugin"):
        assert name not in added

    # 4. the other packages keep their modules; ours imports under greenslurm only
    check = ("import traces, sim, greenslurm.traces, greenslurm.sim.engine.replay as r\n"
             "from greenslurm.sim.engine.pool_core import chosen_core\n"
             "print(traces.__file__); print(sim.OWNER); print(r.__file__); print(chosen_core())")
    out = sh(python, "-c", check, cwd=tmp_path).stdout.splitlines()
    assert out[0] == traces_before.strip() and out[1] == "the other sim"
    assert out[2].startswith(str(site / "greenslurm" / "sim" / "engine"))
    assert out[3] == "compiled"

    # 5. the demo runs from an unrelated folder, with the console script of the venv
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run([str(venv / "bin" / "greenslurm"), "demo", "--no-progress"], cwd=elsewhere, env=CLEAN_ENV,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "KTH-SP2" in done.stdout and "jobs completed" in done.stdout
    assert sysconfig.get_paths()["purelib"] != str(site)      # the venv was not this interpreter's own

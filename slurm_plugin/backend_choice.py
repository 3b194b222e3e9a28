"""Which backend the hook's decision service talks to Slurm with: this host's Slurm and pyslurm
versions, and ``auto`` resolved to pyslurm only when it imports and its release matches Slurm's
(pyslurm numbers its releases after Slurm's), else Slurm's JSON commands."""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys

from greenslurm.clustermodel import InputError
from greenslurm.slurm_plugin.config import HookConfig

_VERSION = re.compile(r"(\d+)\.(\d+)(?:\.(\d+))?")


def release(version: str | None) -> tuple[int, int] | None:
    """The (major, minor) release of a Slurm or pyslurm version: pyslurm numbers its releases after
    Slurm's (pyslurm 22.5.x is for Slurm 22.05, 25.11.x for 25.11).

    >>> release("22.05.8"), release("22.5.1"), release("slurm-wlm 23.11.4"), release("x")
    ((22, 5), (22, 5), (23, 11), None)
    """
    match = _VERSION.search(version or "")
    return (int(match.group(1)), int(match.group(2))) if match else None


def slurm_version(slurm_conf: str = "") -> str | None:
    """This host's Slurm version from ``slurmctld -V`` (no configuration needed), else ``sinfo
    --version`` (reads slurm.conf: ``slurm_conf`` when given); None when neither answers."""
    env = dict(os.environ, SLURM_CONF=slurm_conf) if slurm_conf else None
    for argv in (["slurmctld", "-V"], ["sinfo", "--version"]):
        if shutil.which(argv[0]) is None:
            continue
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=5, env=env, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.SubprocessError):
            continue
        match = _VERSION.search(done.stdout)
        if done.returncode == 0 and match:
            return match.group(0)
    return None


PYSLURM_PROBE = "import sys, pyslurm; sys.stdout.write(str(getattr(pyslurm, '__version__', '')))"
PYSLURM_PROBE_TIMEOUT_S = 30.0


def pyslurm_version(slurm_conf: str = "") -> tuple[str | None, str | None]:
    """(pyslurm's version, None) when it imports with this Slurm configuration; (None, why not)
    otherwise, in one line.  Probed in a subprocess: ``import pyslurm`` reads the Slurm configuration
    and, finding none, ends the process that imports it (exit 1, "Could not establish a configuration
    source"); a named slurm.conf that is missing is reported without trying (Slurm would retry it
    for a minute)."""
    if importlib.util.find_spec("pyslurm") is None:
        return None, "pyslurm is not installed"
    conf = slurm_conf or os.environ.get("SLURM_CONF", "")
    if conf and not os.path.isfile(conf):
        return None, f"pyslurm cannot read the Slurm configuration {conf} (no such file)"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))   # what this process imports
    if conf:
        env["SLURM_CONF"] = conf
    try:
        done = subprocess.run([sys.executable, "-c", PYSLURM_PROBE], capture_output=True, env=env,
                              timeout=PYSLURM_PROBE_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None, f"pyslurm did not import within {PYSLURM_PROBE_TIMEOUT_S:g} s (is slurm.conf reachable?)"
    except OSError as exc:
        return None, f"pyslurm could not be tried ({exc.strerror})"
    if done.returncode != 0:
        # a pyslurm built for another libslurm, or no configuration: the last line says why
        # ("ImportError: libslurm.so.38: cannot open ...", "python3: fatal: Could not establish ...")
        lines = done.stderr.decode("utf-8", "replace").strip().splitlines()
        last = re.sub(r"^[\w.]+: ", "", lines[-1].strip(), count=1) if lines else f"exit {done.returncode}"
        return None, f"pyslurm does not import ({last})"
    version = done.stdout.decode("utf-8", "replace").strip()
    if not version:
        try:
            from importlib.metadata import version as dist_version
            version = dist_version("pyslurm")
        except Exception:
            return None, "pyslurm imports but does not say its version"
    return version, None


def resolve_backend(config: HookConfig) -> tuple[str, str]:
    """The backend ``hook serve`` uses for ``config`` and why, in one line: ``auto`` is pyslurm only
    when it imports and its release matches this Slurm's, else cli.  ``backend = "pyslurm"`` that
    cannot work is an InputError naming the file and the key (exit code 2)."""
    name = config.backend
    if name == "cli":
        return "cli", "cli: Slurm's JSON commands (sinfo --json, squeue --json; scontrol, scancel to act)"
    if name == "files":
        return "files", f"files: sinfo.json and squeue.json in {config.state_dir} (actions only logged)"
    version, problem = pyslurm_version(config.slurm_conf)
    slurm = slurm_version(config.slurm_conf) if problem is None or name == "pyslurm" else None
    if problem is None and slurm is not None and release(version) != release(slurm):
        problem = f"pyslurm {version} is built for another Slurm release than this Slurm {slurm}"
    if name == "pyslurm":
        if problem is not None:
            needs = f" (needs a pyslurm {release(slurm)[0]}.{release(slurm)[1]}.x for this Slurm {slurm})" if slurm else ""
            raise InputError(f'backend = "pyslurm": {problem}{needs}; use backend = "auto" or "cli"',
                             path=config.path, field="backend")
        return "pyslurm", f"pyslurm {version}" + (f" for Slurm {slurm}" if slurm else " (Slurm's version unknown here)")
    if problem is not None:
        return "cli", f"auto -> cli: {problem}; Slurm's JSON commands are used"
    if slurm is None:
        return "cli", (f"auto -> cli: pyslurm {version} imports but this Slurm's version is unknown "
                       "(no slurmctld -V or sinfo --version); Slurm's JSON commands are used")
    return "pyslurm", f"auto -> pyslurm {version}, matching Slurm {slurm}"

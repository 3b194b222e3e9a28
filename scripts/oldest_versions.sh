#!/usr/bin/env bash
# The oldest versions pyproject.toml allows, installed together and tested: a fresh venv with every
# dependency and the test extra pinned at its lower bound (">=X" read from pyproject.toml becomes "==X"),
# binary wheels only, then the tests that touch numpy, pandas, pyarrow, rich, matplotlib, scipy and Dask
# (no live Slurm daemons; about 4 minutes on 2 cores).  Needs Python 3.11 and PyPI.
#   scripts/oldest_versions.sh            # venv in /tmp/oldest (recreated)
#   VENV=/some/dir PYTHON=python3.11 scripts/oldest_versions.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON="${PYTHON:-python3.11}"
VENV="${VENV:-/tmp/oldest}"
CONSTRAINTS="$VENV.constraints.txt"

"$PYTHON" - >"$CONSTRAINTS" <<'PY'
import re, tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
for requirement in project["dependencies"] + project["optional-dependencies"]["test"]:
    name, lower = re.fullmatch(r"\s*([A-Za-z0-9_.-]+)\s*>=\s*([0-9][0-9.]*)\s*", requirement).groups()
    print(f"{name}=={lower}")
PY
echo "oldest allowed versions:"; sed 's/^/  /' "$CONSTRAINTS"

rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
PIP_ROOT_USER_ACTION=ignore "$VENV/bin/pip" install -q --only-binary :all: -c "$CONSTRAINTS" -e ".[test]"
"$VENV/bin/pip" check
"$VENV/bin/python" -m pytest -p no:cacheprovider -rs \
    tests/test_api.py tests/test_cli.py tests/test_columns.py tests/test_pool_core.py tests/test_slurm_queue.py \
    tests/test_figures.py tests/test_sweep.py tests/test_trace_limit.py tests/test_bad_input.py tests/test_doctests.py \
    tests/test_jobs_parquet.py tests/test_outputs_schema.py tests/test_report_plots.py tests/test_optional_modules.py \
    tests/test_whatif.py tests/test_metrics.py "$@"

"""The schema version a replay's summary carries (``summary.json``, ``--json``, the notebook API's
``summary``; docs/outputs.md).  It stands apart from :mod:`greenslurm.sim.reporting.outputs` so that
a replay without ``--out`` stamps its summary without loading the file writers (pandas, pyarrow);
``outputs`` names the same values (tests/test_cli_imports.py holds the two equal).

>>> {SCHEMA_KEY: SUMMARY_SCHEMA}
{'schema_version': 'greenslurm.summary/1'}
"""

SCHEMA_KEY = "schema_version"
SUMMARY_SCHEMA = "greenslurm.summary/1"

"""The schema version a replay's summary carries (``summary.json``, ``--json``, the notebook API's
``summary``; docs/outputs.md).  It stands apart from :mod:`greenslurm.sim.reporting.outputs` (which
imports it from here) so that a replay without ``--out`` stamps its summary without loading the file
writers.

>>> {SCHEMA_KEY: SUMMARY_SCHEMA}
{'schema_version': 'greenslurm.summary/1'}
"""

SCHEMA_KEY = "schema_version"
SUMMARY_SCHEMA = "greenslurm.summary/1"

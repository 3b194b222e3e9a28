"""Every acceptance policy by name, in one place, and chains built from names.

>>> build("greedy").name, build("threshold,greedy").name
('greedy', 'threshold,greedy')
>>> build("threshold", share=0.8, min_slack=0.1).share
0.8
>>> build("lifo")
Traceback (most recent call last):
...
ValueError: unknown acceptance policy 'lifo'; choose from all, greedy, threshold
"""

from __future__ import annotations

import inspect

from greenslurm.acceptance.base import AcceptancePolicy, Chain
from greenslurm.acceptance.policies import AcceptAll, Greedy, Threshold

ACCEPTANCE: dict[str, type] = {policy.name: policy for policy in (AcceptAll, Greedy, Threshold)}


def build(spec: str, **options) -> AcceptancePolicy:
    """The policy named ``spec``, or the chain of the comma-separated names in ``spec``.  Each policy
    takes the ``options`` its constructor names (None values are left to its defaults)."""
    policies = []
    for name in (part.strip() for part in spec.split(",")):
        if name not in ACCEPTANCE:
            raise ValueError(f"unknown acceptance policy {name!r}; choose from {', '.join(ACCEPTANCE)}")
        cls = ACCEPTANCE[name]
        accepted = inspect.signature(cls).parameters
        policies.append(cls(**{k: v for k, v in options.items() if k in accepted and v is not None}))
    return policies[0] if len(policies) == 1 else Chain(policies)

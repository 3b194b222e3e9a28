"""One reading of a job's ``--constraint`` for every planner: the hook's submissions, the pending
jobs of its view (squeue's JSON, and the replay's admission), and a pending job's change (``scontrol
update Features=``).  Each caller is fed the same hostile strings and must read them the same way."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, strategies as st

from greenslurm.clustermodel import JobSpec
from greenslurm.clustermodel.eligibility import Eligibility, planned_features
from greenslurm.slurm_plugin.decisions import changed_job
from greenslurm.slurm_plugin.protocol import parse_request, submission_from_request
from greenslurm.slurm_plugin.slurm_json import snapshot_from_json
from greenslurm.slurm_plugin.live_nodes import eligible_nodes, features_of, live_cluster
from greenslurm.slurm_plugin.snapshot import LiveNode, PendingJob
from greenslurm.traces.slurm_hostlist import HostNames

LONG = "x" * 10_000
# (constraint, planners' reading: None = a form no planner models)
HOSTILE = [
    ("", ()),
    ("k80&ib", ("ib", "k80")),
    ("ib,k80&ib", ("ib", "k80")),                 # squeue's JSON joins with ","; repeats once
    ("&&,&", ()),                                 # only separators: no feature named
    ("a|b", ("a|b",)),                            # any one of them: kept whole
    ("[a|b]", ("[a|b]",)),                        # the same one on every node: kept whole
    ("a||b", None),                               # an empty alternative
    ("|", None),
    ("[a&b]", None),
    ("[a|b", None),                               # unbalanced bracket
    ("a]", None),
    ("[]", None),
    ("a*3", None),                                # a count
    ("[a*2&b*1]", None),
    ("a&b|c", None),                              # mixed & and |
    ("(a|b)&c", None),
    ("!a", None),
    ("a\nb", None),                               # a newline inside a name
    ("a&b\n", None),
    ("a b", None),
    ("a\x00b", None),
    (LONG, (LONG,)),                              # 10k characters of one name
    ("a|" * 5_000 + "b", ("a|" * 5_000 + "b",)),  # 5,001 alternatives, 10k characters
    ("a&" * 5_000, ("a",)),
    ("a|" * 5_000 + "*", None),
    ("[" * 10_000, None),
]


@pytest.mark.parametrize("constraint, planned", HOSTILE, ids=[repr(c[:12]) for c, _ in HOSTILE])
def test_every_planner_reads_a_hostile_constraint_the_same_way(constraint, planned):
    assert planned_features(constraint) == planned
    kept = (constraint,) if planned is None else planned          # a form not modelled: kept whole, planned nowhere
    # the view's pending jobs: squeue's JSON, and the replay's admission (both through features_of)
    assert features_of(constraint) == kept
    squeue = {"jobs": [{"job_id": 7, "job_state": "PENDING", "cpus": 1, "node_count": 1, "time_limit": 5,
                        "submit_time": 1, "priority": 100, "features": constraint}]}
    snapshot, _ = snapshot_from_json({"nodes": [{"name": "n1", "cpus": 4, "state": "idle"}]}, squeue, 2.0)
    assert snapshot.pending[0].features == kept
    # a pending job's change of features (scontrol update)
    job = PendingJob("7", JobSpec("7", submit_s=0.0, requested_time_s=60.0, cpus=1), features=("old",))
    assert changed_job(job, {"new_features": constraint}, HostNames([])).features == kept
    # a submission: a form not modelled is planned on every node, not pinned (Slurm places it)
    sub = submission_from_request({"id": 1, "features": constraint}, now_s=0.0)
    assert sub.features == (planned or ())
    assert sub.constraint_unread == (bool(constraint) and not planned or constraint.startswith("[") and bool(planned))


def test_a_hostile_constraint_through_the_hooks_request_line():
    """The same strings as the Lua hook sends them (JSON, cut at 4 KB): those it lets through are
    read as above, the longer ones are marked untrusted."""
    for constraint, planned in HOSTILE:
        request = parse_request(json.dumps({"op": "submit", "id": 1, "features": constraint}).encode())
        if len(constraint.encode()) > 4096:
            assert request["untrusted"] == {"features": "longer than 4096 bytes"}
            continue
        assert submission_from_request(request, now_s=0.0).features == (planned or ())


NODES = [LiveNode("a", 4, features=("ib", "k80")), LiveNode("b", 4, features=("ib",)), LiveNode("c", 4)]


@pytest.mark.parametrize("constraint, mask", [
    ("ib", [True, True, False]),
    ("k80,ib", [True, False, False]),
    ("k80|ib", [True, True, False]),
    ("[k80|ib]", [True, True, False]),
    ("k80*1", [False, False, False]),             # not modelled: a pending job of this form is planned nowhere
    ("ib\n", [False, False, False]),            # kept whole, a name taken as given: no node has "ib\n"
    ("ib#", [False, False, False]),
    ("", [True, True, True]),
])
def test_the_nodes_a_pending_jobs_constraint_allows(constraint, mask):
    eligibility = Eligibility(live_cluster(NODES))
    per_gpu = np.zeros(len(NODES), dtype=int)
    assert eligible_nodes(eligibility, NODES, per_gpu, "", features_of(constraint), 0).tolist() == mask


_NAME = st.text("abk80_.-", min_size=1, max_size=5)


@given(st.lists(_NAME, min_size=1, max_size=6), st.lists(st.sampled_from("&,"), min_size=6, max_size=6))
def test_plain_features_are_their_names_in_any_order_and_separator(names, separators):
    constraint = "".join(name + sep for name, sep in zip(names, separators))[:-1]
    assert planned_features(constraint) == tuple(sorted(set(names)))


@given(st.text(max_size=40))
def test_any_text_reads_as_names_the_whole_or_not_modelled(constraint):
    planned = planned_features(constraint)
    if planned is None or planned == (constraint,) and "|" in constraint:
        return
    # plain features: every name is in the text, and the text is those names and separators only
    assert all(name in constraint for name in planned)
    assert set(constraint) <= set("".join(planned)) | {"&", ","}


def test_changing_features_to_the_same_form_keeps_the_pending_job_equal():
    job = PendingJob("7", JobSpec("7", submit_s=0.0, requested_time_s=60.0, cpus=1), features=("ib", "k80"))
    assert changed_job(job, {"new_features": "k80&ib"}, HostNames([])) == replace(job)

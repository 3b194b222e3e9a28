"""The one GRES parser (greenslurm.clustermodel.gres): every form Slurm writes, and its invariants."""

from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from greenslurm.clustermodel.gres import Gres, from_tres, gpu_count, gpu_models, parse_gres, shard_count

# -- exact cases: one per form Slurm writes -------------------------------------------------------
FORMS = [
    ("gpu:2", Gres(2)),                                         # slurm.conf Gres=, --gres
    ("gpu:a100:4(S:0-1)", Gres(4, ("a100",))),                  # node Gres with socket binding
    ("gres:gpu:2", Gres(2)),                                    # job_desc.tres_per_node, Slurm 22.05
    ("gres/gpu:1", Gres(1)),                                    # job_desc.tres_per_node, Slurm 23.02+
    ("gres/gpu=4,gres/gpu:a100=4", Gres(4, ("a100",))),         # TRES: total 4, of which 4 are a100
    ("gpu:k80:2,gpu:t4:1,mps:100", Gres(3, ("k80", "t4"))),     # 2 + 1 GPUs; MPS is not GPUs
    ("shard:4", Gres(0, (), 4)),
    ("gpu", Gres(1)),                                           # no count: 1
    ("gpu:t4", Gres(1, ("t4",))),                               # a type and no count: 1 of that type
    ("(null)", Gres()),
    ("", Gres()),
    ("gpu:2(IDX:0-1)", Gres(2)),                                # sinfo GresUsed
    ("gpu:a100:2(S:0,1),gpu:t4:1", Gres(3, ("a100", "t4"))),    # a comma inside (...) is not a separator
    ("gpu:no_consume:2", Gres(2)),                              # the no_consume flag is neither type nor count
    ("mps:2k", Gres()),                                         # 2k = 2048 MPS shares, still no GPU
    ("billing=1,cpu=1,gres/gpu:tesla=4", Gres(4, ("tesla",))),  # sacct AllocTRES, typed parts only: 4
    ("gres/gpu=4,gres/gpu:a100=2,gres/gpu:v100=2,gres/shard=8", Gres(4, ("a100", "v100"), 8)),
]


@pytest.mark.parametrize("text, expected", FORMS)
def test_every_form_slurm_writes(text, expected):
    assert parse_gres(text) == expected
    assert (gpu_count(text), gpu_models(text), shard_count(text)) == (expected.gpus, expected.models, expected.shards)


@pytest.mark.parametrize("text, item", [
    ("gpu:1,gpu:-1", "gpu:-1"),                   # negative
    ("gpu:1.5", "gpu:1.5"),                       # not whole
    ("nic:1,gpu::2", "gpu::2"),                   # empty type
    (":2", ":2"),                                 # no name
    ("gpu:a:b:2", "gpu:a:b:2"),                   # one field too many
    ("gpu:2(S:0", "gpu:2(S:0"),                   # unclosed
    ("gpu:80gb", "gpu:80gb"),                     # a count with a suffix Slurm does not know
    ("gres/gpu=2,gres/gpu:a100=3", "gres/gpu=2"),  # total 2 below its typed part 3
    ("gres/gpu=x", "gres/gpu=x"),
    ("gres/gpu=1,gres/gpu=1", "gres/gpu=1"),
    ("gpu:99999999999999999999", "gpu:99999999999999999999"),   # above Slurm's uint64 counts
])
def test_impossible_values_name_the_item(text, item):
    with pytest.raises(ValueError, match=f"GRES item {item!r}".replace("(", r"\(").replace(")", r"\)")
                       .replace(".", r"\.")):
        parse_gres(text)


def test_from_tres_refuses_non_counts():
    with pytest.raises(ValueError, match=r"'gres/gpu=0\.5'"):
        from_tres({"gres/gpu": 0.5})
    with pytest.raises(ValueError, match="'gres/gpu=inf'"):
        from_tres({"gres/gpu": float("inf")})
    assert from_tres({"cpu": 0.5, "mem": 1e9}) == Gres()     # not GRES: not read


# -- properties -----------------------------------------------------------------------------------
TYPES = st.builds(lambda head, tail: head + tail, st.sampled_from("abcdefghijklmnopqrstuvwxyz"),
                  st.text("abcdefghijklmnopqrstuvwxyz0123456789_-", max_size=8)).filter(lambda t: t != "no_consume")


@st.composite
def gres_items(draw) -> tuple[str, str, str | None, int]:
    """One GRES-form item, as (text, resource name, type, count)."""
    name = draw(st.sampled_from(["gpu", "GPU", "shard", "mps", "nic"]))
    kind = draw(st.none() | TYPES)
    count = draw(st.none() | st.integers(0, 10 ** 6))
    suffix = draw(st.sampled_from(["", "k", "M"])) if count is not None else ""
    prefix = draw(st.sampled_from(["", "gres:", "gres/"]))
    bound = draw(st.sampled_from(["", "(S:0-1)", "(IDX:0,2)", "(S:0,1)"]))
    text = prefix + ":".join([name] + ([kind] if kind else []) + ([f"{count}{suffix}"] if count is not None else [])) + bound
    multiplier = {"": 1, "k": 1024, "M": 1024 ** 2}[suffix]
    return text, name.lower(), kind, 1 if count is None else count * multiplier


@given(st.lists(gres_items(), max_size=6))
def test_count_of_a_joined_list_is_the_sum_of_counts(items):
    texts = [text for text, *_ in items]
    joined = parse_gres(",".join(texts))
    assert joined.gpus == sum(gpu_count(t) for t in texts)
    assert joined.shards == sum(shard_count(t) for t in texts)
    # and each item's count is what it was written with
    assert joined.gpus == sum(count for _, name, _, count in items if name == "gpu")
    assert joined.shards == sum(count for _, name, _, count in items if name == "shard")
    typed = [kind for _, name, kind, count in items if name == "gpu" and kind and count > 0]
    assert joined.models == tuple(dict.fromkeys(typed))


@given(st.dictionaries(TYPES, st.integers(0, 64), max_size=4), st.booleans())
def test_tres_typed_parts_are_counted_once(parts, with_total):
    total = sum(parts.values())
    text = ",".join(["cpu=4", "mem=125G"] + ([f"gres/gpu={total}"] if with_total else [])
                    + [f"gres/gpu:{kind}={n}" for kind, n in parts.items()])
    # typed parts add up to the total when it is absent; written beside it, they are not added again
    assert gpu_count(text) == total

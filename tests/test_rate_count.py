"""SuspendRate / ResumeRate counts: the scans the Slurm power-saving replay folds
(:func:`greenslurm.allocation.power_policy.scan_while_decaying`, array arithmetic) leave the counts
bit for bit as scanning one clock at a time (:meth:`RateCount.scan`, :meth:`RateCount.settle`)."""

from __future__ import annotations

from hypothesis import given, settings, strategies as st

from greenslurm.allocation.power_policy import RateCount, scan_while_decaying


def counts(spec) -> list[RateCount]:
    """Counts from (per minute, minute seconds, last scan, nodes added) tuples."""
    made = []
    for per_minute, minute_s, last_s, added in spec:
        count = RateCount(per_minute, minute_s)
        if last_s is not None:
            count.scan(float(last_s))
        if added:
            count.add(added)
        made.append(count)
    return made


def one_at_a_time(rates: list[RateCount], clocks: list[float]) -> None:
    """The reference: SlurmPowerMachine's loop of scans, one clock at a time, while any count decays."""
    for clock in clocks:
        if not any(rate.decaying for rate in rates):
            break
        for rate in rates:
            rate.scan(clock)
            rate.settle()


COUNT = st.tuples(st.sampled_from([0, 1, 5, 60]), st.sampled_from([60.0, 6.0, 3600.0]),
                  st.one_of(st.none(), st.integers(0, 5)), st.integers(0, 70))


@settings(max_examples=300, deadline=None)
@given(st.lists(COUNT, min_size=1, max_size=3), st.integers(6, 3000),
       st.lists(st.sampled_from([0.0, 1.0, 1.0, 1.0, 2.0, 0.37, 61.0]), min_size=1, max_size=400),
       st.integers(1, 64), st.booleans())
def test_folded_scans_equal_scans_one_at_a_time(spec, first, gaps, chunk, tail):
    # clocks from ``first`` on, gaps of whole seconds mostly (a repeated second, a skipped one, a
    # minute: nothing left), then optionally a long run of one-second scans (a count of 70 nodes
    # decays for about 1,500 of them); both ways in chunks of ``chunk`` clocks
    clocks, at = [], float(first)
    for gap in gaps:
        at += gap
        clocks.append(at)
    if tail:
        clocks += [at + k for k in range(1, 3000)]
    reference, folded = counts(spec), counts(spec)
    one_at_a_time(reference, clocks)
    scan_while_decaying(folded, [clocks[i:i + chunk] for i in range(0, len(clocks), chunk)])
    assert [(r.value, r.count, r.last_s) for r in folded] == [(r.value, r.count, r.last_s) for r in reference]

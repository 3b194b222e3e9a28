"""QOS and fair-share in the ``slurm`` queue: sacctmgr dumps read (and refused when bad), QOS
priorities, QOS limits (MaxJobsPU, GrpTRES cpu) and the fair-share factor (usage, decay, fair tree,
classic), as exact small cases with the arithmetic in comments and property tests for the limits.
The real-Slurm side is ``tests/test_slurm_accounting_live.py``.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings, strategies as st

from greenslurm.clustermodel import Cluster, InputError, JobSpec, NodeSpec
from greenslurm.sim.engine.replay import Replay
from greenslurm.sim.engine.slurm_accounting import SlurmAccounting, strategy_options, with_accounts
from greenslurm.sim.engine.slurm_fairshare import FairShareTree, decay_per_second
from greenslurm.sim.engine.slurm_limits import QosLimits
from greenslurm.sim.engine.slurm_model import SlurmScheduling
from greenslurm.sim.engine.slurm_priority import MULTIFACTOR, PriorityWeights
from greenslurm.traces.slurm_accounts import (Association, Qos, SlurmAccounts, parse_associations_text,
                                              parse_qos_text, read_accounts)

HEADER = "Cluster|Account|User|Partition|Share|QOS|Def QOS"


def assoc_dump(*rows: str) -> str:
    return HEADER + "\n" + "\n".join(rows) + "\n"


FLAT = assoc_dump("c|root|||1|normal|", "c| root|root||1|normal|", "c| a|||1|normal|", "c|  a|ann||1|normal,hi|normal",
                  "c|  a|amy||1|normal,hi|normal", "c| b|||1|normal|", "c|  b|bob||1|normal,hi|normal")
QOS_DUMP = "Name|Priority|UsageFactor|GrpTRES|MaxJobsPU\nnormal|0|1.000000||\nhi|100|1.000000||\n"


def accounts(assoc: str = FLAT, qos: str = QOS_DUMP) -> SlurmAccounts:
    return SlurmAccounts(parse_associations_text(assoc, "assoc.txt"), parse_qos_text(qos, "qos.txt"))


def job(name, submit, runtime, cpus=1, user="ann", account="a", qos="normal", limit=None, nodes=0, partition=""):
    return JobSpec(name, float(submit), float(limit or runtime), runtime_s=float(runtime), cpus=cpus, nodes=nodes,
                   user=user, account=account, qos=qos, partition=partition)


def replay(jobs, cluster, acc, **settings):
    scheduling = SlurmScheduling(**settings)
    run = Replay(jobs, cluster, "slurm", strategy_options=strategy_options(scheduling, acc))
    result = run.run()
    return {r.job_id: r for r in result.records}, run.strategy, result


# -- reading sacctmgr's dumps ---------------------------------------------------------------------------
def test_a_tree_dump_gives_parents_from_the_indentation():
    # sub (FairShare=parent) is two blanks deep: under phys; chem one blank deep again: under root
    text = assoc_dump("c|root|||1|normal|", "c| phys|||2|normal|", "c|  sub|||parent|normal|",
                      "c|   sub|ann||3|normal,hi|hi", "c| chem|||1|normal|")
    got = [(a.account, a.user, a.parent, a.shares) for a in parse_associations_text(text, "t")]
    assert got == [("root", "", "", 1), ("phys", "", "root", 2), ("sub", "", "phys", None), ("sub", "ann", "sub", 3),
                   ("chem", "", "root", 1)]
    ann = parse_associations_text(text, "t")[3]
    assert (ann.qos, ann.default_qos, ann.line) == (("normal", "hi"), "hi", 5)


def test_parent_name_column_gives_the_tree_without_indentation():
    text = "Account|User|ParentName|Share\nroot|||1\nphys||root|2\nsub||phys|1\nsub|ann||1\n"
    assert [(a.account, a.parent) for a in parse_associations_text(text, "t")] == \
        [("root", ""), ("phys", "root"), ("sub", "phys"), ("sub", "sub")]


ASSOC, QOS = parse_associations_text, parse_qos_text


@pytest.mark.parametrize("parse, text, where", [
    # a plain 'show assoc -P' cannot say whether chem is under root or under another account
    (ASSOC, "Account|User|Share\nroot||1\nchem||1\n", "t:3: field Account: cannot tell the parent of account chem"),
    # a '|' inside a name shifts the columns: refused, not read as another association
    (ASSOC, "Account|User|Share\nroot||1\n root|a|b|1\n", "t:3: 4 fields where the header has 3"),
    (ASSOC, "Account|User|Share\nroot||1\n root|ann|many\n", "t:3: field Share: not a count"),
    (ASSOC, "Account|User|Share\nroot||1\n root|ann|-1\n", "t:3: field Share: not a count"),
    (ASSOC, "Account|User|Share\nroot||1\n root|ann|99999999999\n", "t:3: field Share: not a count"),
    (ASSOC, "Account|User|Share\nroot||1\n root|a\x1bnn|1\n", "t:3: field User: not a Slurm name"),
    (ASSOC, "Account|User|Share\nroot||1\n root|ann|1\n root|ann|2\n",
     "t:4: field Account: association root/ann appears twice"),
    (ASSOC, "Account|User|Share|Partition\nroot||1|\n root|ann|1|gpu\n",
     "t:3: field Partition: partition associations"),
    (ASSOC, "Account|User|Share\n a|ann|1\n", "t:2: field Account: user ann in account a, which has no line before it"),
    (ASSOC, "Account|User|Share\nroot||1\n   deep||1\n", "t:3: field Account: account deep indented 3 blanks"),
    (ASSOC, "Cluster|Account|User|Share\nx|root||1\ny|root||1\n", "t: field Cluster: holds 2 clusters"),
    (ASSOC, "Account|User\nroot|\n", "t:1: no column Share"),
    (ASSOC, "", "t: empty"),
    (ASSOC, "Account|User|Share\n a||1\n", "t:2: field Account: account a indented 1 blanks under 0 levels"),
    (ASSOC, "Account|User|Share\n", "t: field Account: no root account"),
    (QOS, "Name|Priority\nhi|high\n", "t:2: field Priority: not a count"),
    (QOS, "Name|UsageFactor\nhi|nan\n", "t:2: field UsageFactor: not a number from 0 to 1e+06"),
    (QOS, "Name|UsageFactor\nhi|-1\n", "t:2: field UsageFactor: not a number from 0 to 1e+06"),
    # 1e308 x any CPU-seconds is inf, and inf / inf usage made every fair-share ratio NaN
    (QOS, "Name|UsageFactor\nhi|1e308\n", "t:2: field UsageFactor: not a number from 0 to 1e+06"),
    # float() read a full-width 2 as 2 and 1_0 as 10; sacctmgr prints ASCII
    (QOS, "Name|UsageFactor\nhi|\uff12\n", "t:2: field UsageFactor: not a number from 0 to 1e+06"),
    (QOS, "Name|UsageFactor\nhi|1_0\n", "t:2: field UsageFactor: not a number from 0 to 1e+06"),
    (QOS, "Name|GrpTRES\nhi|cpu\n", "t:2: field GrpTRES: not a TRES list"),
    (QOS, "Name|GrpTRES\nhi|cpu=x\n", "t:2: field GrpTRES: not a count"),
    (QOS, "Name|MaxJobsPU\nhi|1.5\n", "t:2: field MaxJobsPU: not a count"),
    (QOS, "Name\nhi\nhi\n", "t:3: field Name: QOS hi appears twice"),
    (QOS, "Name\nh i\n", "t:2: field Name: not a Slurm name"),
])
def test_bad_dumps_name_the_file_line_and_field(parse, text, where):
    with pytest.raises(InputError) as error:
        parse(text, "t")
    assert str(error.value).startswith(where), str(error.value)


def test_accounts_nested_deeper_than_64_levels_are_refused():
    # 65 accounts each one blank deeper than the last: the 65th is 65 levels below root
    rows = ["Account|User|Share", "root||1"] + [f"{' ' * depth}a{depth}||1" for depth in range(1, 66)]
    with pytest.raises(InputError, match=r"^t:67: field Account: account a65 is nested 65 levels deep"):
        parse_associations_text("\n".join(rows), "t")
    assert len(parse_associations_text("\n".join(rows[:-1]), "t")) == 65


def test_read_accounts_refuses_a_qos_the_qos_dump_does_not_define(tmp_path):
    (tmp_path / "a.txt").write_text(assoc_dump("c|root|||1|normal|", "c| root|ann||1|normal,gold|"))
    (tmp_path / "q.txt").write_text(QOS_DUMP)
    with pytest.raises(InputError, match=r"a.txt:3: field QOS: QOS gold of root/ann is not in"):
        read_accounts(tmp_path / "a.txt", tmp_path / "q.txt")
    with pytest.raises(InputError, match=r"missing.txt: cannot read"):
        read_accounts(tmp_path / "missing.txt")


def test_limits_the_replay_ignores_are_listed():
    acc = accounts(qos="Name|GrpTRES|MaxTRESPU|GrpJobs\nnormal|cpu=4,gres/gpu=2|cpu=8|3\nhi|||\n")
    assert acc.qos["normal"].grp_cpus == 4
    assert acc.not_modelled == ["QOS normal: GrpTRES=gres/gpu=2", "QOS normal: GrpJobs=3",
                                "QOS normal: MaxTRESPU=cpu=8"]


def test_a_job_without_account_or_qos_gets_slurms_defaults():
    acc = accounts()
    # ann has one association (a) whose default QOS is normal
    assert (acc.complete(job("x", 0, 1, account="", qos="")).account, acc.complete(job("x", 0, 1, qos="")).qos) == \
        ("a", "normal")
    # the root user's association names no default and may use one QOS: that one
    assert acc.job_qos("root", "root", "") == acc.qos["normal"]
    assert acc.job_qos("ann", "a", "gold") is None            # a QOS that does not exist
    assert acc.complete(job("x", 0, 1, user="nobody", account="", qos="")).account == ""


# -- QOS priority --------------------------------------------------------------------------------------
def test_qos_priority_reaches_the_priority_number():
    # normal 0, hi 100: QOS factor 0 and 100/100; weight 1000.  One node of 1 CPU: "hold" runs to 100,
    # then hi (1000) starts before the earlier normal job (0 -> priority 1, Slurm's least)
    cluster = Cluster([NodeSpec("n0", cpus=1)])
    weights = PriorityWeights(type=MULTIFACTOR, qos=1000)
    jobs = [job("hold", 0, 100), job("norm", 1, 10), job("high", 2, 10, qos="hi")]
    starts, queue, _ = replay(jobs, cluster, accounts(), scheduler="builtin", priority=weights)
    assert queue.priority_at_start == {"hold": 1, "norm": 1, "high": 1000}
    assert (starts["high"].start_s, starts["norm"].start_s) == (100.0, 110.0)
    assert with_accounts(SlurmScheduling(), accounts()).priority.qos_priority == {"normal": 0, "hi": 100}


# -- QOS limits ------------------------------------------------------------------------------------------
LIMITED = QOS_DUMP + "one|0|1.0||1\nfour|0|1.0|cpu=4|\n"


def test_max_jobs_per_user_holds_back_a_users_second_job_on_free_nodes_in_both_schedulers():
    # 8 free CPUs; ann's a1, a2 (QOS one: MaxJobsPU=1) and bob's b1 (one) at 0: a1 and b1 start; a2
    # waits for a1 (ends 50).  c1 (normal, after them in the queue) starts at 0: the blocked a2 does
    # not fail the partition.  Under backfill the same: backfill skips a2 and reserves nothing for it.
    for scheduler in ("builtin", "backfill"):
        jobs = [job("a1", 0, 50, qos="one"), job("a2", 0, 50, qos="one"), job("b1", 0, 50, user="bob", account="b",
                                                                              qos="one"),
                job("c1", 0, 50, cpus=2)]
        starts, queue, _ = replay(jobs, Cluster.homogeneous(2, cpus=4), accounts(qos=LIMITED), scheduler=scheduler)
        assert {n: r.start_s for n, r in starts.items()} == {"a1": 0.0, "b1": 0.0, "c1": 0.0, "a2": 50.0}, scheduler


def test_grptres_cpu_caps_a_qos_and_refuses_a_job_above_it():
    # QOS four: GrpTRES cpu=4.  f1 (3 CPUs) runs 0-100; f2 (2 CPUs): 3 + 2 > 4 waits to 100; f3 (1 CPU):
    # 3 + 1 = 4 starts at its pass (3: the background thread's, batch_sched_delay after the one at
    # 0); big (5 CPUs > 4) never could: rejected at submission, counted
    jobs = [job("f1", 0, 100, cpus=3, qos="four"), job("f2", 1, 10, cpus=2, qos="four"),
            job("f3", 2, 10, cpus=1, qos="four"), job("big", 3, 10, cpus=5, qos="four")]
    starts, _, result = replay(jobs, Cluster.homogeneous(4, cpus=4), accounts(qos=LIMITED), scheduler="builtin")
    assert {n: r.start_s for n, r in starts.items()} == {"f1": 0.0, "f2": 100.0, "f3": 3.0}
    assert [(r.job_id, r.reason) for r in result.rejected] == [("big", "over QOS GrpTRES cpu")]


def test_a_job_in_an_unknown_qos_has_no_limits():
    limits = QosLimits({"one": Qos("one", max_jobs_per_user=1)})
    unknown = type("P", (), {"index": 1, "cpus_total": 99.0, "job": job("x", 0, 1, qos="gold")})()
    assert limits.job_blocked(unknown) is None and limits.refused(unknown) is None


LIMIT_QOS = st.tuples(st.integers(1, 3), st.integers(1, 8))          # (MaxJobsPU, GrpTRES cpu) of QOS "lim"


@settings(max_examples=60)
@given(LIMIT_QOS, st.lists(st.tuples(st.integers(0, 200), st.integers(1, 100), st.integers(1, 4),
                                     st.sampled_from(["ann", "bob", "cy"]), st.booleans()), min_size=1, max_size=25),
       st.sampled_from(["builtin", "backfill"]))
def test_limits_are_never_exceeded_and_every_job_within_them_runs(limit, specs, scheduler):
    max_jobs, grp_cpus = limit
    qos = QOS_DUMP + f"lim|0|1.0|cpu={grp_cpus}|{max_jobs}\n"
    assoc = assoc_dump("c|root|||1|normal|", *(f"c| root|{u}||1|normal,lim|normal" for u in ("ann", "bob", "cy")))
    jobs = [job(f"j{i}", submit, runtime, cpus=cpus, user=user, account="root", qos="lim" if limited else "normal")
            for i, (submit, runtime, cpus, user, limited) in enumerate(specs)]
    starts, _, result = replay(jobs, Cluster.homogeneous(3, cpus=4), accounts(assoc, qos), scheduler=scheduler)
    by_name = {j.job_id: j for j in jobs}
    # every job ran, except those asking for more CPUs than the QOS's cap (rejected, counted)
    assert set(starts) | {r.job_id for r in result.rejected} == set(by_name)
    assert all(by_name[r.job_id].cpus > grp_cpus and by_name[r.job_id].qos == "lim" for r in result.rejected)
    # at every start, the limited jobs running then: at most MaxJobsPU per user, at most the cap in CPUs
    limited = [r for r in starts.values() if by_name[r.job_id].qos == "lim"]
    for t in {r.start_s for r in limited}:
        running = [r for r in limited if r.start_s <= t < r.end_s]
        assert sum(r.cpus for r in running) <= grp_cpus
        for user in ("ann", "bob", "cy"):
            assert sum(by_name[r.job_id].user == user for r in running) <= max_jobs


# -- fair-share --------------------------------------------------------------------------------------------
def flat_tree(shares=(1, 1)):
    return (Association("root", "", "", 1), Association("root", "root", "root", 1),
            Association("a", "", "root", shares[0]), Association("a", "ann", "a", 1), Association("a", "amy", "a", 1),
            Association("b", "", "root", shares[1]), Association("b", "bob", "b", 1))


def test_usage_decays_and_running_jobs_add_their_decayed_run_at_each_pass():
    # half-life 100 s: d = 1 - 0.693/100 = 0.99307; passes every 10 s from 0.
    # ann runs 2 CPUs from 5 to 25.  Pass 10: usage = 2 x 5 x d^5.  Pass 20: that x d^10, plus
    # 2 x 10 x d^10.  End 25: plus 2 x 5 x d^5 (from the pass at 20).
    d = decay_per_second(100.0)
    fs = FairShareTree(flat_tree(), half_life_s=100.0, calc_period_s=10.0, origin_s=0.0)
    fs.job_started("j", "ann", "a", cpus=2, usage_factor=1.0, now_s=5.0)
    fs.advance(10.0)
    assert fs.usage("a", "ann") == pytest.approx(2 * 5 * d ** 5)
    fs.advance(20.0)
    assert fs.usage("a", "ann") == pytest.approx(2 * 5 * d ** 5 * d ** 10 + 2 * 10 * d ** 10)
    fs.job_ended("j", 25.0)
    expected = 2 * 5 * d ** 15 + 2 * 10 * d ** 10 + 2 * 5 * d ** 5
    assert fs.usage("a", "ann") == pytest.approx(expected) and fs.usage("root") == pytest.approx(expected)
    # no pass at 25: the factor is still the one of the pass at 20
    assert fs.level_fs("a", "ann") == pytest.approx(0.5 / 1.0)


def test_time_scale_gives_the_decay_slurm_applied_in_real_seconds():
    # the same run compressed 60 times: every time x 60, half-life and period x 60, time_scale 60:
    # the usage is counted in Slurm's (real) CPU-seconds, as sshare's RawUsage, so it is the same
    plain = FairShareTree(flat_tree(), half_life_s=120.0, calc_period_s=60.0, origin_s=0.0)
    scaled = FairShareTree(flat_tree(), half_life_s=7200.0, calc_period_s=3600.0, time_scale=60.0, origin_s=0.0)
    for tree, k in ((plain, 1), (scaled, 60)):
        tree.job_started("j", "bob", "b", cpus=3, usage_factor=1.0, now_s=7.0 * k)
        tree.job_ended("j", 100.0 * k)
        tree.advance(200.0 * k)
    assert scaled.usage("b", "bob") == pytest.approx(plain.usage("b", "bob"), rel=1e-12)


def test_classic_effective_usage_follows_slurms_pass_and_lazy_user_order():
    # NO_FAIR_TREE, no decay, passes every 60 s from 0.  ann: 10 CPUs 0-30 -> a 300 at its end.
    # bob: 2 CPUs 50-100.  Pass 60: the accounts' E first, from the usage before the pass's new usage:
    # root 300, E_a = 1, E_b = 0; then bob's 10 s x 2 = 20 -> root 320.  Users' E when first needed:
    fs = FairShareTree(flat_tree(), half_life_s=0, calc_period_s=60.0, origin_s=0.0, fair_tree=False)
    fs.job_started("a1", "ann", "a", cpus=10, usage_factor=1.0, now_s=0.0)
    fs.job_ended("a1", 30.0)
    fs.job_started("b1", "bob", "b", cpus=2, usage_factor=1.0, now_s=50.0)
    # ann at 61: u = 300/320 = 0.9375, E = u + (1 - u) x 1/2 = 0.96875, N = 1/3 x 1/2 -> 2^(-5.8125)
    assert fs.factor("ann", "a", 61.0) == pytest.approx(2 ** -5.8125)
    # bob at 61: u = 20/320, E = u + (0 - u) x 1/1 = 0 -> 1
    assert fs.factor("bob", "b", 61.0) == 1.0
    fs.job_ended("b1", 100.0)                       # + 40 s x 2 = 80: bob 100, root 400
    # bob's E stays until the next pass; amy's is first needed now: u = 0, E = 0.5 x E_a = 0.5 -> 2^(-3)
    assert (fs.factor("bob", "b", 110.0), fs.factor("amy", "a", 110.0)) == (1.0, 2 ** -3)
    # pass 120: E_b = 100/400 = 0.25; bob u = 0.25 -> E = 0.25, N = 1/3 -> 2^(-0.75)
    assert fs.factor("bob", "b", 120.0) == pytest.approx(2 ** -0.75)


def test_usage_factor_of_the_qos_scales_the_usage():
    fs = FairShareTree(flat_tree(), half_life_s=0, calc_period_s=60.0, origin_s=0.0)
    fs.job_started("j", "ann", "a", cpus=2, usage_factor=0.5, now_s=0.0)
    fs.job_ended("j", 10.0)
    assert fs.usage("a", "ann") == 10.0          # 10 s x 2 CPUs x 0.5


def fair_tree_after(usages: dict, shares=(1, 1)) -> FairShareTree:
    """A tree whose users made ``usages`` (CPU-seconds, no decay) before the pass at 60."""
    fs = FairShareTree(flat_tree(shares), half_life_s=0, calc_period_s=60.0, origin_s=0.0)
    for (account, user), cpu_s in usages.items():
        fs.job_started(user, user, account, cpus=cpu_s, usage_factor=1.0, now_s=0.0)
        fs.job_ended(user, 1.0)
    fs.advance(60.0)
    return fs


def test_fair_tree_ranks_accounts_before_their_users():
    # a: ann 60, amy 0 -> a 60; b: bob 20 -> b 20; root 80.  S = 1/3 for a, b and the root user.
    # level: root user inf, b (1/3)/(20/80) = 1.33, a (1/3)/(60/80) = 0.44.  4 users:
    # root 4/4; bob 3/4; then a's: amy (inf) 2/4, ann 1/4 -- amy without usage ranks below bob
    fs = fair_tree_after({("a", "ann"): 60, ("b", "bob"): 20})
    assert [fs.factor(u, a, 60.0) for u, a in (("root", "root"), ("bob", "b"), ("amy", "a"), ("ann", "a"))] == \
        [1.0, 0.75, 0.5, 0.25]
    assert fs.level_fs("b") == pytest.approx((1 / 3) / (20 / 80))


def test_fair_tree_ties_share_a_rank_and_an_account_tied_with_a_user_passes_it_on():
    # nothing used: every level is infinite; the root user ranks 4/4, each account ties with it and
    # passes the tie to its first user, and the next users of an account tie with that one
    fs = fair_tree_after({})
    assert {u: fs.factor(u, a, 60.0) for u, a in (("root", "root"), ("ann", "a"), ("amy", "a"), ("bob", "b"))} == \
        {"root": 1.0, "ann": 1.0, "amy": 1.0, "bob": 1.0}


def test_fair_tree_shares_weigh_the_level_and_zero_shares_rank_last():
    # a has 3 shares, b 1, root user 1: S_a = 3/5, S_b = 1/5.  Usage a 60, b 20 (root 80):
    # a: (3/5)/(60/80) = 0.8, b: (1/5)/(20/80) = 0.8 -> tied: a's first user ties with b's bob.
    # level_fs a == b; both below the root user
    fs = fair_tree_after({("a", "ann"): 60, ("b", "bob"): 20}, shares=(3, 1))
    assert fs.level_fs("a") == pytest.approx(fs.level_fs("b")) == pytest.approx(0.8)
    zero = fair_tree_after({("b", "bob"): 20}, shares=(0, 1))
    # a with 0 shares: level 0, ranks after b although it used nothing
    assert zero.level_fs("a") == 0.0 and zero.factor("ann", "a", 60.0) < zero.factor("bob", "b", 60.0)


def test_fairshare_parent_user_ranks_first_in_its_account():
    tree = (Association("root", "", "", 1), Association("a", "", "root", 1), Association("a", "ann", "a", 1),
            Association("a", "pat", "a", None))
    fs = FairShareTree(tree, half_life_s=0, calc_period_s=60.0, origin_s=0.0)
    for user, cpus in (("ann", 10), ("pat", 100)):
        fs.job_started(user, user, "a", cpus=cpus, usage_factor=1.0, now_s=0.0)
        fs.job_ended(user, 1.0)
    fs.advance(60.0)
    # pat used 100 of 110, yet FairShare=parent gives him level inf: rank 2/2; ann (1/1)/(10/110) = 11: 1/2
    assert (fs.level_fs("a", "pat"), fs.factor("pat", "a", 60.0), fs.factor("ann", "a", 60.0)) == (math.inf, 1.0, 0.5)


FLAT_TREES = st.lists(st.tuples(st.integers(0, 5), st.lists(st.integers(0, 4), min_size=1, max_size=3)),
                      min_size=1, max_size=4)       # per account: its shares, its users' shares


@settings(max_examples=80)
@given(FLAT_TREES, st.data())
def test_fair_tree_factors_are_ranks_and_more_usage_never_raises_a_users_factor(accounts_spec, data):
    tree = [Association("root", "", "", 1), Association("root", "root", "root", 1)]
    users = []
    for i, (shares, user_shares) in enumerate(accounts_spec):
        tree.append(Association(f"a{i}", "", "root", shares))
        for j, us in enumerate(user_shares):
            tree.append(Association(f"a{i}", f"u{i}{j}", f"a{i}", us))
            users.append((f"u{i}{j}", f"a{i}"))
    usage = {u: data.draw(st.integers(0, 50)) for u in users}
    extra_user = data.draw(st.sampled_from(users))
    extra = data.draw(st.integers(1, 50))

    def factors(added: int) -> dict:
        fs = FairShareTree(tree, half_life_s=0, calc_period_s=60.0, origin_s=0.0)
        for (user, account), cpu_s in usage.items():
            cpus = cpu_s + (added if (user, account) == extra_user else 0)
            if cpus:
                fs.job_started(user, user, account, cpus=cpus, usage_factor=1.0, now_s=0.0)
                fs.job_ended(user, 1.0)
        return {u: fs.factor(u[0], u[1], 60.0) for u in [("root", "root"), *users]}

    before, after = factors(0), factors(extra)
    n = len(users) + 1
    # every factor is a rank over the number of user associations, the best rank n
    assert all(0 < f <= 1 and math.isclose(f * n, round(f * n)) for f in before.values())
    assert max(before.values()) == 1.0
    # using more never moves a user up
    assert after[extra_user] <= before[extra_user]


def test_classic_factor_is_two_to_the_minus_effective_usage_over_shares():
    # NO_FAIR_TREE.  a: ann 60, amy 0; b: bob 20; root 80.  Shares: a, b, root user 1/3 each; users 1/2.
    # ann: u = 60/80 = 0.75, E_a = 0.75 -> E = 0.75 + (0.75 - 0.75) x 1/2 = 0.75, N = 1/3 x 1/2 -> 2^(-4.5)
    # amy: u = 0 -> E = 0 + 0.75 x 1/2 = 0.375 -> 2^(-0.375 x 6) = 2^(-2.25)
    # bob: u = 0.25, E_b = 0.25, bob alone in b (S_raw/S_level = 1) -> E = 0.25, N = 1/3 -> 2^(-0.75)
    fs = FairShareTree(flat_tree(), half_life_s=0, calc_period_s=60.0, origin_s=0.0, fair_tree=False)
    for user, account, cpu_s in (("ann", "a", 60), ("bob", "b", 20)):
        fs.job_started(user, user, account, cpus=cpu_s, usage_factor=1.0, now_s=0.0)
        fs.job_ended(user, 1.0)
    assert fs.factor("ann", "a", 60.0) == pytest.approx(2 ** -4.5)
    assert fs.factor("amy", "a", 60.0) == pytest.approx(2 ** -2.25)
    assert fs.factor("bob", "b", 60.0) == pytest.approx(2 ** -0.75)
    assert fs.factor("nobody", "a", 60.0) == 0.0


@pytest.mark.parametrize("period_s, starts, priorities", [
    # Passes every 100 s from 0: ann's "use" runs 0-90 on the one CPU; ann2 (50) and bob2 (51) wait
    # with equal priorities (pass 0: no usage, every factor 4/4: 1000).  At 90 the CPU frees before
    # the pass at 100 could rank ann's usage: ann2, submitted first, starts; bob2 at 120.  (Pass 100:
    # a used 90 + 10, b nothing: bob ties with the root user, 1000.)
    (100.0, {"ann2": 90.0, "bob2": 120.0}, {"ann2": 1000, "bob2": 1000}),
    # Passes every 60 s: the pass at 60 adds ann's running usage (60 CPU-s) and ranks: root user 4/4,
    # b (inf, tied) -> bob 4/4 = 1000; a (1/3 / 1): amy (inf) 2/4, ann (1/2 / 1) 1/4 = 250.  At 90
    # bob2 starts before ann2.
    (60.0, {"bob2": 90.0, "ann2": 120.0}, {"bob2": 1000, "ann2": 250}),
])
def test_usage_moves_the_order_from_the_next_pass_on(period_s, starts, priorities):
    cluster = Cluster([NodeSpec("n0", cpus=1)])
    weights = PriorityWeights(type=MULTIFACTOR, fairshare=1000, calc_period_s=period_s, calc_origin_s=0.0,
                              decay_half_life_s=0.0)
    jobs = [job("use", 0, 90), job("ann2", 50, 30), job("bob2", 51, 30, user="bob", account="b")]
    records, queue, _ = replay(jobs, cluster, accounts(), scheduler="builtin", priority=weights)
    assert {n: records[n].start_s for n in starts} == starts
    assert {n: queue.priority_at_start[n] for n in priorities} == priorities


def test_the_factor_before_any_usage_is_one_and_zero_without_an_association():
    acc = SlurmAccounting(accounts(qos=LIMITED), SlurmScheduling())
    assert acc.fairshare("ann", "a", 0.0) == 1.0 and acc.fairshare("ghost", "a", 0.0) == 0.0


# -- the command line --------------------------------------------------------------------------------------
SACCT = ("JobID|User|Account|QOS|Partition|Submit|Start|End|NCPUS|NNodes|Timelimit|State\n"
         + "".join(f"{i}|ann|a|one|p|2024-01-01T00:00:00|2024-01-01T00:00:00|2024-01-01T00:01:40|1|1|"
                   "00:02:00|COMPLETED\n" for i in (1, 2, 3)))
SITE_CONF = ("NodeName=n1 CPUs=4\nPartitionName=p Nodes=n1 Default=YES MaxTime=INFINITE\n"
             "SchedulerType=sched/builtin\nPriorityType=priority/multifactor\nPriorityWeightQOS=1000\n")


@pytest.fixture
def site(tmp_path):
    (tmp_path / "jobs.txt").write_text(SACCT)
    (tmp_path / "slurm.conf").write_text(SITE_CONF)
    (tmp_path / "assoc.txt").write_text(FLAT.replace("normal,hi", "normal,hi,one"))
    (tmp_path / "qos.txt").write_text(LIMITED)
    return tmp_path


def test_replay_reads_the_sites_sacctmgr_dumps(site, capsys):
    import csv

    from greenslurm.cli import main

    argv = ["replay", str(site / "jobs.txt"), "--slurm-conf", str(site / "slurm.conf"), "--queue", "slurm",
            "--sacctmgr-assoc", str(site / "assoc.txt"), "--sacctmgr-qos", str(site / "qos.txt"),
            "--out", str(site / "out"), "--no-progress"]
    assert main(argv) == 0
    # three 1-CPU jobs of ann in QOS one (MaxJobsPU=1) on a free 4-CPU node: one after another
    def waits(folder):
        return sorted(float(r["start_s"]) - float(r["submit_s"]) for r in csv.DictReader(open(folder / "jobs.csv")))

    assert waits(site / "out") == [0.0, 100.0, 200.0]
    assert main(argv[:-5] + ["--out", str(site / "out2"), "--no-progress"]) == 0     # without the QOS: at once
    assert waits(site / "out2") == [0.0, 0.0, 0.0]
    capsys.readouterr()


@pytest.mark.parametrize("change, fragments", [
    (lambda site: (site / "assoc.txt").write_text("Account|User|Share\nroot||1\n root|a|b|1\n"),
     ["assoc.txt:3: 4 fields where the header has 3"]),
    (lambda site: (site / "qos.txt").write_text("Name|MaxJobsPU\none|-1\n"), ["qos.txt:2: field MaxJobsPU"]),
    (lambda site: (site / "qos.txt").unlink() or (site / "qos.txt").mkdir(), ["qos.txt: is a directory"]),
])
def test_bad_dumps_stop_the_command_with_one_line_and_exit_2(site, capsys, change, fragments):
    from greenslurm.cli import main

    change(site)
    code = main(["replay", str(site / "jobs.txt"), "--slurm-conf", str(site / "slurm.conf"), "--queue", "slurm",
                 "--sacctmgr-assoc", str(site / "assoc.txt"), "--sacctmgr-qos", str(site / "qos.txt"), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and err[0].startswith("greenslurm: error: ") and "Traceback" not in err[0]
    assert all(fragment in err[0] for fragment in fragments), err


def test_the_dumps_apply_to_the_slurm_queue_only(site, capsys):
    from greenslurm.cli import main

    code = main(["replay", str(site / "jobs.txt"), "--slurm-conf", str(site / "slurm.conf"), "--queue", "easy",
                 "--sacctmgr-assoc", str(site / "assoc.txt"), "--no-progress"])
    assert code == 2 and "field --sacctmgr-assoc: applies to the slurm queue" in capsys.readouterr().err

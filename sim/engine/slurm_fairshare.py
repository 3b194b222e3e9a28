"""Slurm 22.05's fair-share factor: association usage with its decay, and the fair-tree ranking (or
the classic factor), recomputed every PriorityCalcPeriod as slurmctld's decay thread does it.

Read from ``src/plugins/priority/multifactor/priority_multifactor.c`` (``_decay_thread``,
``_apply_decay``, ``_apply_new_usage``, ``priority_p_job_end``), ``fair_tree.c`` and
``src/common/assoc_mgr.c`` (``_set_assoc_parent_and_user``, ``_get_children_level_shares``):

**Usage.**  Slurm's decay factor per second is ``d = 1 - 0.693 / PriorityDecayHalfLife`` (its own
first-order stand-in for 2^(-1/half-life); 1 without decay).  Every PriorityCalcPeriod, starting when
slurmctld starts, the decay thread, at time t with the previous pass at t':

1. multiplies every association's raw usage by d^(t - t');
2. adds, for every running job, ``r x d^r x CPUs x UsageFactor`` (its QOS's) to its association and
   every ancestor up to root, where r = t - max(t', job start) (yes: the new run time is decayed by
   its own length);
3. recomputes every user's fair-share factor (below) and the priorities of the pending jobs.

A job that ends adds ``r x d^r x CPUs x UsageFactor`` at once, r = end - max(t', start); the factor
sees it at the next pass.  CPUs are the job's allocated CPUs (no TRESBillingWeights).

**Fair tree** (PriorityFlags without NO_FAIR_TREE, Slurm's default since 19.05).  Per association,
S = shares / (the shares of it and its siblings) and U = its raw usage / its parent's raw usage (0
when the parent has none); its level fair-share is S / U (infinite when U is 0, 0 when S is 0).
Siblings are ranked by it (higher first; a user before an account at equal values), depth first
from root; users get rank n, n - 1, ... in that order (n: the number of user associations,
root's own ``root`` user included), equal values among consecutive siblings share a rank, and a
user's factor is rank / n.  ``FairShare=parent`` associations take their parent's place: a user
with it ranks first among its siblings (level fair-share infinite); an account with it hands its
children to its nearest ancestor with shares of its own.

**Classic** (NO_FAIR_TREE): factor = 2^(-E / N), with N the product of S along the path from root
and E the effective usage ``u + (E_parent - u) x S_raw / S_level`` (u: usage / root's usage; E =
u under root).  As Slurm's pass does it, the accounts' E are computed first, from the usage before
the pass's decay and new usage (``_set_children_usage_efctv``), and the users' E are cleared; a
user's E is computed when a job of it next needs a priority, with the usage then, and kept until the
next pass.  Slurm adds the running jobs' new usage job by job in job-id order, interleaved with the
pending jobs' priorities; here all of it comes first.  FairShareDampeningFactor is 1 here.

Times come in the replay's seconds and are divided by ``time_scale`` (a compressed workload's
speedup) before Slurm's arithmetic, so that the decay is the one Slurm applied in real seconds.

>>> from greenslurm.traces.slurm_accounts import Association
>>> tree = (Association("root", "", "", 1), Association("root", "root", "root", 1),
...         Association("a", "", "root", 1), Association("a", "ann", "a", 1),
...         Association("b", "", "root", 1), Association("b", "bob", "b", 1))
>>> fs = FairShareTree(tree, half_life_s=0, calc_period_s=60)
>>> fs.job_started("j1", "ann", "a", cpus=4, usage_factor=1.0, now_s=0)
>>> fs.job_ended("j1", 30)          # 30 s x 4 CPUs = 120 CPU-seconds to a (no decay: d = 1)
>>> fs.usage("a", ""), fs.usage("root", "")
(120.0, 120.0)
>>> fs.factor("bob", "b", 59), fs.factor("ann", "a", 59)     # no pass since: all still rank 3 of 3
(1.0, 1.0)
>>> # pass at 60: the root user and account b have no usage (S / U infinite): the root user ranks 3;
>>> # b ties with it, so its first user bob does too; a has S / U = (1/3) / (120/120): ann ranks 1
>>> fs.factor("root", "root", 60), fs.factor("bob", "b", 60), round(fs.factor("ann", "a", 60), 4)
(1.0, 1.0, 0.3333)
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field

from greenslurm.traces.slurm_accounts import ROOT

LN2_SLURM = 0.693                  # Slurm's rounding of ln 2 in its decay factor
NO_VAL = 4294967294.0              # the level fair-share of a FairShare=parent account
DBL_MIN = sys.float_info.min


def decay_per_second(half_life_s: float) -> float:
    """Slurm's decay factor for one second of usage: 1 - 0.693 / half-life (1: no decay).

    >>> decay_per_second(120.0)               # a two-minute half-life
    0.994225
    >>> round(decay_per_second(120.0) ** 120, 4), decay_per_second(0)   # Slurm's "half" after a half-life
    (0.4991, 1.0)
    """
    return 1.0 - LN2_SLURM / half_life_s if half_life_s > 0 else 1.0


def decayed_run(run_s: float, decay: float) -> float:
    """The usage a run of ``run_s`` seconds adds per CPU: r x d^r (``_apply_new_usage``), 0 for r <= 0.

    >>> decayed_run(60.0, 1.0), round(decayed_run(60.0, 0.994225), 3)
    (60.0, 42.387)
    """
    return run_s * decay ** run_s if run_s > 0 else 0.0


@dataclass(eq=False)
class _Assoc:
    """One association and what the passes compute for it."""
    account: str
    user: str
    shares: int | None                    # None: FairShare=parent
    parent: "_Assoc | None" = None        # the direct parent: usage goes up through it
    fs_parent: "_Assoc | None" = None     # the nearest ancestor with shares of its own
    fs_children: list["_Assoc"] = field(default_factory=list)
    level_shares: int = 0
    usage_raw: float = 0.0
    level_fs: float = 0.0
    factor: float = 0.0
    usage_efctv: float | None = 0.0       # classic: None until computed after a pass (Slurm's NO_VAL)

    @property
    def shares_norm(self) -> float:
        """Fair tree's S: the shares over those of the siblings (of the fs parent's for FairShare=parent)."""
        owner = self.fs_parent if self.shares is None and self.fs_parent is not None else self
        if owner.shares is None or not owner.level_shares:
            return 0.0
        return owner.shares / owner.level_shares


@dataclass(eq=False)
class _Running:
    assoc: _Assoc | None
    start_s: float
    cpus_factor: float                    # CPUs x the QOS's UsageFactor


class FairShareTree:
    """Association usage and fair-share factors of one replay (see the module's docstring).

    ``half_life_s`` (PriorityDecayHalfLife), ``calc_period_s`` (PriorityCalcPeriod) and ``origin_s``
    (when slurmctld's decay thread first ran; None: at the first call) are in the replay's seconds;
    ``time_scale`` is how many replay seconds one Slurm second is."""

    def __init__(self, associations, *, half_life_s: float, calc_period_s: float, time_scale: float = 1.0,
                 fair_tree: bool = True, origin_s: float | None = None) -> None:
        if not calc_period_s > 0:
            raise ValueError(f"PriorityCalcPeriod must be > 0, not {calc_period_s}")
        self.scale = float(time_scale)
        self.decay = decay_per_second(half_life_s / self.scale)
        self.period_s = float(calc_period_s)
        self.fair_tree = fair_tree
        self.origin_s = origin_s
        self._last_s: float | None = None          # the last pass (Slurm's g_last_ran)
        self._running: dict[str, _Running] = {}
        self._build(associations)

    # -- the tree --------------------------------------------------------------------------------
    def _build(self, associations) -> None:
        nodes: dict[tuple[str, str], _Assoc] = {}
        order: list[_Assoc] = []
        for a in associations:
            node = _Assoc(a.account, a.user, a.shares)
            node.parent = nodes.get((a.parent, "")) if a.parent else None
            nodes[(a.account, a.user)] = node
            order.append(node)
        self._nodes = nodes
        self.root = nodes.get((ROOT, ""))
        if self.root is None:
            raise ValueError("the associations have no root account")
        for node in order:
            if node is self.root:
                continue
            ancestor = node.parent
            while ancestor is not None and ancestor.shares is None and ancestor is not self.root:
                ancestor = ancestor.parent          # Slurm's _find_assoc_parent(.., false)
            node.fs_parent = ancestor
            if ancestor is not None:
                ancestor.fs_children.append(node)
        for node in order:
            # siblings' shares: FairShare=parent children add nothing (their own children moved up)
            total = sum(child.shares for child in node.fs_children if child.shares is not None)
            for child in node.fs_children:
                child.level_shares = total
        self.user_count = sum(1 for node in order if node.user)
        self._order = order

    # -- events --------------------------------------------------------------------------------
    def job_started(self, key: str, user: str, account: str, cpus: float, usage_factor: float, now_s: float) -> None:
        """A job of (user, account) started with ``cpus`` CPUs under a QOS with ``usage_factor``."""
        self.advance(now_s)
        self._running[key] = _Running(self._nodes.get((account, user)), now_s, cpus * usage_factor)

    def job_ended(self, key: str, now_s: float) -> None:
        """The job ended: its usage since the last pass counts now (``priority_p_job_end``)."""
        self.advance(now_s)
        job = self._running.pop(key, None)
        if job is not None:
            since = job.start_s if self._last_s is None else max(self._last_s, job.start_s)
            self._add_usage(job, since, now_s)

    def factor(self, user: str, account: str, now_s: float) -> float:
        """The fair-share factor in [0, 1] of jobs of (user, account) at ``now_s`` (0 without an
        association: Slurm's "has no association, unable to compute fairshare")."""
        self.advance(now_s)
        node = self._nodes.get((account, user))
        if node is None:
            return 0.0
        if not self.fair_tree and node.usage_efctv is None:
            self._classic_factor(node)
        return node.factor

    def usage(self, account: str, user: str = "") -> float:
        """An association's raw usage now (Slurm's CPU-seconds, decayed: sshare's RawUsage)."""
        return self._nodes[(account, user)].usage_raw

    def level_fs(self, account: str, user: str = "") -> float:
        """An association's level fair-share at the last pass (sshare's LevelFS)."""
        return self._nodes[(account, user)].level_fs

    # -- the passes ------------------------------------------------------------------------------
    def advance(self, now_s: float) -> None:
        """Run every pass due by ``now_s``: the first at ``origin_s`` (now if none was given), then
        every period.  Factors are read only after ``advance``, so only the last pass ranks; passes
        without running jobs only decay, and d^a x d^b = d^(a+b) makes them one multiplication."""
        if self.origin_s is None:
            self.origin_s = now_s
        due = []
        if self._last_s is None:
            if self.origin_s > now_s:
                return
            self._usage_pass(self.origin_s)
            due.append(self.origin_s)
        if now_s >= self._last_s + self.period_s:
            count = math.floor((now_s - self._last_s) / self.period_s)
            if not self._running:
                if not self.fair_tree:
                    self._classic_accounts()
                self._decay((count * self.period_s) / self.scale)
                self._last_s += count * self.period_s
            else:
                for _ in range(count):
                    self._usage_pass(self._last_s + self.period_s)
            due.append(self._last_s)
        if due and self.fair_tree:
            self._fair_tree()

    def _decay(self, seconds: float) -> None:
        if seconds > 0 and self.decay != 1.0:
            real_decay = max(self.decay ** seconds, DBL_MIN)
            for node in self._order:
                node.usage_raw *= real_decay

    def _usage_pass(self, t: float) -> None:
        """Steps 1 and 2 of a pass at ``t``: decay, then the running jobs' new usage (classic: the
        accounts' effective usage before either)."""
        if not self.fair_tree:
            self._classic_accounts()
        if self._last_s is not None:
            self._decay((t - self._last_s) / self.scale)
        for job in self._running.values():
            since = job.start_s if self._last_s is None else max(self._last_s, job.start_s)
            self._add_usage(job, since, t)
        self._last_s = t

    def _add_usage(self, job: _Running, since_s: float, until_s: float) -> None:
        added = decayed_run((until_s - since_s) / self.scale, self.decay) * job.cpus_factor
        node = job.assoc
        while node is not None:
            node.usage_raw += added
            node = node.parent

    def _fair_tree(self) -> None:
        self._rank = self._rank_no_tie = self.user_count
        self._rank_children(self.root.fs_children, account_tied=False)

    def _rank_children(self, siblings: list[_Assoc], account_tied: bool) -> None:
        """``_calc_tree_fs``: level fair-share of each sibling, ranked; users get their factor."""
        for node in siblings:
            parent = node.fs_parent
            u = node.usage_raw / parent.usage_raw if parent is not None and parent.usage_raw else 0.0
            s = node.shares_norm
            if node.shares is None:
                node.level_fs = math.inf if node.user else NO_VAL
            elif s == 0:
                node.level_fs = 0.0
            else:
                node.level_fs = s / u if u else math.inf
        ranked = sorted(siblings, key=lambda n: (-n.level_fs, 0 if n.user else 1))    # stable, as glibc's qsort
        previous = None
        for i, node in enumerate(ranked):
            tied = account_tied if i == 0 else previous == node.level_fs
            if node.user:
                if not tied:
                    self._rank = self._rank_no_tie
                node.factor = self._rank / self.user_count
                self._rank_no_tie -= 1
            else:
                # Slurm 22.05 merges tied sibling accounts only when users follow them with the same
                # value, which the order above never gives: each account is ranked on its own
                self._rank_children(node.fs_children, tied)
            previous = node.level_fs

    def _classic_accounts(self) -> None:
        """The accounts' effective usage from the usage now, top down; every user's cleared."""
        self.root.usage_efctv = 1.0
        stack = list(reversed(self.root.fs_children))
        while stack:
            node = stack.pop()
            if node.user:
                node.usage_efctv = None
                continue
            self._set_usage_efctv(node)
            stack.extend(reversed(node.fs_children))

    def _set_usage_efctv(self, node: _Assoc) -> None:
        """``priority_p_set_assoc_usage``: usage over root's, mixed with the parent's effective usage."""
        root_usage = self.root.usage_raw
        usage_norm = min(node.usage_raw / root_usage, 1.0) if root_usage else 0.0
        parent = node.fs_parent
        if parent is self.root:
            node.usage_efctv = usage_norm
        elif node.shares is None or not node.level_shares:
            node.usage_efctv = parent.usage_efctv
        else:
            node.usage_efctv = usage_norm + (parent.usage_efctv - usage_norm) * node.shares / node.level_shares

    def _classic_factor(self, node: _Assoc) -> None:
        self._set_usage_efctv(node)
        norm = self._classic_shares(node)
        node.factor = 2.0 ** (-(node.usage_efctv / norm)) if norm > 0 else 0.0

    def _classic_shares(self, node: _Assoc) -> float:
        """``_normalize_assoc_shares_traditional``: the product of shares / level shares up to root."""
        if node.shares is None and node.fs_parent is not None:
            return self._classic_shares(node.fs_parent) if node.fs_parent is not self.root else 1.0
        norm = 1.0
        while node is not None and node.parent is not None:
            if node.shares is not None:
                norm = norm * node.shares / node.level_shares if node.level_shares else 0.0
            node = node.parent
        return norm

"""slurm.conf into the typed model: exact cases, refusals that Slurm's own parser also refuses, the
Debian package's example slurm.conf, and a real Slurm 22.05 (slurmctld + slurmd on loopback) whose
``scontrol show node/partition/config`` is compared with the model field by field."""

from __future__ import annotations

import gzip
import math
import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from greenslurm.clustermodel import InputError
from greenslurm.traces.slurm_conf import OverSubscribe, cluster_from_slurm_conf, expand_hostlist, parse_slurm_conf, parse_slurm_conf_text, parse_time_limit_s
from greenslurm.traces.slurm_hostlist import HostNames
from greenslurm.traces.slurm_fields import parse_duration

from slurm_cluster import NodeDef, SlurmCluster, scontrol_fields, shared_root, skip_reason

DEBIAN_EXAMPLE = Path("/usr/share/doc/slurmctld/examples/slurm.conf.simple.gz")


# -- times and hostlists -------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, seconds", [
    ("30", 1800.0),                 # minutes
    ("0", 0.0),
    ("1:30", 120.0),                # MM:SS = 90 s, rounded up to the next minute
    ("2:00", 120.0),                # MM:SS exactly 2 minutes
    ("1:00:00", 3600.0),            # HH:MM:SS
    ("0:00:01", 60.0),              # 1 s rounds up to a minute
    ("2-12", 2 * 86400 + 12 * 3600.0),          # D-HH
    ("1-2:30", 86400 + 2 * 3600 + 30 * 60.0),   # D-HH:MM
    ("1-00:00:01", 86400 + 60.0),               # D-HH:MM:SS, 1 s rounds up
    ("3-", 3 * 86400.0),            # Slurm's "days-" with nothing after
    ("UNLIMITED", math.inf), ("infinite", math.inf), ("-1", math.inf),
])
def test_time_limits_as_slurm_reads_them(text, seconds):
    assert parse_time_limit_s(text) == seconds


@pytest.mark.parametrize("text", ["garbage", "1:2:3:4", "-5", "1-2-3", "", "1.5", "1:", "1h", "1:00:00.5", "1-:5"])
def test_time_garbage_is_refused(text):
    with pytest.raises(ValueError, match="is not a Slurm time"):
        parse_time_limit_s(text)


@pytest.mark.parametrize("text, seconds", [
    ("1:99:00", 3600 + 99 * 60.0),     # Slurm 22.05's time_str2secs takes each field as it is: no range check
    ("1-30", 86400 + 30 * 3600.0),     # D-HH, 30 hours
    ("01:07.402", 67.402),             # sacct's CPU-time columns: MM:SS.mmm
    ("2-", 2 * 86400.0),
    ("Partition_Limit", None), ("UNLIMITED", None), ("Unknown", None),
])
def test_sacct_durations_are_read_by_the_same_rule_as_slurm_conf(text, seconds):
    # one parser (traces.slurm_fields.slurm_time_s) for sacct's columns and slurm.conf's limits
    assert parse_duration(text) == seconds
    if seconds is not None and "." not in text:
        assert parse_time_limit_s(text) == math.ceil(seconds / 60) * 60


@given(st.integers(0, 400), st.integers(0, 23), st.integers(0, 59), st.integers(0, 59))
def test_any_d_hh_mm_ss_is_its_seconds_rounded_up_to_a_minute(d, h, m, s):
    total = d * 86400 + h * 3600 + m * 60 + s
    assert parse_time_limit_s(f"{d}-{h:02d}:{m:02d}:{s:02d}") == math.ceil(total / 60) * 60


@given(st.integers(0, 5000), st.integers(0, 300), st.integers(1, 5))
def test_a_range_names_every_number_once_at_its_width(low, span, width):
    names = expand_hostlist(f"n[{low:0{width}d}-{low + span:0{width}d}]")
    assert len(names) == span + 1 == len(set(names))
    assert names[0] == f"n{low:0{width}d}" and names[-1] == f"n{low + span:0{width}d}"


# hostlists built from a few prefixes, bracket groups of ranges at widths 1-3 (overlapping or not), and
# names of a cluster from the same prefixes: small enough to expand, so the expansion can judge
_PREFIX = st.sampled_from(["n", "gpu", "r", "n1", "", "-"])
_RANGE = st.tuples(st.integers(0, 120), st.integers(0, 30), st.integers(1, 3)).map(
    lambda r: f"{r[0]:0{r[2]}d}" + (f"-{r[0] + r[1]:0{r[2]}d}" if r[1] else ""))
_BRACKET = st.lists(_RANGE, min_size=1, max_size=3).map(lambda parts: "[" + ",".join(parts) + "]")
_ITEM = st.lists(st.tuples(_PREFIX, st.one_of(st.just(""), _BRACKET)), min_size=1, max_size=2).map(
    lambda groups: "".join(p + b for p, b in groups)).filter(bool)
_NAME = st.tuples(_PREFIX, st.integers(0, 160), st.integers(1, 3), st.sampled_from(["", "0", "x"])).map(
    lambda n: f"{n[0]}{n[1]:0{n[2]}d}{n[3]}")


@given(st.lists(_ITEM, min_size=1, max_size=4).map(",".join), st.lists(_NAME, max_size=40))
def test_a_hostlist_matches_the_cluster_as_its_expansion_does(text, cluster):
    expanded = set(expand_hostlist(text))
    names = HostNames(cluster)
    found, outside = names.members(text)
    # the same names, in the cluster's order, without expanding
    assert found == [name for name in dict.fromkeys(cluster) if name in expanded]
    # a name outside the cluster is always seen (an item may be said to name others needlessly only
    # when its ranges give one name twice)
    if expanded - set(cluster):
        assert outside
    elif len(expand_hostlist(text)) == len(expanded):
        assert not outside, (found, outside)


def test_a_hostlist_of_a_hundred_thousand_names_is_matched_without_expanding_it():
    names = HostNames(["n1", "n2", "m7", "login"])
    # n1..n60000 and m1..m39999: the cluster's n1, n2, m7; both items name others too
    assert names.members("n[1-60000],m[1-39999]") == (["n1", "n2", "m7"], ["n[1-60000]", "m[1-39999]"])
    # ten billion names is no bigger a question
    assert names.members("n[0-99999]x[0-99999],n[1-9999999999]") == (["n1", "n2"], ["n[0-99999]x[0-99999]",
                                                                                    "n[1-9999999999]"])
    for bad in ("n[1-", "n[a-b]", "n[3-1]", "n[[1]]"):
        with pytest.raises(ValueError):
            names.members(bad)


def test_hostlists():
    assert expand_hostlist("n[001-003]") == ["n001", "n002", "n003"]
    assert expand_hostlist("a[1,3-4],b") == ["a1", "a3", "a4", "b"]
    assert expand_hostlist("rack[0-1]_b[7-8]") == ["rack0_b7", "rack0_b8", "rack1_b7", "rack1_b8"]
    for bad in ("n[1-", "n[a-b]", "n[3-1]", "n[[1]]"):
        with pytest.raises(ValueError):
            expand_hostlist(bad)
    # a limit on the names in all, checked before they are built: 3 + 1 = 4 names
    assert len(expand_hostlist("n[1-3],m", limit=4)) == 4
    for bad in ("n[1-3],m", "a[1-2]b[1-2]"):               # 4 names; 2 x 2 = 4 names
        with pytest.raises(ValueError, match="more than 3 hosts"):
            expand_hostlist(bad, limit=3)


# -- nodes ---------------------------------------------------------------------------------------------------
def test_default_lines_ranges_and_cpu_arithmetic():
    conf = parse_slurm_conf_text(
        "NodeName=DEFAULT RealMemory=1000 Weight=3\n"
        "NodeName=n[001-128],x1 Sockets=2 CoresPerSocket=8 ThreadsPerCore=2\n"     # 2 x 8 x 2 = 32 CPUs
        "NodeName=DEFAULT Features=ib\n"                                         # adds to the defaults
        "NodeName=b1 Boards=2 SocketsPerBoard=2 CoresPerSocket=4\n"             # 2 x 2 x 4 = 16 CPUs
        "NodeName=c1 CPUs=12 CoresPerSocket=6 Gres=gpu:a100:2,gpu:t4:1,shard:8 State=DRAIN Feature=fast\n")
    assert len(conf.nodes) == 131 and conf.nodes[0].name == "n001" and conf.nodes[127].name == "n128"
    n = conf.node("x1")
    assert (n.cpus, n.sockets, n.real_memory_mb, n.weight, n.features) == (32, 2, 1000, 3, ())
    b = conf.node("b1")
    assert (b.cpus, b.boards, b.sockets, b.features) == (16, 2, 4, ("ib",))
    c = conf.node("c1")                        # Sockets inferred: 12 CPUs / (6 cores x 1 thread) = 2
    assert (c.cpus, c.sockets, c.gpus, c.gpu_models, c.shards, c.state, c.features, c.available) == (
        12, 2, 3, ("a100", "t4"), 8, "DRAIN", ("fast",), False)


def test_a_node_defined_twice_keeps_its_first_definition_as_slurm_does():
    conf = parse_slurm_conf_text("NodeName=a CPUs=4\nNodeName=a CPUs=8\n", "s.conf")
    assert conf.node("a").cpus == 4 and len(conf.nodes) == 1
    assert conf.warnings == ("s.conf:2: node a is defined again; Slurm keeps its first definition (s.conf:1)",)


def test_cpus_that_match_no_topology_are_reset_to_the_product():
    conf = parse_slurm_conf_text("NodeName=a CPUs=6 Sockets=2 CoresPerSocket=2\n")
    assert conf.node("a").cpus == 4 and "resets it to 4" in conf.warnings[0]     # 2 sockets x 2 cores


def test_down_nodes_lines_set_the_state():
    conf = parse_slurm_conf_text("NodeName=a[1-3] CPUs=1\nDownNodes=a[2-3] State=FAIL Reason=\"bad fan\"\n")
    assert [n.state for n in conf.nodes] == ["UNKNOWN", "FAIL", "FAIL"]


# -- partitions ----------------------------------------------------------------------------------------------
def test_partitions_overlap_inherit_defaults_and_put_themselves_on_nodes():
    conf = parse_slurm_conf_text(
        "NodeName=n[1-4] CPUs=4\n"
        "PartitionName=DEFAULT MaxTime=1:00:00 PriorityTier=2\n"
        "PartitionName=short Nodes=n[1-4] Default=YES MaxTime=30 DefaultTime=5\n"
        "PartitionName=long Nodes=n[3-4] MaxTime=7-0 PriorityTier=9 PriorityJobFactor=3 OverSubscribe=FORCE "
        "MaxNodes=2 MinNodes=1 ExclusiveUser=YES State=DRAIN\n"
        "PartitionName=rest Nodes=ALL OverSubscribe=YES:2 MaxNodes=UNLIMITED\n"
        "PartitionName=empty Nodes=\n")
    short, long_, rest, empty = conf.partitions
    assert (short.max_time_s, short.default_time_s, short.job_default_time_s, short.priority_tier) == (
        1800.0, 300.0, 300.0, 2)
    assert (long_.nodes, long_.max_time_s, long_.priority_tier, long_.priority_job_factor) == (
        ("n3", "n4"), 7 * 86400.0, 9, 3)
    assert (long_.oversubscribe, long_.max_nodes, long_.min_nodes, long_.exclusive_user, long_.state) == (
        OverSubscribe("FORCE", 4), 2, 1, True, "DRAIN")
    assert (rest.max_time_s, rest.job_default_time_s, str(rest.oversubscribe), rest.max_nodes) == (
        3600.0, 3600.0, "YES:2", None)                                       # MaxTime from the DEFAULT line
    assert empty.nodes == () and conf.default_partition is short
    assert [n.partitions for n in conf.nodes] == [("short", "rest")] * 2 + [("short", "long", "rest")] * 2
    cluster = cluster_from_slurm_conf(conf, exclude_unavailable=True)
    assert [n.partitions for n in cluster.nodes][2] == ("short", "long", "rest") and cluster.name == "slurm"


def test_nodesets_in_partitions():
    conf = parse_slurm_conf_text("NodeName=a[1-2] Features=gpu\nNodeName=b1\nNodeSet=gpus Feature=gpu\n"
                                 "PartitionName=g Nodes=gpus,b1\n")
    assert conf.partition("g").nodes == ("a1", "a2", "b1")


# -- priority, scheduler, select -------------------------------------------------------------------------------
def test_scheduler_parameters_are_read_as_slurms_atoi_and_first_occurrence_does():
    # Slurm 22.05 reads each of these with xstrcasestr(sched_params, "bf_interval=") and atoi (backfill.c
    # _load_config, job_scheduler.c): the first occurrence counts and the leading digits are the number.
    # "1e3" is 1 (was: not a whole number, so 30), "10s" is 10, the second bf_interval (7) is not read
    # (was: the last one counted); each difference from the text is said
    conf = parse_slurm_conf_text("SchedulerParameters=bf_interval=1e3,sched_interval=10s,bf_window=5,bf_window=9\n")
    s = conf.scheduler
    assert (s.bf_interval_s, s.sched_interval_s, s.bf_window_min) == (1, 10, 5)
    assert len(conf.warnings) == 3
    assert "bf_interval='1e3' is read as 1" in conf.warnings[0] and "sched_interval='10s' is read as 10" in conf.warnings[1]
    assert "bf_window is given again ('9'); Slurm reads the first ('5')" in conf.warnings[2]
    conf = parse_slurm_conf_text("SchedulerParameters=bf_interval=5,bf_interval=7\n")
    assert conf.scheduler.bf_interval_s == 5


def test_priority_scheduler_and_select_settings():
    conf = parse_slurm_conf_text(
        "prioritytype=priority/multifactor\nPriorityWeightAge=1000\nPriorityWeightFairshare=2000\n"
        "PriorityWeightJobSize=3\nPriorityWeightPartition=4\nPriorityWeightQOS=5\nPriorityWeightTRES=CPU=1,Mem=2\n"
        "PriorityMaxAge=1-0\nPriorityDecayHalfLife=14-0\nPriorityFavorSmall=YES\nPriorityCalcPeriod=2\n"
        "PriorityFlags=SMALL_RELATIVE_TO_TIME,fair_tree\n"
        "SchedulerType=sched/builtin\n"
        "SchedulerParameters=bf_window=2880,bf_resolution=120,bf_continue,bf_max_job_user=20,defer,"
        "max_rpc_cnt=150,bf_interval=0\n"
        "SelectType=select/cons_tres\nSelectTypeParameters=CR_CPU,CR_LLN\n")
    p = conf.priority
    assert (p.type, p.weight_age, p.weight_fairshare, p.weight_job_size, p.weight_partition, p.weight_qos) == (
        "priority/multifactor", 1000, 2000, 3, 4, 5)
    assert (p.weight_tres, p.max_age_s, p.decay_half_life_s, p.favor_small, p.calc_period_s, p.flags) == (
        "CPU=1,Mem=2", 86400.0, 14 * 86400.0, True, 120.0, ("SMALL_RELATIVE_TO_TIME", "FAIR_TREE"))
    s = conf.scheduler
    assert (s.type, s.bf_window_min, s.bf_resolution_s, s.bf_continue, s.bf_max_job_user) == (
        "sched/builtin", 2880, 120, True, 20)
    assert (s.bf_max_job_test, s.default_queue_depth, s.sched_interval_s) == (500, 100, 60)    # defaults
    assert s.other == (("defer", None), ("max_rpc_cnt", "150"))
    assert s.bf_interval_s == 30 and "bf_interval='0'" in conf.warnings[0]     # out of range: Slurm's default
    assert (conf.select.parameters, conf.select.memory_consumable, conf.select.unit) == (
        ("CR_CPU", "CR_LLN"), False, "CPU")


def test_defaults_when_nothing_is_set():
    conf = parse_slurm_conf_text("NodeName=a\n")
    assert conf.node("a").cpus == 1 and conf.node("a").real_memory_mb == 1 and conf.partitions == ()
    assert (conf.scheduler.type, conf.scheduler.bf_window_min, conf.scheduler.bf_resolution_s,
            conf.scheduler.bf_max_job_test, conf.scheduler.bf_interval_s) == ("sched/backfill", 1440, 60, 500, 30)
    assert conf.priority.type == "priority/basic" and conf.select.memory_consumable
    assert parse_slurm_conf_text("SelectType=select/linear\n").select.unit == "NODE"


def test_comments_continuations_and_case():
    conf = parse_slurm_conf_text("nodename=a \\\n  cpus=4 # a comment Weight=9\n"
                                 "PARTITIONNAME=p NODES=a maxtime=\"1:00:00\"\n")
    assert conf.node("a").cpus == 4 and conf.node("a").weight == 1 and conf.partition("p").max_time_s == 3600.0


def test_include_files_follow_slurm_2205_relative_rule(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "slurm.conf").write_text("ClusterName=Blue\nNodeName=a CPUs=2\nInclude sub/parts.conf\n")
    (tmp_path / "sub" / "parts.conf").write_text("Include more.conf\n")        # beside parts.conf in 22.05
    (tmp_path / "sub" / "more.conf").write_text("PartitionName=p Nodes=a\n")
    conf = parse_slurm_conf(tmp_path / "slurm.conf")
    assert conf.partition("p").where == f"{tmp_path / 'sub' / 'more.conf'}:1" and len(conf.files) == 3
    with pytest.raises(InputError, match="more.conf: no such file"):
        parse_slurm_conf(tmp_path / "slurm.conf", relative_to_includer=False)  # 23.02 looks beside slurm.conf
    (tmp_path / "sub" / "more.conf").write_text("Include ../slurm.conf\n")
    with pytest.raises(InputError, match="an Include cycle"):
        parse_slurm_conf(tmp_path / "slurm.conf")


# -- refusals (each named by file, line and field) ---------------------------------------------------------------
BAD = [  # (text, line, field, message part); Slurm's own parser refuses the first group too
    ("NodeName=n1 CPUs=-4\n", 1, "cpus", "less than 0"),
    ("NodeName=n1 CPUs=abc\n", 1, "cpus", "not a whole number"),
    ("NodeName=n1 RealMemory=-1\n", 1, "realmemory", "less than 0"),
    ("NodeName=n1 Weight=-1\n", 1, "weight", "less than 0"),
    ("NodeName=n1 Bogus=4\n", 1, "bogus", "know no key"),
    ("NodeName=n1 AvailableFeatures=a\n", 1, "availablefeatures", "know no key"),
    ("NodeName=n1\nPartitionName=p Nodes=n1 MaxTime=garbage\n", 2, "maxtime", "not a Slurm time"),
    ("NodeName=n1\nPartitionName=p Nodes=n1 MaxTime=1:2:3:4\n", 2, "maxtime", "not a Slurm time"),
    ("NodeName=n1\nPartitionName=p Nodes=n1 MaxTime=-5\n", 2, "maxtime", "not a Slurm time"),
    ("NodeName=n1\nPartitionName=p Nodes=n1 MaxNodes=-3\n", 2, "maxnodes", "less than 0"),
    ("NodeName=n1\nPartitionName=p Nodes=n1 PriorityTier=70000\n", 2, "prioritytier", "greater than 65535"),
    ("NodeName=n1\nPartitionName=p Nodes=n1 OverSubscribe=maybe\n", 2, "OverSubscribe", "not NO, EXCLUSIVE"),
    ("garbage line here\n", 1, None, "is not KEY=VALUE"),
    ("NodeName=DEFAULT NodeHostname=localhost\n", 1, "nodehostname", "not allowed with NodeName=DEFAULT"),
]
BAD_FOR_SLURMCTLD = [  # the client's parser lets these through; slurmctld refuses them when it builds its tables
    ("NodeName=n1\nPartitionName=p Nodes=n9\n", 2, "Nodes", "node n9 is not defined"),
    ("NodeName=n1 State=bogus\n", 1, "State", "not a node state"),
    ("NodeName=n[3-1]\n", 1, "NodeName", "goes down"),
]


@pytest.mark.parametrize("text, line, field, message", BAD + BAD_FOR_SLURMCTLD)
def test_bad_values_name_file_line_and_field(text, line, field, message):
    with pytest.raises(InputError, match=message) as info:
        parse_slurm_conf_text(text, "site.conf")
    assert (info.value.path, info.value.line, info.value.field) == ("site.conf", line, field)
    assert "\n" not in str(info.value)


@pytest.mark.skipif(shutil.which("sinfo") is None, reason="Slurm's client commands are not installed")
@pytest.mark.parametrize("text", [text for text, *_ in BAD])
def test_slurms_own_parser_refuses_them_too(tmp_path, text):
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=t\nSlurmctldHost=localhost\n" + text)
    done = subprocess.run(["sinfo", "--version"], env=dict(os.environ, SLURM_CONF=str(conf)), capture_output=True,
                          text=True, timeout=30)
    assert done.returncode != 0 and "Unable to process configuration file" in done.stderr


@pytest.mark.skipif(not DEBIAN_EXAMPLE.exists(), reason="the slurmctld package (its example slurm.conf) is absent")
def test_the_debian_example_slurm_conf():
    conf = parse_slurm_conf_text(gzip.decompress(DEBIAN_EXAMPLE.read_bytes()).decode(), str(DEBIAN_EXAMPLE))
    assert [(n.name, n.cpus, n.real_memory_mb) for n in conf.nodes] == [("server", 16, 64000)]
    assert conf.default_partition.name == "debug" and conf.default_partition.max_time_s == math.inf
    assert (conf.select.type, conf.select.memory_consumable, conf.scheduler.type) == (
        "select/cons_tres", True, "sched/backfill")


# -- against a real Slurm 22.05 -------------------------------------------------------------------------------
REASON = skip_reason()


def consecutive_free_ports(count: int) -> int:
    """The first of ``count`` consecutive TCP ports free on loopback (slurm.conf's Port=[p-q])."""
    for _ in range(200):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            first = probe.getsockname()[1]
        if first + count > 65535:
            continue
        try:
            held = []
            for port in range(first, first + count):
                s = socket.socket()
                held.append(s)
                s.bind(("127.0.0.1", port))
            return first
        except OSError:
            continue
        finally:
            for s in held:
                s.close()
    raise RuntimeError("no run of free ports")


PARTS_CONF = ("PartitionName=DEFAULT MaxTime=1:00:00 State=UP\n"
              "PartitionName=short Nodes=c[1-3],g1 Default=YES MaxTime=30 DefaultTime=5 PriorityTier=1\n"
              "PartitionName=long Nodes=c[2-3] MaxTime=2-12 PriorityTier=10 PriorityJobFactor=3 "
              "OverSubscribe=FORCE:2 MaxNodes=2 MinNodes=1 ExclusiveUser=YES\n"
              "PartitionName=gpu Nodes=g1 OverSubscribe=EXCLUSIVE\n")


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    root = shared_root("greenslurm-conf-")
    (root / "etc").mkdir()
    (root / "etc" / "parts.conf").write_text(PARTS_CONF)
    first = consecutive_free_ports(4)
    node_lines = [
        "NodeName=DEFAULT Sockets=1 CoresPerSocket=2 ThreadsPerCore=2 RealMemory=3000 Features=cpu,ib Weight=5",
        f"NodeName=c[1-3] NodeHostname=localhost Port=[{first}-{first + 2}]",
        f"NodeName=g1 NodeHostname=localhost Port={first + 3} CPUs=8 Sockets=2 CoresPerSocket=4 ThreadsPerCore=1 RealMemory=8000 "
        "Gres=gpu:2 Features=gpu Weight=10",
    ]
    cluster = SlurmCluster(
        root, (NodeDef("c1"), NodeDef("c2"), NodeDef("c3"), NodeDef("g1", gpus=2)), node_lines=node_lines,
        partitions=["Include parts.conf"],
        extra_conf=["SchedulerParameters=bf_window=120,bf_resolution=30,bf_max_job_test=50,bf_continue,"
                    "bf_max_job_user=7,sched_interval=1,bf_interval=1,default_queue_depth=40",
                    "SelectTypeParameters=CR_Core_Memory", "PriorityType=priority/multifactor",
                    "PriorityWeightAge=1000", "PriorityWeightPartition=500", "PriorityWeightJobSize=7",
                    "PriorityMaxAge=1-0", "PriorityFavorSmall=YES", "PriorityCalcPeriod=2"])
    cluster.start()
    try:
        yield cluster, parse_slurm_conf(cluster.conf)
    finally:
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def scontrol_records(cluster, *what) -> dict[str, dict[str, str]]:
    """``scontrol -o show ...``: one record per line, by its first value."""
    out = {}
    for line in cluster.run("scontrol", "-o", "show", *what).stdout.splitlines():
        fields = scontrol_fields(line)
        if fields:
            out[next(iter(fields.values()))] = {key: value.strip() for key, value in fields.items()}
    return out


def slurm_time(text: str) -> float | None:
    return None if text == "NONE" else parse_time_limit_s(text)


@pytest.mark.slurm
@pytest.mark.skipif(REASON is not None, reason=REASON or "")
def test_nodes_match_scontrol(live):
    cluster, conf = live
    shown = scontrol_records(cluster, "node")
    assert sorted(shown) == sorted(n.name for n in conf.nodes) == ["c1", "c2", "c3", "g1"]
    for node in conf.nodes:
        s = shown[node.name]
        assert (int(s["CPUTot"]), int(s["Sockets"]), int(s["CoresPerSocket"]), int(s["ThreadsPerCore"]),
                int(s["Boards"]), int(s["RealMemory"]), int(s["Weight"])) == (
            node.cpus, node.sockets, node.cores_per_socket, node.threads_per_core, node.boards,
            node.real_memory_mb, node.weight), node.name
        assert tuple(s["AvailableFeatures"].split(",")) == node.features
        assert tuple(s["Partitions"].split(",")) == node.partitions
        assert (s["Gres"] if s["Gres"] != "(null)" else "") == node.gres
    assert conf.node("c1").cpus == 4          # 1 socket x 2 cores x 2 threads, no CPUs= written


@pytest.mark.slurm
@pytest.mark.skipif(REASON is not None, reason=REASON or "")
def test_partitions_match_scontrol(live):
    cluster, conf = live
    shown = scontrol_records(cluster, "partition")
    assert sorted(shown) == sorted(p.name for p in conf.partitions) == ["gpu", "long", "short"]
    for part in conf.partitions:
        s = shown[part.name]
        assert tuple(expand_hostlist(s["Nodes"])) == part.nodes
        assert (s["Default"] == "YES", slurm_time(s["MaxTime"]), slurm_time(s["DefaultTime"])) == (
            part.default, part.max_time_s, part.default_time_s), part.name
        assert (None if s["MaxNodes"] == "UNLIMITED" else int(s["MaxNodes"]), int(s["MinNodes"])) == (
            part.max_nodes, part.min_nodes)
        assert (int(s["PriorityTier"]), int(s["PriorityJobFactor"]), s["OverSubscribe"], s["State"]) == (
            part.priority_tier, part.priority_job_factor, str(part.oversubscribe), part.state)
        assert (s["ExclusiveUser"] == "YES") == part.exclusive_user


@pytest.mark.slurm
@pytest.mark.skipif(REASON is not None, reason=REASON or "")
def test_config_matches_scontrol(live):
    cluster, conf = live
    shown = {}
    for line in cluster.run("scontrol", "show", "config").stdout.splitlines():
        key, sep, value = line.partition(" = ")
        if sep:
            shown[key.strip()] = value.strip()
    p, s = conf.priority, conf.scheduler
    assert (shown["PriorityType"], int(shown["PriorityWeightAge"]), int(shown["PriorityWeightPartition"]),
            int(shown["PriorityWeightJobSize"]), int(shown["PriorityWeightFairShare"])) == (
        p.type, p.weight_age, p.weight_partition, p.weight_job_size, p.weight_fairshare)
    assert (parse_time_limit_s(shown["PriorityMaxAge"]), parse_time_limit_s(shown["PriorityDecayHalfLife"]),
            parse_time_limit_s(shown["PriorityCalcPeriod"])) == (p.max_age_s, p.decay_half_life_s, p.calc_period_s)
    assert (shown["PriorityFavorSmall"].upper() == "YES") == p.favor_small
    assert (shown["SchedulerType"], shown["SelectType"]) == (s.type, conf.select.type)
    assert tuple(shown["SelectTypeParameters"].split(",")) == conf.select.parameters
    written = dict(item.partition("=")[::2] for item in shown["SchedulerParameters"].split(","))
    assert (int(written["bf_window"]), int(written["bf_resolution"]), int(written["bf_max_job_test"]),
            int(written["bf_max_job_user"]), "bf_continue" in written, int(written["default_queue_depth"])) == (
        s.bf_window_min, s.bf_resolution_s, s.bf_max_job_test, s.bf_max_job_user, s.bf_continue,
        s.default_queue_depth) == (120, 30, 50, 7, True, 40)

"""The real-Slurm harness (``tests/slurm_cluster.py``) on real daemons: what it promises of itself.

A MariaDB server deletes every ``#sql*`` file in its temporary folder when it starts (it takes them
for temporary tables a crash left).  Clusters with accounting that shared /tmp therefore deleted
each other's live temporary tables when two started close together (a recording of
``bench/slurm_workloads.py`` failed with "sacctmgr add cluster ... Unspecified error"), so each
cluster's server keeps its temporary tables in a folder of its own.
"""

from __future__ import annotations

import pytest

from slurm_cluster import Accounting, NodeDef, accounting_skip_reason, running_cluster

REASON = accounting_skip_reason()
pytestmark = [pytest.mark.slurm, pytest.mark.skipif(REASON is not None, reason=REASON or "")]


def test_a_clusters_database_leaves_other_servers_temporary_tables_alone(tmp_path, monkeypatch):
    # without --tmpdir, mariadbd (and mariadb-install-db's bootstrap server) would use $TMPDIR: point it
    # at a folder holding another server's live temporary table, as /tmp does when work runs side by side
    shared_tmp = tmp_path / "shared-tmp"
    shared_tmp.mkdir()
    others = [shared_tmp / "#sql-temptable-1f2e-3-0.MAI", shared_tmp / "#sql-temptable-1f2e-3-0.MAD"]
    for table_file in others:
        table_file.write_bytes(b"")
    monkeypatch.setenv("TMPDIR", str(shared_tmp))
    with running_cluster("greenslurm-harness-", nodes=(NodeDef("n1", 1, 1000),),
                         accounting=Accounting(enforce="associations")) as cluster:
        assert [table_file.exists() for table_file in others] == [True, True]
        answer = cluster.run("mariadb", "--no-defaults", "-h127.0.0.1", f"-P{cluster.db_port}", "-uroot", "-N",
                             "-e", "select @@tmpdir").stdout.strip()
        assert answer == str(cluster.root / "db" / "tmp")
        # slurmdbd's own queries that need temporary tables (SHOW COLUMNS) worked: the cluster is registered
        assert cluster.run("sacctmgr", "-n", "-P", "show", "cluster", "format=cluster").stdout.split() == \
            [cluster.cluster_name]

"""Replays of sacct exports against what real Slurm did: the recordings of ``bench/slurm_workloads.py``.

Each recording folder holds ``trace.txt`` (sacct --parsable2 with the fields a site exports) and
``slurm.conf``.  The trace is replayed as a site would replay its own export::

    greenslurm replay trace.txt --format sacct --slurm-conf slurm.conf --queue slurm

(nothing fitted to the recording: no latency, Slurm's defaults where slurm.conf says nothing), and
the replayed schedule is compared with the recorded one per job: mean wait, the share of jobs
started within 5 s of Slurm's start, pair order (the share of job pairs started in the same order,
pairs within 5 s counting as either), the share on the same nodes, and the first divergence (the
earliest recorded start the replay misses by more than 5 s or puts on other nodes).  Two recordings
of the same workload (``--again``) give real Slurm's own spread on the same measures.

    python bench/bench_slurm_workloads.py /tmp/w7/run1 /tmp/w8/run1 --again /tmp/w7/run1=/tmp/w7/run2
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from greenslurm.sim.studies.slurm_fidelity import as_slurm_stamps, compare_schedules
from greenslurm.traces.sacct import read_sacct
from greenslurm.traces.slurm_conf import cluster_from_slurm_conf, expand_hostlist, parse_slurm_conf

TOLERANCE_S = 5.0


def recorded_schedule(trace: Path) -> dict[str, tuple[float, float, tuple[str, ...]]]:
    """Job name -> (submit, start, nodes) as Slurm recorded them (epoch seconds)."""
    jobs = read_sacct(str(trace)).jobs
    return {j.extra.get("job_name", j.job_id): (j.submit_s, j.extra["start_s"],
                                                 tuple(sorted(expand_hostlist(j.extra.get("node_list", "")))))
            for j in jobs}


def replayed_schedule(trace: Path, conf: Path, queue: str = "slurm",
                      **settings) -> dict[str, tuple[float, float, tuple[str, ...]]]:
    """Job name -> (submit, start, nodes) of the replay of ``trace`` on ``conf`` under ``queue``."""
    import greenslurm

    result = greenslurm.replay(str(trace), format="sacct", slurm_conf=str(conf), queue=queue, **settings)
    names = [node.name for node in cluster_from_slurm_conf(parse_slurm_conf(str(conf))).nodes]
    by_id = {j.job_id: j.extra.get("job_name", j.job_id) for j in read_sacct(str(trace)).jobs}
    out = {}
    for row in result.jobs.itertuples():
        indices = row.node_indices if not isinstance(row.node_indices, str) else \
            [int(i) for i in row.node_indices.split()]
        out[by_id[str(row.job_id)]] = (float(row.submit_s), float(row.start_s),
                                       tuple(sorted(names[int(i)] for i in indices)))
    return out


def compare(recorded: dict, other: dict, label: str) -> dict:
    """Mean wait, starts within 5 s, pair order, same nodes and the first divergence of ``other``
    against ``recorded`` (both job -> (submit, start, nodes)), ``other``'s times in whole seconds as
    Slurm stamps them (a replay's are fractional; sacct's truncated)."""
    other = as_slurm_stamps(other)
    f = compare_schedules({k: v[:2] for k, v in recorded.items()}, {k: v[:2] for k, v in other.items()},
                          tolerance_s=TOLERANCE_S)
    common = sorted(set(recorded) & set(other), key=lambda k: (recorded[k][1], k))
    same_nodes = sum(recorded[k][2] == other[k][2] for k in common) / len(common)
    first = next((k for k in common if abs(other[k][1] - recorded[k][1]) > TOLERANCE_S
                  or recorded[k][2] != other[k][2]), None)
    divergence = "-"
    if first is not None:
        submit, start, nodes = recorded[first]
        _, o_start, o_nodes = other[first]
        origin = min(v[0] for v in recorded.values())
        where = "later" if o_start > start + TOLERANCE_S else "earlier" if o_start < start - TOLERANCE_S else "same time"
        divergence = (f"{first}: Slurm +{start - origin:.0f} s on {','.join(nodes)}, {label} +{o_start - origin:.0f} s "
                      f"on {','.join(o_nodes)} ({where}{', other nodes' if nodes != o_nodes else ''})")
    return {"label": label, "jobs": f.jobs, "mean_wait_slurm_s": f.mean_wait_recorded_s,
            "mean_wait_other_s": f.mean_wait_replayed_s, "mean_wait_difference": f.mean_wait_difference,
            "within_5s": f.within_tolerance, "pair_order": f.pair_concordance, "same_nodes": same_nodes,
            "first_divergence": divergence}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("recordings", nargs="*", type=Path, help="folders with trace.txt and slurm.conf")
    parser.add_argument("--again", action="append", default=[], metavar="FIRST=SECOND",
                        help="two recordings of one workload: Slurm against itself (the first is also replayed)")
    parser.add_argument("--queue", default="slurm")
    parser.add_argument("--contrast", default="", help="other queues replayed beside (comma list, e.g. easy)")
    parser.add_argument("--with-log", action="store_true",
                        help="also replay each recording with its slurmctld log (--slurmctld-log: slurmctld's "
                             "threads timed as the log shows them), labelled 'replay+log'")
    parser.add_argument("--json", type=Path, help="write the rows here")
    parser.add_argument("--markdown", action="store_true", help="print the rows as a Markdown table")
    args = parser.parse_args(argv)
    rows = []
    pairs = [tuple(Path(p) for p in item.split("=", 1)) for item in args.again]
    for folder in [*args.recordings, *(first for first, _ in pairs)]:
        recorded = recorded_schedule(folder / "trace.txt")
        row = compare(recorded, replayed_schedule(folder / "trace.txt", folder / "slurm.conf", args.queue), "replay")
        rows.append({"recording": str(folder), **row})
        log = next((p for p in (folder / "slurmctld.log", folder / "slurmctld.log.gz") if p.is_file()), None)
        if args.with_log and log is not None:
            row = compare(recorded, replayed_schedule(folder / "trace.txt", folder / "slurm.conf", args.queue,
                                                      slurmctld_log=str(log)), "replay+log")
            rows.append({"recording": str(folder), **row})
        for other in filter(None, args.contrast.split(",")):
            row = compare(recorded, replayed_schedule(folder / "trace.txt", folder / "slurm.conf", other), other)
            rows.append({"recording": str(folder), **row})
    for first, second in pairs:
        row = compare(recorded_schedule(first / "trace.txt"), _shifted(first, second), "Slurm again")
        rows.append({"recording": f"{first} vs {second}", **row})
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    if args.markdown:
        print(markdown(rows))
        return 0
    for row in rows:
        print(f"{row['recording']}  {row['label']:<11} jobs={row['jobs']} wait {row['mean_wait_slurm_s']:.1f} -> "
              f"{row['mean_wait_other_s']:.1f} s ({row['mean_wait_difference']:+.1%})  within 5 s "
              f"{row['within_5s']:.0%}  pairs {row['pair_order']:.1%}  nodes {row['same_nodes']:.0%}  "
              f"first: {row['first_divergence']}")
    for label in ("replay", "replay+log"):
        replays = [r for r in rows if r["label"] == label]
        if replays:
            print(f"{label}: median |mean wait difference| "
                  f"{statistics.median(abs(r['mean_wait_difference']) for r in replays):.1%}, jobs within 5 s "
                  f"{sum(r['within_5s'] * r['jobs'] for r in replays) / sum(r['jobs'] for r in replays):.1%}, "
                  f"same nodes {sum(r['same_nodes'] * r['jobs'] for r in replays) / sum(r['jobs'] for r in replays):.1%}")
    return 0


def site_summary(folder: Path) -> str:
    """A recording's site in a few words, from the ``site.json`` beside or above it."""
    for candidate in (folder / "site.json", folder.parent / "site.json"):
        if candidate.exists():
            site = json.loads(candidate.read_text())
            sizes = sorted({cpus for _, cpus, _ in site["nodes"]})
            priority = site["priority"][0].split("/")[-1]
            return (f"{len(site['nodes'])} nodes of {'/'.join(map(str, sizes))} CPUs, {len(site['partitions'])} "
                    f"partitions, {site['scheduler']}, {priority}, {site['select_parameters']}")
    return "-"


def markdown(rows: list[dict]) -> str:
    """The rows as a Markdown table."""
    lines = ["| recording | site | compared | jobs | mean wait, Slurm (s) | mean wait, other (s) | difference | "
             "within 5 s | pair order | same nodes | first divergence |", "|" + "---|" * 11]
    for row in rows:
        first = row["recording"].split(" vs ")[0]
        lines.append(f"| {row['recording']} | {site_summary(Path(first))} | {row['label']} | {row['jobs']} | "
                     f"{row['mean_wait_slurm_s']:.1f} | {row['mean_wait_other_s']:.1f} | "
                     f"{row['mean_wait_difference']:+.1%} | {row['within_5s']:.0%} | {row['pair_order']:.1%} | "
                     f"{row['same_nodes']:.0%} | {row['first_divergence']} |")
    return "\n".join(lines)


def _shifted(first: Path, second: Path) -> dict:
    """The second recording's schedule with its times moved onto the first's clock (the same
    workload submitted later): each job's submit and start shifted by the difference of the first
    submissions."""
    one, two = recorded_schedule(first / "trace.txt"), recorded_schedule(second / "trace.txt")
    shift = min(v[0] for v in one.values()) - min(v[0] for v in two.values())
    return {k: (s + shift, t + shift, n) for k, (s, t, n) in two.items()}


if __name__ == "__main__":
    sys.exit(main())

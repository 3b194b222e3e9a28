"""The instructions of writing KTH-SP2's jobs.csv and jobs.parquet in a warm process (see
docs/replay-engine.md, "Fewer instructions after the hand-over"): a load-proof count of the child's
one pass, without the replay around it.

    python bench/out_jobs_files.py --save JOBS     # replay KTH-SP2 with EASY once, keep its jobs table
    python bench/out_jobs_files.py JOBS N          # load it, ready pyarrow's writer, write both files N times

Counted as a run writing twice against one writing never, halved (from ``/tmp``):

    export OPENBLAS_NUM_THREADS=1 PYTHONHASHSEED=0
    valgrind --tool=callgrind python bench/out_jobs_files.py JOBS 0
    valgrind --tool=callgrind python bench/out_jobs_files.py JOBS 2

(``OPENBLAS_NUM_THREADS=1``: numpy's BLAS threads otherwise spin for a few million instructions that
differ from run to run.)
"""

from __future__ import annotations

import argparse
import pickle
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--save", action="store_true", help="replay KTH-SP2 and write its jobs table to JOBS")
    parser.add_argument("jobs", help="the jobs table's file (pickled JobColumns)")
    parser.add_argument("times", nargs="?", type=int, default=1, help="how many times to write the files")
    parser.add_argument("--trace", default=None, help="the SWF log (default: KTH-SP2 in /work/shared/data)")
    args = parser.parse_args()
    if args.save:
        from out_handover import TRACE, replayed_jobs
        with open(args.jobs, "wb") as handle:
            pickle.dump(replayed_jobs(args.trace or TRACE, tempfile.mkdtemp()), handle, protocol=pickle.HIGHEST_PROTOCOL)
        return
    from greenslurm.sim.reporting import outputs
    with open(args.jobs, "rb") as handle:
        jobs = pickle.load(handle)
    outputs.ready_parquet_writer()
    folder = Path(tempfile.mkdtemp())
    for _ in range(args.times):
        outputs.write_jobs_files(jobs, folder / "jobs.csv", folder / "jobs.parquet")


if __name__ == "__main__":
    main()

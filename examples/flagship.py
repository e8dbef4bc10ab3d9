"""The flagship example: `barrierflow chaos` proves a running word count exactly once.

The job is the job file `word_count_job.py` next to this one (a keyed running count at
parallelism 2 with 1 s checkpoints, into a two-phase-commit FileSink), exactly as
`barrierflow run` and `barrierflow chaos` take it. This example runs the chaos self-check on
it through the library (`barrierflow.chaos.ChaosCheck`), on Spark's embedded `local[*]`:
once without failures, then once with a few failures of mixed kinds at seeded random
moments (a user function raising, a stream task's process killed, a Spark task's Python
worker killed). Each failure prints one line with its kind and recovery time; at the end the
two committed outputs are compared as multisets: `exactly-once: OK`, or the records lost
and duplicated (exit status 1).

    python examples/flagship.py [--records N] [--rate R] [--failures K] [--seed S]
                                [--workdir DIR]

It prints the `barrierflow chaos` command that makes the same check, to run on a job file of
your own the same way.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from barrierflow.api.environment import DEFAULT_FAILURE_KINDS
from barrierflow.chaos import ChaosCheck, ChaosError

JOB_FILE = Path(__file__).resolve().parent / "word_count_job.py"


def shown(path: Path) -> str:
    """`path` relative to the current folder when it is inside it (shorter to copy)."""
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=30_000, help="input words")
    parser.add_argument("--rate", type=float, default=2_000.0, help="words per second")
    parser.add_argument("--failures", type=int, default=len(DEFAULT_FAILURE_KINDS))
    parser.add_argument("--seed", type=int, default=1, help="of the failure plan")
    parser.add_argument("--workdir", type=Path, default=Path("work-data/flagship"))
    args = parser.parse_args()

    check = ChaosCheck(
        job_file=JOB_FILE,
        job_args=("--records", str(args.records), "--rate", str(args.rate)),
        failures=args.failures,
        kinds=DEFAULT_FAILURE_KINDS,
        seed=args.seed,
        workdir=args.workdir,
        max_gap_s=0.5,
    )
    print(
        f"the same check as: barrierflow chaos {shown(JOB_FILE)} --failures {args.failures} "
        f"--seed {args.seed} --max-gap {check.max_gap_s} --workdir {args.workdir} "
        f"-- {' '.join(check.job_args)}"
    )
    try:
        result = check.run(lambda line: print(line, flush=True))
    except ChaosError as error:
        print(f"error: {error}")
        sys.exit(2)
    for line in result.lines:
        print(line)
    if not result.exactly_once or len(result.failures) < args.failures:
        sys.exit(1)


if __name__ == "__main__":
    main()

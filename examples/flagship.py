"""The flagship example: a keyed running count, a task killed mid-run, exactly-once output.

It runs on Spark's embedded `local[*]` with parallelism 2 and 1 s checkpoints.
A deterministic generator produces words at a fixed rate; after two completed
checkpoints the example kills the Python process of one counting task with
SIGKILL. The JobMaster restarts the job from the latest completed checkpoint,
the source rewinds, and the two-phase-commit file sink commits only what
completed checkpoints cover. At the end the committed output is compared with
what a failure-free run must produce.

    python examples/flagship.py [--records N] [--rate R] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from collections import Counter
from pathlib import Path

from barrierflow import RestartStrategies, StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink

WORDS = ["apple", "banana", "cherry", "date", "elder", "fig", "grape", "honeydew", "kiwi", "lime"]


def word_of(index: int) -> str:
    """Record i of the input: deterministic, so the expected output can be computed apart."""
    return WORDS[(index * 7919 + index // 3) % len(WORDS)]


def expected_rows(records: int) -> Counter:
    """What a failure-free run commits: for each word, one row per count 1..n."""
    totals = Counter(word_of(i) for i in range(records))
    return Counter((word, n) for word, total in totals.items() for n in range(1, total + 1))


def committed_rows(folder: Path) -> Counter:
    rows: Counter = Counter()
    for part in sorted(folder.glob("part-*")):
        for line in part.read_text().splitlines():
            word, count = json.loads(line)
            rows[(word, count)] += 1
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=60_000)
    parser.add_argument("--rate", type=float, default=6_000.0, help="records per second")
    parser.add_argument("--workdir", type=Path, default=Path("work-data/flagship"))
    args = parser.parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)
    output = args.workdir / "out"

    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(1000)
    env.get_checkpoint_config().set_checkpoint_storage(str(args.workdir / "checkpoints"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(3, 500))

    source = DataGeneratorSource(word_of, args.records, records_per_second=args.rate)
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "words")
        .map(lambda word: (word, 1))
        .uid("pair")
        .key_by(lambda pair: pair[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .uid("count")
        .sink_to(FileSink.for_rows(str(output)))
        .uid("sink")
    )

    started = time.monotonic()
    job = env.execute_async("flagship-word-count")
    print(f"job graph:\n{job.job_graph.describe()}")
    counting = next(v for v in job.job_graph.vertices if "Reduce" in v.name).vertex_id
    if not job.wait_for_completed_checkpoints(2, timeout=120):
        raise SystemExit(f"the job did not complete 2 checkpoints (state {job.get_job_status()})")
    print(f"checkpoints completed so far: {list(job.completed_checkpoints)}")
    pid = job.kill_task_process(counting, subtask_index=0)
    print(f"killed the process of counting task 1/2 (pid {pid}) with SIGKILL")
    result = job.wait()
    elapsed = time.monotonic() - started
    print(
        f"job finished in {elapsed:.1f} s after {result.restarts} restart(s); "
        f"{len(result.checkpoints)} checkpoints completed"
    )

    expected, actual = expected_rows(args.records), committed_rows(output)
    if actual == expected:
        print(f"committed {sum(actual.values())} rows, as a failure-free run does")
        print("exactly-once: OK")
        return
    missing, extra = expected - actual, actual - expected
    print(
        f"exactly-once: FAILED - {sum(missing.values())} rows missing, "
        f"{sum(extra.values())} rows duplicated or unexpected; "
        f"e.g. missing {list(missing.items())[:3]}, extra {list(extra.items())[:3]}"
    )
    raise SystemExit(1)


if __name__ == "__main__":
    main()

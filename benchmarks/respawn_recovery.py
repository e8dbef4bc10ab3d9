"""Time from a killed stream-task process to records flowing again, respawned in place.

    python benchmarks/respawn_recovery.py [--kills N] [--delay-ms D]

Runs a keyed running count at parallelism 2 (1 s checkpoints, restart delay D, 0 by
default) and SIGKILLs the stream-task process of counting subtask 1/2 N times (after a
checkpoint each time). Its Spark task lives, reports the death and starts a new process;
the job rolls back in place. For each kill it prints the time from the kill to the
first record the counting subtask processes in the next attempt, then the median and
the worst, and the number of Spark jobs the job used (1: every recovery kept the slots).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from barrierflow import RestartStrategies, StreamExecutionEnvironment, WatermarkStrategy
from barrierflow.cluster.spark_runner import obtain_spark
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSink
from barrierflow.core.functions import MapFunction, RuntimeContext

WORDS = ["ant", "bee", "cat", "dog", "eel", "fox", "gnu"]


def word_of(index: int) -> str:
    return WORDS[(index * 31 + index // 5) % len(WORDS)]


class MarkResumed(MapFunction):
    """Chained after the count: notes the time of each attempt's first record (subtask 0)."""

    def __init__(self, marks: str) -> None:
        self.marks = marks

    def open(self, runtime_context: RuntimeContext) -> None:
        self.mark: Path | None = None
        if runtime_context.get_index_of_this_subtask() == 0:
            self.mark = Path(self.marks, f"attempt-{runtime_context.get_attempt_number()}")

    def map(self, value):
        if self.mark is not None and not self.mark.exists():
            self.mark.write_text(repr(time.time()))
        return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--delay-ms", type=int, default=0)
    args = parser.parse_args()
    spark = obtain_spark("local[4]", 4)
    workdir = Path(tempfile.mkdtemp(prefix="respawn-"))
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.enable_checkpointing(1000)
    env.get_checkpoint_config().set_checkpoint_storage(str(workdir / "checkpoints"))
    env.set_restart_strategy(RestartStrategies.fixed_delay_restart(args.kills, args.delay_ms))
    records = 8000 * (4 + 3 * args.kills)
    (
        env.from_source(
            DataGeneratorSource(word_of, records, records_per_second=8000),
            WatermarkStrategy.no_watermarks(),
            "words",
        )
        .map(lambda word: (word, 1))
        .key_by(lambda pair: pair[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .map(MarkResumed(str(workdir)))
        .sink_to(FileSink.for_rows(str(workdir / "out")))
    )
    job = env.execute_async("respawn-recovery")
    counting = next(v.vertex_id for v in job.job_graph.vertices if "Reduce" in v.name)
    times = []
    for attempt in range(args.kills):
        if not job.wait_until_running(attempt, timeout=120):
            raise SystemExit(f"attempt {attempt} did not run: {job.get_job_status()}")
        done = len(job.completed_checkpoints)
        if not job.wait_for_completed_checkpoints(done + 1, timeout=60):
            raise SystemExit("no checkpoint completed")
        mark = workdir / f"attempt-{attempt + 1}"
        killed_at = time.time()
        job.kill_task_process(counting, 0)
        deadline = time.monotonic() + 60
        while not mark.exists() and time.monotonic() < deadline:
            time.sleep(0.005)
        if not mark.exists():
            raise SystemExit(f"no record reached the counter in attempt {attempt + 1}")
        times.append(float(mark.read_text()) - killed_at)
        print(f"kill {attempt + 1}: records flow again {times[-1]:.3f} s after the kill")
    result = job.wait(timeout=600)
    tracker = spark.sparkContext.statusTracker()
    spark_jobs = sum(
        len(tracker.getJobIdsForGroup(f"barrierflow-{job.get_job_id()}-{n}"))
        for n in range(result.restarts + 1)
    )
    print(
        f"respawned in place {len(times)} times: median {statistics.median(times):.3f} s, "
        f"worst {max(times):.3f} s; {result.restarts} restarts in {spark_jobs} Spark job(s)"
    )


if __name__ == "__main__":
    main()

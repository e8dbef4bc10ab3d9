"""A keyed running count in PyFlink's Python DataStream API on either state backend (PyFlink 2.3.0).

    $PEERS_ROOT/flink/venv/bin/python benchmarks/peers/flink_keyed_state.py \\
        --records N --keys K [--par 2] [--ckpt 1000] [--backend hashmap|rocksdb] \\
        [--mode thread]

The job of barrierflow's `benchmarks/state.py --job` (and `keyed_count.py`), as a PyFlink
user writes it: record `i` of a `NumberSequenceSource` (Java, 0..N-1) is mapped in Python to
`("key-<(i * 2654435761) % K>", 1)`, keyed by the string key, summed with a Python
`reduce` (a running count: one Python keyed-state read and write per record, one output
per record), and a Python filter keeps the counts that are multiples of 1000 in front of a
DiscardingSink. Output types are declared, so no pickling between operators.

`--backend`: Flink's `HashMapStateBackend` (objects on the JVM heap) or
`EmbeddedRocksDBStateBackend` (non-incremental checkpoints, as barrierflow's default;
Flink's default RocksDB options), set through `state.backend.type`. With `--ckpt MS`,
exactly-once checkpoints every MS ms into a local folder. The Python functions run in
`--mode thread` (default: inside the JVM through pemja, the fastest PyFlink mode on this
machine) or `process` (separate Python workers, as on a cluster).

Prints one `RESULT {json}` line (see `_flink_common`): `events_per_second` is N over
`seconds`, from all subtasks running to the job's end (as barrierflow's figure).
"""

from __future__ import annotations

import argparse
import os

import _flink_common as common  # notes when the process started; PyFlink comes later

EVERY = 1000
"""The sink gets the (key, count) pairs whose count is a multiple of this."""


class KeyOf:
    """Record `i` as `(key, 1)`: the keys of barrierflow's benchmark, in the same order."""

    def __init__(self, keys: int) -> None:
        self.keys = keys

    def __call__(self, index: int) -> tuple[str, int]:
        return (f"key-{(index * 2654435761) % self.keys}", 1)


def add_counts(left: tuple, right: tuple) -> tuple:
    return left[0], left[1] + right[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, required=True)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--par", type=int, default=2, help="parallelism")
    parser.add_argument("--ckpt", type=int, default=0, help="checkpoint interval ms (0: none)")
    parser.add_argument("--backend", default="hashmap", choices=["hashmap", "rocksdb"])
    parser.add_argument("--mode", default="thread", choices=["thread", "process"])
    args = parser.parse_args()
    if args.mode == "thread":
        common.thread_mode_pythonpath()
    else:
        os.environ["_python_worker_execution_mode"] = "process"  # noqa: SIM112 (PyFlink reads it)

    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream import StreamExecutionEnvironment
    from pyflink.datastream.connectors.base import Sink
    from pyflink.datastream.connectors.number_seq import NumberSequenceSource

    port = common.free_port()
    folder = common.checkpoint_dir(bool(args.ckpt))
    extra = {"state.backend.type": args.backend}
    if args.backend == "rocksdb":
        extra["execution.checkpointing.incremental"] = "false"
        extra["state.backend.rocksdb.localdir"] = common.checkpoint_dir(True) or ""
    conf = common.flink_configuration(
        args.par, port, args.ckpt, folder, thread_mode=args.mode == "thread", extra=extra
    )
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    pair = Types.TUPLE([Types.STRING(), Types.LONG()])
    (
        env.from_source(
            NumberSequenceSource(0, args.records - 1), WatermarkStrategy.no_watermarks(), "gen"
        )
        .map(KeyOf(args.keys), pair)
        .key_by(lambda p: p[0], key_type=Types.STRING())
        .reduce(add_counts)
        .filter(lambda p: p[1] % EVERY == 0)
        .sink_to(Sink("org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink"))
    )
    client = env.execute_async(f"keyed-state-{args.backend}-{args.ckpt}")
    poller = common.JobPoller(port)
    poller.start()
    result = client.get_job_execution_result().result()
    poller.stop()
    common.cleanup(folder)
    if args.backend == "rocksdb":
        common.cleanup(extra["state.backend.rocksdb.localdir"])
    print(
        common.result_line(
            "flink-ds",
            "keyed-count",
            args.records,
            args.par,
            args.ckpt,
            result.get_net_runtime(),
            poller,
            mode=args.mode,
            backend=args.backend,
            keys=args.keys,
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()

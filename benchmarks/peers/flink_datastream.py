"""Nexmark q0, q1, q2 and a keyed count in PyFlink's Python DataStream API (PyFlink 2.3.0).

    $PEERS_ROOT/flink/venv/bin/python benchmarks/peers/flink_datastream.py \\
        --query q1 --input events.json --par 2 [--ckpt 1000] [--events N] [--mode thread]

The events file is read as text lines by Flink's FileSource (Java); each line is parsed
in Python (`json.loads`) by one `flat_map` that keeps bids and projects them, the way a
Python user writes it:

- q0: `(auction, bidder, price, dateTime, extra)` of every bid (pass-through);
- q1: the same with `price * 0.908` (dollars to euros);
- q2: `(auction, price)` of the bids with `auction % 123 == 0`;
- count: bids per auction, a running count (`key_by(auction).reduce`), one output per bid:
  Python keyed state, as barrierflow's `benchmarks/keyed_count.py`.

Output types are declared (no pickling between operators); the results go to a
DiscardingSink. These stateless queries assign no event time and no watermarks. The Python
functions run in `--mode thread` (default: inside the JVM through pemja, the fastest mode
measured on this machine, ../shared/peers), `process` (separate Python workers, as on a
cluster) or `loopback` (PyFlink's local default: in this client process).

One bounded run, one query; it prints one `RESULT {json}` line (see `_flink_common`):
`events_per_second` is the file's events (all three kinds) over `seconds`, from all subtasks
running to the job's end; `events_per_second_net` counts from the job's initialisation
(task deployment, the Python workers' start), `events_per_second_wall` the whole process.
A single file is one split, read by one source subtask whatever the parallelism.
"""

from __future__ import annotations

import argparse
import json
import os

import _flink_common as common  # notes when the process started; PyFlink comes later

QUERIES = ("q0", "q1", "q2", "count")


def bid_fields(line: str) -> tuple | None:
    """The bid on a JSON Lines events line as `(auction, bidder, price, dateTime, extra)`,
    None for a person or an auction."""
    event = json.loads(line)
    bid = event["bid"]
    if event["event_type"] != 2 or bid is None:
        return None
    return (bid["auction"], bid["bidder"], bid["price"], bid["dateTime"], bid["extra"])


def q0(line: str):
    bid = bid_fields(line)
    if bid is not None:
        yield bid


def q1(line: str):
    bid = bid_fields(line)
    if bid is not None:
        auction, bidder, price, date_time, extra = bid
        yield auction, bidder, 0.908 * price, date_time, extra


def q2(line: str):
    bid = bid_fields(line)
    if bid is not None and bid[0] % 123 == 0:
        yield bid[0], bid[2]


def auction_one(line: str):
    bid = bid_fields(line)
    if bid is not None:
        yield bid[0], 1


def add_counts(left: tuple, right: tuple) -> tuple:
    return left[0], left[1] + right[1]


def build(env, query: str, path: str):
    """The query's output stream, from the file."""
    from pyflink.common import Types, WatermarkStrategy
    from pyflink.datastream.connectors.file_system import FileSource, StreamFormat

    source = FileSource.for_record_stream_format(
        StreamFormat.text_line_format(), "file://" + os.path.abspath(path)
    ).build()
    lines = env.from_source(source, WatermarkStrategy.no_watermarks(), "events")
    long, string = Types.LONG(), Types.STRING()
    if query == "q0":
        out = lines.flat_map(q0, Types.TUPLE([long, long, long, long, string]))
    elif query == "q1":
        out = lines.flat_map(q1, Types.TUPLE([long, long, Types.DOUBLE(), long, string]))
    elif query == "q2":
        out = lines.flat_map(q2, Types.TUPLE([long, long]))
    else:
        pairs = Types.TUPLE([long, long])
        out = (
            lines.flat_map(auction_one, pairs)
            .key_by(lambda pair: pair[0], key_type=long)
            .reduce(add_counts)  # typed as its input
        )
    return out


def discard(out) -> None:
    from pyflink.datastream.connectors.base import Sink

    out.sink_to(Sink("org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--query", required=True, choices=QUERIES)
    parser.add_argument("--input", required=True, help="JSON Lines events file or folder")
    parser.add_argument("--par", type=int, default=1, help="parallelism")
    parser.add_argument("--ckpt", type=int, default=0, help="checkpoint interval ms (0: none)")
    parser.add_argument("--events", type=int, default=0, help="events in the file (0: count)")
    parser.add_argument("--mode", default="thread", choices=["thread", "process", "loopback"])
    parser.add_argument(
        "--check", action="store_true", help="small files: collect and count the output rows"
    )
    args = parser.parse_args()
    if not os.path.exists(args.input):
        parser.error(f"no events file or folder at {args.input}")
    events = args.events or common.count_lines(args.input)
    if args.mode == "thread":
        common.thread_mode_pythonpath()
    elif args.mode == "process":
        os.environ["_python_worker_execution_mode"] = "process"  # noqa: SIM112 (PyFlink reads it)

    from pyflink.datastream import StreamExecutionEnvironment

    port = common.free_port()
    folder = common.checkpoint_dir(bool(args.ckpt))
    conf = common.flink_configuration(
        args.par, port, args.ckpt, folder, thread_mode=args.mode == "thread"
    )
    env = StreamExecutionEnvironment.get_execution_environment(conf)
    out = build(env, args.query, args.input)
    if args.check:
        with out.execute_and_collect() as rows:
            print("CHECK " + json.dumps({"rows": sum(1 for _ in rows)}), flush=True)
        return
    discard(out)
    client = env.execute_async(f"nexmark-{args.query}-datastream")
    poller = common.JobPoller(port)
    poller.start()
    result = client.get_job_execution_result().result()
    poller.stop()
    common.cleanup(folder)
    print(
        common.result_line(
            "flink-ds",
            args.query,
            events,
            args.par,
            args.ckpt,
            result.get_net_runtime(),
            poller,
            mode=args.mode,
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()

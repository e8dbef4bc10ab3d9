"""A keyed running count on both state backends, barrierflow next to PyFlink, in one run.

    python benchmarks/state_vs_flink.py [--records 300000] [--keys 10000] [--repeat 1]
        [--backends hashmap,rocksdb] [--intervals 0,1000] [--mode thread]

The same job on both systems at parallelism 2: N generated records over K keys
(`key-<(i * 2654435761) % K>`), keyed by the string key, a Python `reduce` summing
`(key, 1)` pairs (a running count: one keyed-state read and write per record, one output
per record), a filter keeping the counts that are multiples of 1000, then a sink.

- barrierflow: `benchmarks/state.py`'s job-level run (`job_run`, imported, unchanged):
  `DataGeneratorSource` → `key_by` → `reduce` → filter → exactly-once `FileSink`, with
  `HashMapStateBackend()` or `EmbeddedRocksDBStateBackend()` (non-incremental), on real
  Spark (`local[4]`, Python workers not reused).
- PyFlink 2.3.0: `benchmarks/peers/flink_keyed_state.py` in its own process under
  `$PEERS_ROOT/flink/venv` (`nexmark.py --install-peers` creates it):
  `NumberSequenceSource` → Python `map` to `(key, 1)` → `key_by` → Python `reduce` →
  Python filter → DiscardingSink, with Flink's `HashMapStateBackend` or
  `EmbeddedRocksDBStateBackend` (non-incremental), Python in thread mode (`--mode`).

Each is run without checkpoints and with exactly-once checkpoints every 1 s
(`--intervals`), one run at a time, barrierflow then PyFlink for each configuration, so
both see the same machine. events/s counts from all tasks running to the job's end on
both (start-up and deployment excluded; barrierflow's sink commits its files, Flink's
discards the rows). `--repeat R` rounds; the table shows medians, the ratio
barrierflow / PyFlink of each configuration, and each system's ratio with / without
checkpoints. One small warm-up run of each system is not counted. PyFlink's Python keyed
state is slow (thousands of records/s): pick N so a PyFlink run takes a minute or less.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import state as state_bench  # benchmarks/state.py: this script's folder is on sys.path
from nexmark import _clean_env, flink_python, peer_problems, peers_root

PEER_SCRIPT = Path(__file__).resolve().parent / "peers" / "flink_keyed_state.py"
SYSTEMS = ("barrierflow", "pyflink")


def barrierflow_run(backend: str, records: int, keys: int, interval: int) -> dict[str, Any]:
    """One barrierflow run (state.py's `job_run`), its figures or {"error": ...}."""
    workdir = tempfile.mkdtemp(prefix="barrierflow-state-vs-flink-")
    try:
        return state_bench.job_run(backend, records, keys, interval or None, workdir)
    except (Exception, SystemExit) as error:  # one line per failed run; the others still run
        return {"error": f"{type(error).__name__}: {error}"[:300]}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def pyflink_run(
    backend: str, records: int, keys: int, interval: int, mode: str, timeout: float
) -> dict[str, Any]:
    """One PyFlink run in its own process: the RESULT line's figures or {"error": ...}."""
    line = [str(flink_python(peers_root())), str(PEER_SCRIPT), "--records", str(records)]
    line += ["--keys", str(keys), "--par", "2", "--ckpt", str(interval)]
    line += ["--backend", backend, "--mode", mode]
    try:
        done = subprocess.run(
            line, capture_output=True, text=True, timeout=timeout, env=_clean_env()
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for output in done.stdout.splitlines():
        if output.startswith("RESULT "):
            return json.loads(output[len("RESULT ") :])
    reason = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
    return {"error": f"exit {done.returncode}: {reason[:300]}"}


def median_rate(runs: list[dict[str, Any]]) -> float | None:
    rates = [r["events_per_second"] for r in runs if r.get("events_per_second")]
    return statistics.median(rates) if rates else None


def _rate(runs: list[dict[str, Any]]) -> str:
    rate = median_rate(runs)
    if rate is None:
        errors = [r["error"] for r in runs if "error" in r]
        return f"failed: {errors[0][:80]}" if errors else "-"
    each = ", ".join(f"{r['events_per_second']:,.0f}" for r in runs if r.get("events_per_second"))
    return f"{rate:,.0f} ({each})"


def _ratio(top: float | None, bottom: float | None) -> str:
    return f"{top / bottom:.2f}" if top and bottom else "-"


def table(runs: dict[tuple[str, str, int], list[dict[str, Any]]], args: Any) -> str:
    """Markdown: one row per backend and checkpoint interval."""
    lines = [
        "| state backend | checkpoints | barrierflow events/s (runs) | PyFlink events/s (runs) "
        "| barrierflow / PyFlink |",
        "|---|---|---:|---:|---:|",
    ]
    for backend in args.backends:
        for interval in args.intervals:
            ours = runs.get(("barrierflow", backend, interval), [])
            theirs = runs.get(("pyflink", backend, interval), [])
            label = f"{interval / 1000:g} s" if interval else "none"
            lines.append(
                f"| {backend} | {label} | {_rate(ours)} | {_rate(theirs)} "
                f"| {_ratio(median_rate(ours), median_rate(theirs))} |"
            )
    if 0 in args.intervals:
        lines.append("")
        lines.append("| state backend | system | checkpoints / none |")
        lines.append("|---|---|---:|")
        for backend in args.backends:
            for system in SYSTEMS:
                none = median_rate(runs.get((system, backend, 0), []))
                for interval in (i for i in args.intervals if i):
                    ckpt = median_rate(runs.get((system, backend, interval), []))
                    lines.append(f"| {backend} | {system} | {_ratio(ckpt, none)} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--backends", default="hashmap,rocksdb")
    parser.add_argument("--intervals", default="0,1000", help="checkpoint intervals, ms (0: none)")
    parser.add_argument("--mode", default="thread", choices=["thread", "process"])
    parser.add_argument("--timeout", type=float, default=600, help="seconds per PyFlink run")
    parser.add_argument("--json-out", help="also write every run's figures here")
    args = parser.parse_args(argv)
    args.backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    args.intervals = [int(i) for i in args.intervals.split(",") if i.strip()]
    problem = peer_problems(peers_root(), ["flink-ds"]).get("flink-ds")
    if problem:
        print(f"PyFlink: not run: {problem}")
        return 1

    from barrierflow.cluster.spark.session import SparkOptions, obtain_spark

    obtain_spark(None, 4, SparkOptions(conf={"spark.python.worker.reuse": "false"}))
    info = state_bench.machine()
    print(json.dumps(info))
    print(
        f"keyed running count, parallelism 2, {args.records:,} records, {args.keys:,} keys, "
        f"PyFlink in {args.mode} mode; load average {os.getloadavg()}"
    )
    warm = max(args.records // 10, 1000)
    print("warm-up:", barrierflow_run("hashmap", warm, args.keys, 0).get("events_per_second"))
    warm_flink = pyflink_run("hashmap", warm, args.keys, 0, args.mode, args.timeout)
    print("warm-up PyFlink:", warm_flink.get("events_per_second", warm_flink.get("error")))
    runs: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    for round_number in range(1, args.repeat + 1):
        for interval in args.intervals:
            for backend in args.backends:
                for system in SYSTEMS:
                    load = os.getloadavg()[0]
                    started = time.monotonic()
                    if system == "barrierflow":
                        run = barrierflow_run(backend, args.records, args.keys, interval)
                    else:
                        run = pyflink_run(
                            backend, args.records, args.keys, interval, args.mode, args.timeout
                        )
                    run["load_average_1m"] = load
                    runs.setdefault((system, backend, interval), []).append(run)
                    rate = run.get("events_per_second")
                    print(
                        f"round {round_number}: {system} {backend} ckpt {interval} ms: "
                        + (f"{rate:,.0f} events/s" if rate else str(run.get("error")))
                        + f" ({time.monotonic() - started:.0f} s, load {load:.1f})",
                        flush=True,
                    )
    print(f"load average at the end {os.getloadavg()}")
    print()
    print(table(runs, args))
    if args.json_out:
        with open(args.json_out, "w") as out:
            rows = [
                {"system": s, "backend": b, "interval_ms": i, "runs": r}
                for (s, b, i), r in runs.items()
            ]
            json.dump({"machine": info, "args": vars(args), "rows": rows}, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

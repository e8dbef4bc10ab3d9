"""What making a checkpoint durable costs on this disk: each file a checkpoint writes, with and
without its fsyncs (issue 21, item 5).

    python benchmarks/fsync_cost.py [--dir PATH] [--repeat N]

A checkpoint of a job at parallelism p writes p state files (`write_bytes`, then
`_fs.sync_file`: the file and its folder) and one `_metadata` (`write_atomic`: a temporary
file fsynced, renamed, the folder fsynced; then the job folder); a FileSink subtask closes
its part files (`sync_file`) and commits them (`sync_dir` of the output folder). Prints
the median time of each step with and without the fsyncs, per state-file size, in the
folder `--dir` (default: a new folder under the current one, so on its disk, not /tmp,
which may be memory).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable

from barrierflow import _fs


def median_ms(step: Callable[[int], None], repeat: int) -> float:
    times = []
    for i in range(repeat):
        started = time.perf_counter()
        step(i)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", default=None)
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix=".bench-fsync-", dir=args.dir or os.getcwd())
    try:
        folder = _fs.location(root)
        print(f"folder {root} (on the disk of {args.dir or 'the current folder'})")
        for size in (1024, 64 * 1024, 1024 * 1024):
            data = os.urandom(size)

            def state_file(i: int, sync: bool, data: bytes = data) -> None:
                target = folder.child(f"chk-{i}", "1-0-run.state")
                _fs.make_dirs(target.parent)
                _fs.write_bytes(target, data)
                if sync:
                    _fs.sync_file(target)

            plain = median_ms(lambda i: state_file(i, False), args.repeat)
            durable = median_ms(lambda i: state_file(10_000 + i, True), args.repeat)
            print(
                f"state file {size // 1024:>5} KiB: {plain:6.2f} ms written, "
                f"{durable:6.2f} ms written and fsynced (+{durable - plain:.2f} ms)"
            )
        metadata = os.urandom(2048)
        plain = median_ms(
            lambda i: _fs.write_bytes(folder.child(f"chk-{i}", "_metadata"), metadata),
            args.repeat,
        )
        durable = median_ms(
            lambda i: (
                _fs.write_atomic(folder.child(f"chk-{10_000 + i}", "_metadata"), metadata),
                _fs.sync_dir(folder),
            ),
            args.repeat,
        )
        print(
            f"_metadata (2 KiB): {plain:6.2f} ms written, {durable:6.2f} ms written "
            f"atomically and fsynced with its folders (+{durable - plain:.2f} ms)"
        )
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()

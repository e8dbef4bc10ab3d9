"""What the two PyFlink peer scripts share: the mini-cluster's configuration, a REST poller
that finds when every subtask was running and what the checkpoints cost, and the RESULT line.

Only `flink_nexmark.py` and `flink_datastream.py` import this module, and only under the
PyFlink venv's Python (`$PEERS_ROOT/flink/venv/bin/python`); nothing else in the repository
needs PyFlink.

Timing, the same in both scripts (every figure is in the RESULT line):

- `seconds`: from the moment every subtask of the job was RUNNING (the latest RUNNING
  timestamp of `/jobs/<id>/vertices/<v>/subtasktimes`) to the job's end; barrierflow's
  `seconds` also starts with all tasks running. When the poller missed the job (a run
  shorter than its polling interval) this falls back to `net_seconds`.
- `net_seconds`: Flink's `JobExecutionResult.net_runtime`, from the job's INITIALIZING to
  its end: also the scheduling and deployment of the tasks.
- `wall_seconds`: the whole process, from the script's start (before PyFlink is imported:
  the JVM gateway, planning, the mini-cluster's start and stop included).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time
import urllib.request
from typing import Any

PROCESS_START = time.time()
"""When this module was first imported: the scripts import it before PyFlink."""


def free_port() -> int:
    """A TCP port nobody listens on now, for the mini-cluster's REST endpoint."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def flink_configuration(
    parallelism: int,
    rest_port: int,
    checkpoint_ms: int = 0,
    checkpoint_dir: str | None = None,
    thread_mode: bool = False,
    extra: dict[str, str] | None = None,
):
    """A local mini-cluster's Configuration; the Python workers use this interpreter."""
    from pyflink.common import Configuration

    conf = Configuration()
    settings = {
        "python.executable": sys.executable,
        "python.client.executable": sys.executable,
        "parallelism.default": str(parallelism),
        "rest.port": str(rest_port),
        "rest.bind-port": str(rest_port),
        "rest.address": "127.0.0.1",
        "rest.bind-address": "127.0.0.1",
        # in-memory state, as barrierflow's (flink-nexmark's own runs use RocksDB)
        "state.backend.type": "hashmap",
    }
    if thread_mode:
        settings["python.execution-mode"] = "thread"
    if checkpoint_ms:
        if checkpoint_dir is None:
            raise ValueError("checkpointing needs a checkpoint directory")
        settings.update(
            {
                "execution.checkpointing.interval": f"{checkpoint_ms} ms",
                "execution.checkpointing.mode": "EXACTLY_ONCE",
                "execution.checkpointing.storage": "filesystem",
                "execution.checkpointing.dir": "file://" + checkpoint_dir,
            }
        )
    settings.update(extra or {})
    for key, value in settings.items():
        conf.set_string(key, value)
    return conf


def thread_mode_pythonpath() -> None:
    """Thread mode runs Python inside the JVM (pemja): it finds PyFlink through PYTHONPATH,
    which the JVM inherits from us, so it must be set before the gateway starts."""
    import sysconfig

    site = sysconfig.get_paths()["purelib"]
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if site not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([site, *paths])


class JobPoller(threading.Thread):
    """Polls the mini-cluster's REST API while the job runs: the job's status timestamps, the
    moment all subtasks were running, and the completed checkpoints' durations and sizes."""

    def __init__(self, port: int, interval: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.base = f"http://127.0.0.1:{port}"
        self.interval = interval
        self.stopped = threading.Event()
        self.job_id: str | None = None
        self.job_timestamps: dict[str, int] = {}
        self.all_running_ms: int | None = None
        self.checkpoints: dict[int, dict[str, Any]] = {}
        self.checkpoint_counts: dict[str, int] = {}

    def _get(self, path: str) -> Any:
        with urllib.request.urlopen(self.base + path, timeout=2) as reply:
            return json.loads(reply.read())

    def run(self) -> None:
        while not self.stopped.is_set():
            # the cluster may be starting or already gone: try again next time
            with contextlib.suppress(Exception):
                self._poll()
            self.stopped.wait(self.interval)

    def _poll(self) -> None:
        if self.job_id is None:
            jobs = self._get("/jobs")["jobs"]
            if not jobs:
                return
            self.job_id = jobs[0]["id"]
        job = self._get(f"/jobs/{self.job_id}")
        self.job_timestamps = {k: v for k, v in job.get("timestamps", {}).items() if v > 0}
        if self.all_running_ms is None:
            self.all_running_ms = self._all_running(job)
        stats = self._get(f"/jobs/{self.job_id}/checkpoints")
        self.checkpoint_counts = stats.get("counts", {})
        for entry in stats.get("history", []):
            if entry.get("status") == "COMPLETED":
                self.checkpoints[entry["id"]] = {
                    "duration_ms": entry.get("end_to_end_duration"),
                    "size_bytes": entry.get("checkpointed_size") or entry.get("state_size"),
                }

    def _all_running(self, job: dict[str, Any]) -> int | None:
        """The latest RUNNING timestamp over all subtasks, once every subtask got there."""
        latest = 0
        for vertex in job.get("vertices", []):
            times = self._get(f"/jobs/{self.job_id}/vertices/{vertex['id']}/subtasktimes")
            for subtask in times.get("subtasks", []):
                running = subtask.get("timestamps", {}).get("RUNNING", 0)
                if running <= 0:
                    return None
                latest = max(latest, running)
        return latest or None

    def stop(self) -> None:
        self.stopped.set()
        self.join(timeout=5)

    def checkpoint_summary(self) -> dict[str, Any]:
        """`{"completed", "duration_ms": {"p50", "max"}, "size_bytes": {"p50", "max"}}`."""
        durations = [c["duration_ms"] for c in self.checkpoints.values() if c["duration_ms"]]
        sizes = [c["size_bytes"] for c in self.checkpoints.values() if c["size_bytes"]]
        return {
            "completed": self.checkpoint_counts.get("completed", len(self.checkpoints)),
            "duration_ms": _p50_max(durations),
            "size_bytes": _p50_max(sizes),
        }


def _p50_max(values: list[float]) -> dict[str, float] | None:
    if not values:
        return None
    return {"p50": statistics.median(values), "max": max(values)}


def checkpoint_dir(enabled: bool) -> str | None:
    """A fresh folder for the run's checkpoints (removed by `cleanup`), or None."""
    return tempfile.mkdtemp(prefix="flink-ckpt-") if enabled else None


def cleanup(folder: str | None) -> None:
    if folder:
        shutil.rmtree(folder, ignore_errors=True)


def count_lines(path: str) -> int:
    """The events in a JSON Lines events file, or in the files of a folder (one a line)."""
    if os.path.isdir(path):
        return sum(count_lines(os.path.join(path, name)) for name in sorted(os.listdir(path)))
    count = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(1 << 22):
            count += chunk.count(b"\n")
    return count


def result_line(
    system: str,
    query: str,
    events: int,
    parallelism: int,
    checkpoint_ms: int,
    net_runtime_ms: int,
    poller: JobPoller | None,
    **extra: Any,
) -> str:
    """The one `RESULT {json}` line a peer script prints, in barrierflow's field names."""
    net = net_runtime_ms / 1000.0
    seconds, seconds_from = net, "net_runtime"
    if poller is not None and poller.all_running_ms and "INITIALIZING" in poller.job_timestamps:
        end_ms = poller.job_timestamps["INITIALIZING"] + net_runtime_ms
        if end_ms > poller.all_running_ms:
            seconds, seconds_from = (end_ms - poller.all_running_ms) / 1000.0, "all_running"
    wall = time.time() - PROCESS_START
    figures = {
        "system": system,
        "query": query,
        "events": events,
        "parallelism": parallelism,
        "checkpoint_interval_ms": checkpoint_ms or None,
        "seconds": round(seconds, 3),
        "seconds_from": seconds_from,
        "events_per_second": round(events / seconds) if seconds > 0 else None,
        "net_seconds": round(net, 3),
        "events_per_second_net": round(events / net) if net > 0 else None,
        "wall_seconds": round(wall, 3),
        "events_per_second_wall": round(events / wall),
        "checkpoints": (
            poller.checkpoint_summary() if poller is not None and checkpoint_ms else None
        ),
        **extra,
    }
    return "RESULT " + json.dumps(figures)

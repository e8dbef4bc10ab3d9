"""A Spark standalone cluster on this machine for the tests: a Master and Workers started from
the pyspark package, bound to 127.0.0.1, each Worker with its own work folder.

Executors the Workers launch inherit the Workers' environment; PYTHONPATH points at this
checkout, so the executors' Python imports the barrierflow under test (the job's session
also ships it as a zip, `spark.barrierflow.shipPackage`).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyspark

from barrierflow._clock import SYSTEM_CLOCK
from barrierflow.cluster.spark.java import ensure_java_home

REPO = Path(__file__).resolve().parents[2]
SPARK_HOME = Path(pyspark.__file__).resolve().parent
START_TIMEOUT_S = 90.0


@dataclass(frozen=True)
class StandaloneCluster:
    master_url: str
    """spark://127.0.0.1:PORT"""
    ui_url: str
    workers: int
    cores_per_worker: int
    logs: Path

    @property
    def slots(self) -> int:
        return self.workers * self.cores_per_worker

    def state(self) -> dict:
        with urllib.request.urlopen(f"{self.ui_url}/json", timeout=5) as response:
            return json.load(response)

    def alive_workers(self) -> int:
        """Workers the Master lists as ALIVE; 0 while its UI does not answer with JSON yet
        (a Master starting up served its HTML page at `/json` once here)."""
        try:
            workers = self.state().get("workers", [])
        except (OSError, ValueError):
            return 0
        return sum(1 for worker in workers if worker.get("state") == "ALIVE")

    def log_tail(self, chars: int = 3000) -> str:
        return "\n".join(
            f"--- {path.name}\n{path.read_text(errors='replace')[-chars:]}"
            for path in sorted(self.logs.glob("*.log"))
        )


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def cluster_environment() -> dict[str, str]:
    """What the Master, the Workers and their executors run with."""
    java_home = ensure_java_home()
    pythonpath = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    return {
        **os.environ,
        "JAVA_HOME": str(java_home),
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false",
        "PYTHONPATH": pythonpath,
    }


@contextlib.contextmanager
def standalone_cluster(
    folder: Path, workers: int = 2, cores: int = 2, memory: str = "1g"
) -> Iterator[StandaloneCluster]:
    """A running Master with `workers` registered Workers; every process (and the executors
    they launched) is killed when the block ends."""
    folder.mkdir(parents=True, exist_ok=True)
    env = cluster_environment()
    spark_class = str(SPARK_HOME / "bin" / "spark-class")
    port, ui_port = free_port(), free_port()
    master_url = f"spark://127.0.0.1:{port}"
    cluster = StandaloneCluster(
        master_url, f"http://127.0.0.1:{ui_port}", workers, cores, folder / "logs"
    )
    cluster.logs.mkdir(exist_ok=True)
    processes: list[subprocess.Popen] = []

    def start(name: str, *args: str) -> None:
        log = open(cluster.logs / f"{name}.log", "wb")  # noqa: SIM115 (closed with the process)
        processes.append(
            subprocess.Popen(
                [spark_class, *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=folder,
                start_new_session=True,  # its own process group: the executors go with it
            )
        )
        log.close()

    try:
        start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
              "--port", str(port), "--webui-port", str(ui_port))  # fmt: skip
        for n in range(workers):
            work = folder / f"w{n}"
            work.mkdir(exist_ok=True)
            start(f"worker-{n}", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                  "--cores", str(cores), "--memory", memory, "--work-dir", str(work),
                  "--webui-port", str(free_port()), master_url)  # fmt: skip
        _wait_until(lambda: cluster.alive_workers() == workers, processes, cluster)
        yield cluster
    finally:
        for process in processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
        for process in processes:
            process.wait(timeout=30)


def _wait_until(done, processes: list[subprocess.Popen], cluster: StandaloneCluster) -> None:
    """Poll `done` until true; fail with the logs if a process exits or the bound passes."""
    deadline = SYSTEM_CLOCK.monotonic() + START_TIMEOUT_S
    pause = threading.Event()
    while not done():
        exited = [p.args[1] for p in processes if p.poll() is not None]
        if exited or SYSTEM_CLOCK.monotonic() > deadline:
            why = f"exited: {', '.join(exited)}" if exited else "timed out"
            raise RuntimeError(
                f"the standalone cluster did not start ({why}):\n{cluster.log_tail()}"
            )
        pause.wait(0.2)

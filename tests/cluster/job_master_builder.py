"""The shared builder and fakes of the JobMaster and attempt tests: no Spark, no sockets.

A `FakeRpc` stands in for the RPC endpoint: `connect()` opens a `FakeConnection`
that records what the JobMaster sends it, and the harness posts task messages as
the RPC reader threads would. A `FakeSparkRunner` records submissions and cancels;
the test ends an attempt's Spark job by hand. Time is a `ManualClock`: delays fire
when the test advances it and drains the JobMaster's mailbox and scheduler.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from barrierflow import StreamExecutionEnvironment
from barrierflow._clock import ManualClock
from barrierflow.api.restart_strategies import RestartStrategies, RestartStrategyConfiguration
from barrierflow.checkpoint.coordinator import CheckpointCoordinatorConfig
from barrierflow.cluster.addresses import LOCAL_ADDRESSES, JobAddresses
from barrierflow.cluster.jobmaster.job_master import JobMaster, JobSettings
from barrierflow.cluster.mails import (
    Mail,
    SparkJobEnded,
    SparkTasksLaunched,
    TaskConnectionLost,
    TaskMessageReceived,
)
from barrierflow.connectors.files import FileSink
from barrierflow.runtime import task_messages as msg

SOURCES = (0, 1)
"""Partitions of 'Collection -> Map' (1/2) and (2/2)."""
COUNTERS = (2, 3)
"""Partitions of 'Reduce -> Sink' (1/2) and (2/2)."""
PARTITIONS = SOURCES + COUNTERS
INTERVAL_MS = 100


class FakeConnection:
    """A task's RPC connection as the JobMaster sees it; records every message sent."""

    def __init__(self) -> None:
        self.sent: list[Any] = []
        self.closed = False

    def send(self, message: Any) -> None:
        if self.closed:
            raise OSError("the connection is closed")
        self.sent.append(message)

    def close(self) -> None:
        self.closed = True

    def sent_of(self, kind: type) -> list[Any]:
        return [m for m in self.sent if isinstance(m, kind)]


class FakeRpc:
    """The RPC endpoint without sockets; `close` closes every connection, as RpcServer does."""

    address = ("127.0.0.1", 1)

    def __init__(self, host: str, secret: bytes, post: Callable[[Mail], None]) -> None:
        self.post = post
        self.host = host
        self.connections: list[FakeConnection] = []
        self.closed = False

    def connect(self) -> FakeConnection:
        conn = FakeConnection()
        self.connections.append(conn)
        return conn

    def close(self) -> None:
        self.closed = True
        for conn in self.connections:
            conn.close()


@dataclass
class FakeSparkRunner:
    """Records the attempts submitted and the groups cancelled; never runs anything."""

    post: Callable[[Mail], None]
    addresses: JobAddresses = LOCAL_ADDRESSES
    submitted: list[tuple[str, int]] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)
    payloads: list[bytes] = field(default_factory=list)
    log_folder: Path | None = None
    """Where the JobMaster asked the runner to write Spark's log."""
    reports_launches: bool = False
    """As SparkAttemptRunner (True): the test posts SparkTasksLaunched (`launch`)."""

    def executor_hosts(self) -> frozenset[str]:
        return frozenset({socket.gethostname()})

    def submit(self, payload: bytes, group: str, attempt: int) -> None:
        assert isinstance(payload, bytes)
        self.submitted.append((group, attempt))
        self.payloads.append(payload)

    def cancel(self, group: str) -> None:
        self.cancelled.append(group)

    def log_to(self, folder: Path) -> None:
        self.log_folder = folder

    def wait_ended(self, group: str, timeout_s: float) -> bool:
        return True  # fake tasks: nothing runs


class JobHarness:
    """A JobMaster over a two-vertex job (parallelism 2) with fakes and a ManualClock."""

    def __init__(
        self, tmp_path: Path, restart: RestartStrategyConfiguration, sink: Any = None
    ) -> None:
        env = StreamExecutionEnvironment()
        env.set_parallelism(2)
        (
            env.from_collection(["a", "b", "a"])
            .map(lambda word: (word, 1))
            .key_by(lambda pair: pair[0])
            .reduce(lambda a, b: (a[0], a[1] + b[1]))
            .uid("count")
            .sink_to(sink if sink is not None else FileSink.for_rows(str(tmp_path / "out")))
        )
        self.clock = ManualClock(epoch_ms=1_700_000_000_000)
        self.rpc: FakeRpc | None = None
        self.runner: FakeSparkRunner | None = None
        self.addresses = LOCAL_ADDRESSES
        """What the fake runner says about addresses (set before `start`)."""
        self.reports_launches = False
        """Whether the fake runner reports its stages' start (set before `start`)."""
        self.master = JobMaster(
            env.get_job_graph("unit-job"),
            JobSettings(
                checkpoint_interval_ms=INTERVAL_MS,
                coordinator=CheckpointCoordinatorConfig(
                    interval_ms=INTERVAL_MS,
                    min_pause_ms=0,
                    timeout_ms=60_000,
                    max_concurrent=1,
                    tolerable_failures=0,
                ),
                retained_checkpoints=1,
                restart_strategy=restart,
                checkpoint_storage=str(tmp_path / "checkpoints"),
                master=None,
                rest_port="off",
                log_dir=str(tmp_path / "logs"),
            ),
            clock=self.clock,
            connect_runner=self._connect_runner,
            start_rpc=self._start_rpc,
        )
        self.tasks: dict[int, FakeConnection] = {}

    def _connect_runner(self, master, subtasks, name, post) -> FakeSparkRunner:
        self.runner = FakeSparkRunner(
            post, addresses=self.addresses, reports_launches=self.reports_launches
        )
        return self.runner

    def _start_rpc(self, host, secret, post, job_id=None) -> FakeRpc:
        self.rpc = FakeRpc(host, secret, post)
        return self.rpc

    # ---- driving ---------------------------------------------------------------------------

    def start(self) -> JobHarness:
        self.master.start()
        return self

    def post(self, mail: Mail) -> None:
        self.master.mailbox.put(mail)
        self.master.drain()

    def send(self, partition: int, message: Any, conn: FakeConnection | None = None) -> None:
        """`message` from the task of `partition` (on its registered connection)."""
        self.post(TaskMessageReceived(conn or self.tasks[partition], message))

    def advance(self, millis: int) -> None:
        self.clock.advance(millis)
        self.master.drain()

    def register_all(self, attempt: int = 0) -> None:
        assert self.rpc is not None
        self.tasks = {}
        for partition in PARTITIONS:
            conn = self.rpc.connect()
            self.tasks[partition] = conn
            self.send(
                partition,
                msg.RegisterTask(
                    attempt, partition, ("127.0.0.1", 7000 + partition), "host", 100 + partition
                ),
            )

    def run_all(self, attempt: int = 0) -> None:
        """Every task registers and reports running: checkpointing starts."""
        self.register_all(attempt)
        for partition in PARTITIONS:
            self.send(partition, msg.TaskRunning(attempt, partition))

    def lose(self, partition: int) -> None:
        self.post(TaskConnectionLost(self.tasks[partition]))

    def launch(self, attempt: int) -> None:
        """Spark started the tasks of `attempt`'s stage (they had waited for free slots)."""
        self.post(SparkTasksLaunched(attempt))

    def end_spark_job(self, attempt: int, error: str | None = None) -> None:
        self.post(SparkJobEnded(attempt, error))

    def trigger_ids(self, partition: int) -> list[int]:
        return [m.checkpoint_id for m in self.tasks[partition].sent_of(msg.TriggerCheckpoint)]


def job_master_builder(
    tmp_path: Path, restart: RestartStrategyConfiguration | None = None
) -> JobHarness:
    """A started JobMaster (attempt 0 submitted), restarting with a fixed delay by default."""
    return JobHarness(tmp_path, restart or RestartStrategies.fixed_delay_restart(3, 500)).start()


def failure(error: BaseException, where: str = "Reduce -> Sink") -> msg.TaskFailure:
    """What a task reports when `error` ended it."""
    try:
        raise error
    except BaseException as raised:
        return msg.TaskFailure.of(raised, where)

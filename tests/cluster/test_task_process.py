"""The Spark task's supervisor without Spark: it forks a child that plays the stream task,
relays its messages both ways, reports the child's death under the child's attempt, and
starts a new child when RestartTask names the next attempt. The test plays the JobMaster
(an outbox for what the Spark task sends, the supervisor's mailbox for what it receives).
Real processes and SIGKILL; every wait is bounded, nothing sleeps."""

from __future__ import annotations

import dataclasses
import logging
import os
import queue
import signal
import socket
import threading
from typing import Any

import pytest

from barrierflow.cluster.executor.task_process import ParentLink, TaskSupervisor
from barrierflow.graph.job_graph import SubtaskId
from barrierflow.runtime import task_messages as msg
from barrierflow.runtime.deployment import TaskSettings
from barrierflow.runtime.mails import RpcLost, RpcReceived

WAIT_S = 20

SETTINGS = TaskSettings(
    job_id="job",
    attempt=0,
    deployment_id="d0",
    secret=b"secret",
    jobmaster_address=("127.0.0.1", 1),
    task_bind_address="127.0.0.1",
    checkpoint_dir="file:///nowhere",
    partitions=(SubtaskId(1, 0),),
    connect_timeout_s=WAIT_S,
)


@pytest.fixture(autouse=True)
def py4j_logs_nothing_below_warnings():
    """The supervisor forks this pytest worker, whose main thread may hold a py4j connection
    (a Spark session of another test) in its thread-locals. The child clears the other
    threads' states before logging's after-fork hook re-creates the handlers' locks, so the
    connection's finalizer logs at INFO there ("Closing down clientserver connection") and
    waits forever if another thread held that handler's lock at the fork: the stand-in
    never registered (seen once in a clean-clone suite; reproduced by holding a handler's
    lock in a thread while forking from another). In production the forking process is a
    PySpark worker, which holds no py4j connection."""
    logger = logging.getLogger("py4j")
    level = logger.level
    logger.setLevel(logging.WARNING)
    yield
    logger.setLevel(level)


def stream_task_stand_in(settings: TaskSettings, link: ParentLink) -> None:
    """Registers under its attempt with its own pid, acknowledges every trigger, reports
    finishing when told the checkpoint was final, and ends on CancelTask or a lost link."""
    mailbox: queue.SimpleQueue = queue.SimpleQueue()
    link.start(mailbox.put)
    link.send(msg.RegisterTask(settings.attempt, 0, ("127.0.0.1", 1), "host", os.getpid()))
    while True:
        mail = mailbox.get()
        if isinstance(mail, RpcLost):
            return
        message = mail.message
        if isinstance(message, msg.CancelTask):
            return
        if isinstance(message, msg.TriggerCheckpoint):
            link.send(msg.AcknowledgeCheckpoint(message.attempt, 0, message.checkpoint_id, None))
        if isinstance(message, msg.NotifyCheckpointComplete) and message.is_final:
            link.send(msg.TaskFinished(message.attempt, 0))


class FakeJobMaster:
    """Runs a TaskSupervisor in a thread; reads what it sends, tells it what to do."""

    def __init__(self) -> None:
        self.outbox: queue.SimpleQueue = queue.SimpleQueue()
        self.mailbox: queue.SimpleQueue = queue.SimpleQueue()
        self.supervisor = TaskSupervisor(
            SETTINGS, 0, self.outbox.put, self.mailbox, stream_task_stand_in
        )
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.supervisor.run()
        except BaseException as error:
            self.error = error

    def expect(self, kind: type) -> Any:
        """The next message the Spark task sends, which must be of `kind`."""
        try:
            message = self.outbox.get(timeout=WAIT_S)
        except queue.Empty:
            described = children_described()
            pid = self.supervisor.child_pid
            if pid is not None:  # a hung child must not outlive the test (nor hold its pipes)
                os.kill(pid, signal.SIGKILL)
            raise AssertionError(
                f"no {kind.__name__} within {WAIT_S} s; supervisor thread alive: "
                f"{self.thread.is_alive()}, error: {self.error!r}; {described}"
            ) from None
        assert isinstance(message, kind), message
        return message

    def tell(self, message: Any) -> None:
        self.mailbox.put(RpcReceived(message))

    def registered(self, attempt: int) -> int:
        """The pid of the stream task that registered under `attempt` (and checks the Spark
        task named itself after it)."""
        register = self.expect(msg.RegisterTask)
        assert register.attempt == attempt
        spark_task = self.expect(msg.SparkTaskProcess)
        assert (spark_task.attempt, spark_task.pid) == (attempt, os.getpid())
        assert register.pid != os.getpid()
        return register.pid

    def ended(self) -> bool:
        self.thread.join(WAIT_S)
        assert self.error is None, self.error
        return not self.thread.is_alive()


def children_described() -> str:
    """This process's children with their state, kernel wait channel and system call (what
    a stream task stand-in that never spoke is stuck in), read from /proc ("?" where a
    file cannot be read)."""
    found = []
    for name in os.listdir("/proc") if os.path.isdir("/proc") else ():
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            if int(fields[1]) != os.getpid():
                continue
        except (OSError, ValueError, IndexError):
            continue
        found.append(
            f"{name}: {fields[0]} in {_read_proc(name, 'wchan')}, {_read_proc(name, 'syscall')}"
        )
    return "children: " + ("; ".join(found) or "none")


def _read_proc(pid: str, name: str) -> str:
    try:
        with open(f"/proc/{pid}/{name}") as file:
            return repr(file.read().strip())
    except OSError:
        return "?"


def gone(pid: int) -> bool:
    """The process ended and was reaped (not a zombie left behind)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def test_a_killed_stream_task_is_reported_and_respawned_for_the_next_attempt():
    jm = FakeJobMaster()
    first = jm.registered(attempt=0)
    jm.tell(msg.TriggerCheckpoint(0, 1, 0, False))
    assert jm.expect(msg.AcknowledgeCheckpoint).checkpoint_id == 1  # relayed both ways

    os.kill(first, signal.SIGKILL)
    died = jm.expect(msg.TaskProcessDied)
    assert (died.attempt, died.partition, died.pid, died.how) == (
        0,
        0,
        first,
        "was killed by SIGKILL",
    )
    assert gone(first)
    # the JobMaster rolls back in place: the ended attempt's messages find no child
    jm.tell(msg.TriggerCheckpoint(0, 2, 0, False))
    jm.tell(msg.EndAttempt(0, "rolling back", 0))
    jm.tell(msg.RestartTask(1, dataclasses.replace(SETTINGS, attempt=1)))
    second = jm.registered(attempt=1)
    assert second != first
    jm.tell(msg.TriggerCheckpoint(1, 3, 0, False))
    assert jm.expect(msg.AcknowledgeCheckpoint).checkpoint_id == 3

    jm.tell(msg.CancelTask(1, "done"))
    assert jm.ended()
    assert jm.supervisor.respawns == 1
    assert gone(second)
    assert jm.outbox.empty()


def test_a_lost_jobmaster_connection_ends_the_stream_task_and_the_spark_task():
    jm = FakeJobMaster()
    child = jm.registered(attempt=0)
    jm.mailbox.put(RpcLost())
    assert jm.ended()
    assert gone(child)
    assert jm.outbox.empty()  # no death reported: the child ended because it was told to


def test_a_death_after_the_stream_task_finished_ends_the_spark_task_quietly():
    jm = FakeJobMaster()
    child = jm.registered(attempt=0)
    jm.tell(msg.NotifyCheckpointComplete(0, 1, is_final=True))
    jm.expect(msg.TaskFinished)
    os.kill(child, signal.SIGKILL)
    assert jm.ended()
    assert jm.outbox.empty()


def test_a_death_with_no_next_attempt_ends_on_cancel():
    jm = FakeJobMaster()
    child = jm.registered(attempt=0)
    os.kill(child, signal.SIGKILL)
    jm.expect(msg.TaskProcessDied)
    jm.tell(msg.CancelTask(0, "the job failed"))
    assert jm.ended()


def test_the_stream_task_process_holds_no_copy_of_the_spark_tasks_sockets():
    # The Spark worker's socket to the JVM and the JobMaster's connection must close when
    # the Spark task dies, even while its stream task lives.
    ours, peer = socket.socketpair()
    jm = FakeJobMaster()
    jm.registered(attempt=0)
    ours.close()
    peer.settimeout(WAIT_S)
    try:
        assert peer.recv(1) == b""  # end of stream: no other process holds `ours`
    finally:
        peer.close()
        jm.tell(msg.CancelTask(0, "done"))
        assert jm.ended()


@pytest.mark.parametrize(
    "status, how", [(9, "was killed by SIGKILL"), (1 << 8, "exited with code 1")]
)
def test_a_childs_end_is_described_in_words(status, how):
    from barrierflow.cluster.executor.task_process import ChildExited

    assert ChildExited(1, status).how == how
    assert not ChildExited(1, status).clean

"""A task's data server binds where its settings say and the task registers an address its
peers can connect to: never a wildcard, the executor's host when it binds everywhere."""

from __future__ import annotations

import queue
import socket
import threading

import pytest

from barrierflow.runtime.deployment import (
    InputChannelDescriptor,
    OperatorDescriptor,
    SubtaskId,
    TaskDescriptor,
    TaskSettings,
)
from barrierflow.runtime.mails import RpcReceived
from barrierflow.runtime.network.channels import ChannelHello, connect_output
from barrierflow.runtime.operators.base import StreamOperator
from barrierflow.runtime.task import StreamTask
from barrierflow.runtime.task_messages import CancelTask, RegisterTask

UPSTREAM, ME = SubtaskId(0, 0), SubtaskId(1, 0)
SECRET = b"s" * 32
BOUND_S = 10.0


class _Passes(StreamOperator):
    def process_batch(self, batch) -> None:
        self.output.collect(batch)


class _Factory:
    def make_operator(self, uid: str) -> StreamOperator:
        return _Passes(uid, "Passes")


def registered_address(task_bind_address: str | None, executor_host: str | None):
    """Run a task with one input channel until it registers; its RegisterTask, and whether a
    peer holding the secret could open the input channel at the registered address."""
    descriptor = TaskDescriptor(
        subtask=ME,
        vertex_name="Passes",
        parallelism=1,
        max_parallelism=128,
        operators=(OperatorDescriptor("pass", "Passes", _Factory()),),
        inputs=(InputChannelDescriptor(0, UPSTREAM),),
    )
    settings = TaskSettings(
        job_id="job",
        attempt=0,
        deployment_id="d",
        secret=SECRET,
        jobmaster_address=("127.0.0.1", 1),
        task_bind_address=task_bind_address,
        checkpoint_dir="file:///nowhere",
        partitions=(UPSTREAM, ME),
    )
    sent: queue.SimpleQueue = queue.SimpleQueue()
    task = StreamTask(
        descriptor, settings, 1, sent.put, queue.SimpleQueue(), executor_host=executor_host
    )
    runner = threading.Thread(target=task.run, daemon=True)
    runner.start()
    try:
        register = sent.get(timeout=BOUND_S)
        assert isinstance(register, RegisterTask)
        hello = ChannelHello("job", 0, 0, (0, 0), (1, 0))
        connect_output(register.data_address, SECRET, hello, 0, lambda mail: None).close()
        return register
    finally:
        task.mailbox.put(RpcReceived(CancelTask(0, "test over")))
        runner.join(BOUND_S)
        assert not runner.is_alive()


def test_a_wildcard_bind_registers_the_executor_host():
    register = registered_address("0.0.0.0", executor_host="127.0.0.1")
    assert register.data_address[0] == "127.0.0.1"
    assert register.data_address[1] > 0


def test_no_bind_address_binds_and_registers_the_executor_host():
    register = registered_address(None, executor_host="127.0.0.1")
    assert register.data_address[0] == "127.0.0.1"


@pytest.mark.parametrize("executor_host", ["127.0.0.1", "worker-elsewhere"])
def test_an_explicit_bind_address_is_the_registered_one(executor_host):
    register = registered_address("127.0.0.1", executor_host=executor_host)
    assert register.data_address[0] == "127.0.0.1"


def test_a_peer_that_closed_its_data_server_is_a_lost_channel_not_a_root_cause():
    """A downstream task that fails while it restores closes its data server before its
    upstream connects: the upstream reports a secondary failure (ChannelLostError), so the
    attempt keeps waiting for the downstream's own error (a race CI hit under load)."""
    from barrierflow.errors import ChannelLostError
    from barrierflow.runtime.deployment import OutputEdgeDescriptor
    from barrierflow.runtime.network.task_channels import connect_outputs
    from barrierflow.runtime.partitioners import ForwardPartitioner
    from barrierflow.runtime.task_messages import TaskFailure

    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    address = closed.getsockname()
    closed.close()  # nothing listens there any more
    descriptor = TaskDescriptor(
        subtask=UPSTREAM,
        vertex_name="Source",
        parallelism=1,
        max_parallelism=128,
        operators=(OperatorDescriptor("pass", "Passes", _Factory()),),
        outputs=(OutputEdgeDescriptor(0, ForwardPartitioner(), (ME,), 0),),
        vertex_names={0: "Source", 1: "Passes"},
    )
    settings = TaskSettings(
        job_id="job",
        attempt=0,
        deployment_id="d",
        secret=SECRET,
        jobmaster_address=("127.0.0.1", 1),
        task_bind_address="127.0.0.1",
        checkpoint_dir="file:///nowhere",
        partitions=(UPSTREAM, ME),
    )
    with pytest.raises(ChannelLostError, match=r"'Passes'.*failed or was cancelled") as raised:
        connect_outputs(descriptor, settings, {1: address}, lambda mail: None)
    assert TaskFailure.of(raised.value, "Source").lost_peer

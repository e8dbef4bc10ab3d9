"""Opening one task's channels for an attempt: its data server for the input channels, and
a connection to every downstream subtask for the output channels.

The data server binds where the attempt's settings say (`TaskSettings.task_bind_address`,
None meaning the executor's own host) and the task advertises an address its peers can
connect to: the executor's host when the bind is a wildcard.
"""

from __future__ import annotations

from barrierflow.errors import ChannelLostError, ConnectionSetupError
from barrierflow.runtime.deployment import SubtaskId, TaskDescriptor, TaskSettings
from barrierflow.runtime.mails import Post
from barrierflow.runtime.network.channels import (
    ChannelHello,
    DataServer,
    OutputChannel,
    connect_output,
)
from barrierflow.runtime.network.record_writer import EdgeWriter, RecordWriter

WILDCARD_ADDRESSES = frozenset({"0.0.0.0", "::"})
"""Bind addresses that listen on every interface and so name no host to connect to."""


def is_wildcard(address: str) -> bool:
    """True for an address that listens everywhere but cannot be connected to as it is.

    >>> is_wildcard("0.0.0.0"), is_wildcard("::"), is_wildcard("10.0.0.7")
    (True, True, False)
    """
    return address.strip() in WILDCARD_ADDRESSES


def data_addresses(bind_address: str | None, executor_host: str) -> tuple[str, str]:
    """(where the data server binds, the host it advertises) on the executor `executor_host`.

    >>> data_addresses(None, "worker-1")
    ('worker-1', 'worker-1')
    >>> data_addresses("0.0.0.0", "worker-1")
    ('0.0.0.0', 'worker-1')
    >>> data_addresses("127.0.0.1", "worker-1")
    ('127.0.0.1', '127.0.0.1')
    """
    bind = bind_address or executor_host
    return bind, executor_host if is_wildcard(bind) else bind


def data_server(
    descriptor: TaskDescriptor, settings: TaskSettings, bind: str, post: Post
) -> DataServer:
    """The (not yet started) server on `bind` that admits exactly this attempt's input
    channels."""
    subtask = descriptor.subtask
    return DataServer(
        bind,
        settings.secret,
        settings.job_id,
        settings.attempt,
        (subtask.vertex_id, subtask.subtask_index),
        {
            (c.edge_id, (c.upstream.vertex_id, c.upstream.subtask_index)): index
            for index, c in enumerate(descriptor.inputs)
        },
        post,
    )


def connect_outputs(
    descriptor: TaskDescriptor,
    settings: TaskSettings,
    peers: dict[int, tuple[str, int]],
    post: Post,
) -> tuple[RecordWriter, list[SubtaskId]]:
    """Connect every output channel; the writer, and the target subtask of each channel.

    `peers` holds the data address of every Spark partition of the attempt; credit and a
    lost channel arrive as mails through `post`. A peer that registered its address but
    cannot be connected now has failed or been cancelled since (it closes its data server
    when it fails, say while restoring its state): that is a ChannelLostError, a secondary
    failure, so the peer's own error stays the attempt's root cause.
    """
    me = (descriptor.subtask.vertex_id, descriptor.subtask.subtask_index)
    targets: list[SubtaskId] = []
    edges: list[EdgeWriter] = []
    opened: list[OutputChannel] = []
    for edge in descriptor.outputs:
        channels = []
        for target in edge.targets:
            hello = ChannelHello(
                settings.job_id,
                settings.attempt,
                edge.edge_id,
                me,
                (target.vertex_id, target.subtask_index),
            )
            address = peers[settings.partitions.index(target)]
            try:
                conn = connect_output(address, settings.secret, hello, len(targets), post)
            except ConnectionSetupError as error:
                for channel in opened:
                    channel.close()
                raise ChannelLostError(
                    f"cannot connect the output channel to subtask {target} "
                    f"('{descriptor.vertex_name_of(target)}'): it failed or was cancelled "
                    f"({error})"
                ) from error
            opened.append(OutputChannel(conn))
            channels.append(opened[-1])
            targets.append(target)
        edges.append(
            EdgeWriter(
                edge.partitioner,
                channels,
                settings.buffer_size,
                source_operator=edge.source_operator,
                side_output=edge.side_output,
            )
        )
    return RecordWriter(edges), targets

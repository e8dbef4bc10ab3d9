"""Opening one task's channels for an attempt: its data server for the input channels, and
a connection to every downstream subtask for the output channels."""

from __future__ import annotations

from barrierflow.runtime.deployment import SubtaskId, TaskDescriptor, TaskSettings
from barrierflow.runtime.mails import Post
from barrierflow.runtime.network.channels import (
    ChannelHello,
    DataServer,
    OutputChannel,
    connect_output,
)
from barrierflow.runtime.network.record_writer import EdgeWriter, RecordWriter


def data_server(descriptor: TaskDescriptor, settings: TaskSettings, post: Post) -> DataServer:
    """The (not yet started) server that admits exactly this attempt's input channels."""
    subtask = descriptor.subtask
    return DataServer(
        settings.bind_host,
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
    lost channel arrive as mails through `post`.
    """
    me = (descriptor.subtask.vertex_id, descriptor.subtask.subtask_index)
    targets: list[SubtaskId] = []
    edges: list[EdgeWriter] = []
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
            conn = connect_output(address, settings.secret, hello, len(targets), post)
            channels.append(OutputChannel(conn))
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

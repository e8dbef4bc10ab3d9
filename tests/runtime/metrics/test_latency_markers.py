"""Latency markers, event by event, without Spark or sockets: a source task emits one every
interval after its records on one channel of each edge; a downstream `Map -> Sink` task records
each marker's age per source vertex in every operator and never hands one to the map function
or the sink's writer; an unaligned checkpoint leaves markers out of its channel state.
Time is a ManualClock; channels are wires that remember the frames sent."""

from __future__ import annotations

import queue

from barrierflow import StreamExecutionEnvironment, WatermarkStrategy, _fs
from barrierflow._clock import ManualClock
from barrierflow.checkpoint.subtask_state_file import SubtaskStateReader
from barrierflow.connectors.collection import CollectionSource
from barrierflow.connectors.print_sink import PrintSink
from barrierflow.graph.deployment import build_task_descriptors
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.chain_outputs import RecordWriterOutput
from barrierflow.runtime.channel_state import in_flight_input, read_channel_state
from barrierflow.runtime.elements import CheckpointBarrier, LatencyMarker, StreamStatus
from barrierflow.runtime.mails import CreditReceived, InputReceived
from barrierflow.runtime.network import codec, task_channels
from barrierflow.runtime.network.channels import OutputChannel
from barrierflow.runtime.network.record_writer import EdgeWriter
from barrierflow.runtime.operators.source_sink import SourceOperator
from barrierflow.runtime.partitioners import ForwardPartitioner
from barrierflow.runtime.task import StreamTask, TaskSettings
from barrierflow.runtime.task_messages import AcknowledgeCheckpoint, DeployTask

SOURCE_VERTEX = 0


class _Wire:
    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def send_bytes(self, frame: bytes) -> None:
        self.sent.append(frame)

    def close(self) -> None:
        pass

    def decoded(self) -> list[object]:
        return [codec.decode(frame) for frame in self.sent]


def _settings(partitions, tmp_path, **overrides) -> TaskSettings:
    return TaskSettings(
        job_id="job",
        attempt=0,
        deployment_id="d0",
        secret=b"secret",
        jobmaster_address=("127.0.0.1", 1),
        task_bind_address="127.0.0.1",
        checkpoint_dir=str(tmp_path),
        partitions=partitions,
        **overrides,
    )


# ---- the source side -------------------------------------------------------------------------


def source_task(monkeypatch, tmp_path, **overrides) -> tuple[StreamTask, list[_Wire], ManualClock]:
    """The source task `src -> Map` (parallelism 1) of a job whose sink runs at parallelism 3
    behind a rebalance: one edge of three channels, each a wire with credit."""
    wires: list[_Wire] = []

    def connect_output(*args) -> _Wire:
        wires.append(_Wire())
        return wires[-1]

    monkeypatch.setattr(task_channels, "connect_output", connect_output)
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(1)
    source = CollectionSource(list(range(10)))
    (
        env.from_source(source, WatermarkStrategy.no_watermarks(), "src")
        .map(lambda x: x)
        .rebalance()
        .sink_to(PrintSink())
        .set_parallelism(3)
    )
    graph = env.get_job_graph("latency-source")
    partitions = tuple(graph.all_subtasks())
    assert partitions[0].vertex_id == SOURCE_VERTEX
    descriptor = build_task_descriptors(graph)[partitions[0]]
    clock = ManualClock(epoch_ms=70_000)
    settings = _settings(partitions, tmp_path, buffer_size=4, **overrides)
    task = StreamTask(descriptor, settings, 0, lambda message: None, queue.SimpleQueue(), clock)
    peers = {index: ("127.0.0.1", 1) for index in range(len(partitions))}
    task.deploy_and_restore(DeployTask(0, peers, source.create_splits(), None, {}))
    for channel in range(3):
        task.handle(CreditReceived(0, channel, 10))
    return task, wires, clock


def markers_on(wires: list[_Wire]) -> list[tuple[int, LatencyMarker]]:
    return [
        (channel, element)
        for channel, wire in enumerate(wires)
        for element in wire.decoded()
        if isinstance(element, LatencyMarker)
    ]


def test_a_source_emits_a_marker_every_interval_after_its_records_on_one_channel(
    monkeypatch, tmp_path
):
    task, wires, clock = source_task(monkeypatch, tmp_path, latency_interval_ms=100)
    assert len(wires) == 3
    task._schedule_latency_marker()  # as run() does once the task runs
    task._step_source()  # 4 records, spread over the 3 channels, still in their buffers
    assert all(wire.sent == [] for wire in wires)

    clock.advance(99)
    task.scheduler.run_due()
    assert markers_on(wires) == []
    clock.advance(1)
    task.scheduler.run_due()
    ((channel, marker),) = markers_on(wires)
    assert marker == LatencyMarker(70_100, SOURCE_VERTEX, 0)
    sent = wires[channel].decoded()
    assert isinstance(sent[0], RecordBatch) and sent[-1] == marker  # after its records
    assert sum(len(wire.sent) for wire in wires) == 2  # no other channel was flushed

    clock.advance(100)
    task.scheduler.run_due()
    assert sorted(m.marked_time_ms for _, m in markers_on(wires)) == [70_100, 70_200]
    source_metrics, map_metrics = task.chain.metrics
    assert source_metrics.latency == {}  # a source measures nothing
    assert map_metrics.latency[SOURCE_VERTEX].summary()[:4] == (2, 0.0, 0.0, 0.0)

    while task.chain.source.emit_next(4) != SourceOperator.END_OF_INPUT:
        pass
    task._source_ended()
    clock.advance(500)
    task.scheduler.run_due()
    assert len(markers_on(wires)) == 2  # none after the input ended
    assert task.scheduler.wait_s(5.0) == 5.0  # and none scheduled


def test_latency_tracking_is_off_by_default(monkeypatch, tmp_path):
    task, wires, clock = source_task(monkeypatch, tmp_path)
    task._schedule_latency_marker()
    assert task.scheduler.wait_s(5.0) == 5.0
    task._step_source()
    clock.advance(10_000)
    task.scheduler.run_due()
    task.writer.flush()
    assert markers_on(wires) == []
    operators = task.metrics_report().values["operators"]
    assert [op["latency"] for op in operators] == [{}, {}]


# ---- the receiving side ----------------------------------------------------------------------


def shout(value: int) -> int:
    print(f"map saw {value!r}")
    return value


def map_sink_task(tmp_path, **overrides) -> tuple[StreamTask, queue.SimpleQueue, ManualClock]:
    """The task `Map -> Sink` (parallelism 1) behind two source subtasks: two input
    channels, no output channel. The map function and the sink's writer print what they get."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    (
        env.from_source(CollectionSource([1, 2]), WatermarkStrategy.no_watermarks(), "src")
        .rebalance()
        .map(shout)
        .uid("map")
        .set_parallelism(1)
        .sink_to(PrintSink())
        .uid("sink")
        .set_parallelism(1)
    )
    graph = env.get_job_graph("latency-task")
    partitions = tuple(graph.all_subtasks())
    sent: queue.SimpleQueue = queue.SimpleQueue()
    partition = len(partitions) - 1
    descriptor = build_task_descriptors(graph)[partitions[partition]]
    clock = ManualClock(epoch_ms=10_000)
    settings = _settings(partitions, tmp_path, **overrides)
    task = StreamTask(descriptor, settings, partition, sent.put, queue.SimpleQueue(), clock)
    return task, sent, clock


def deploy(task: StreamTask, channel_state=None) -> None:
    task.deploy_and_restore(DeployTask(0, {}, [], None, {}, channel_state=channel_state))
    assert task.gate is not None
    for channel in range(2):
        task.gate.connected(channel, _Wire())  # type: ignore[arg-type]


def arrive(task: StreamTask, channel: int, element) -> bytes:
    if isinstance(element, list):
        frame = codec.encode_batch(element)
        element = RecordBatch(element)
    else:
        frame = codec.encode_event(element)
    task.handle(InputReceived(0, channel, element, frame))
    return frame


def drain(task: StreamTask) -> None:
    assert task.gate is not None
    while task.gate.has_available():
        task._step_input()


def test_every_operator_records_the_age_per_source_and_no_marker_reaches_their_code(
    tmp_path, capsys
):
    task, _, clock = map_sink_task(tmp_path)
    deploy(task)
    arrive(task, 0, [1, 2])
    arrive(task, 0, LatencyMarker(9_900, SOURCE_VERTEX, 0))
    arrive(task, 1, LatencyMarker(9_990, SOURCE_VERTEX, 1))
    arrive(task, 1, [3])
    arrive(task, 1, LatencyMarker(9_000, 7, 0))  # another source vertex
    drain(task)
    clock.advance(50)
    arrive(task, 0, LatencyMarker(10_000, SOURCE_VERTEX, 0))
    drain(task)

    printed = capsys.readouterr().out.splitlines()
    assert printed == ["map saw 1", "map saw 2", "1", "2", "map saw 3", "3"]
    values = task.metrics_report().values
    mapped, sunk = values["operators"]
    expected = {
        SOURCE_VERTEX: {
            "count": 3, "sum": 160.0, "min": 10.0, "max": 100.0,
            "p50": 50.0, "p95": 100.0, "p99": 100.0,
        },
        7: {
            "count": 1, "sum": 1000.0, "min": 1000.0, "max": 1000.0,
            "p50": 1000.0, "p95": 1000.0, "p99": 1000.0,
        },
    }  # fmt: skip
    assert mapped["latency"] == expected
    assert sunk["latency"] == expected  # chained: the same moment
    assert (mapped["records_in"], sunk["records_in"]) == (3, 3)  # markers are no records


def next_ack(sent: queue.SimpleQueue) -> AcknowledgeCheckpoint:
    while True:
        message = sent.get(timeout=10)
        if isinstance(message, AcknowledgeCheckpoint):
            return message


def test_markers_in_flight_at_an_unaligned_checkpoint_are_no_channel_state(tmp_path, capsys):
    task, sent, _ = map_sink_task(tmp_path, unaligned_checkpoints=True)
    deploy(task)
    barrier = CheckpointBarrier(1, 0)
    queued = arrive(task, 1, [10, 11])
    arrive(task, 1, LatencyMarker(9_990, SOURCE_VERTEX, 1))  # queued at the snapshot
    arrive(task, 0, barrier)  # snapshot now: channel 1 persists until its barrier
    arrive(task, 1, LatencyMarker(9_995, SOURCE_VERTEX, 1))  # arrives while persisting
    late = arrive(task, 1, [12])
    arrive(task, 1, barrier)

    ack = next_ack(sent)
    assert ack.checkpoint_id == 1 and ack.unaligned
    assert ack.persisted_bytes == len(queued) + len(late)
    handle = ack.state_handle
    assert handle is not None and handle.channel_state is not None
    uri = _fs.Location(str(tmp_path)).child("chk-1", handle.file).uri
    data = SubtaskStateReader().slice(uri, *handle.channel_state)
    assert read_channel_state(data, input_channels=2).inputs == {1: [queued, late]}

    drain(task)  # the running attempt still measures both markers
    assert task.chain.metrics[0].latency[SOURCE_VERTEX].summary()[0] == 2
    assert capsys.readouterr().out.splitlines()[-2:] == ["map saw 12", "12"]

    restored, _, _ = map_sink_task(tmp_path, unaligned_checkpoints=True)
    deploy(restored, channel_state=(uri, *handle.channel_state))
    assert restored.gate is not None
    polled = [restored.gate.gate.poll(lambda channel: False) for _ in range(3)]
    assert polled == [(1, RecordBatch([10, 11])), (1, RecordBatch([12])), None]


def test_an_unaligned_barrier_overtakes_a_queued_marker_without_persisting_it():
    wire = _Wire()
    channel = OutputChannel(wire)  # type: ignore[arg-type]
    batch = codec.encode_batch([1])
    marker = codec.encode_event(LatencyMarker(5, 0, 0))
    channel.send_buffer(batch)  # no credit: queued
    channel.send_event(marker)  # queued behind the buffer
    barrier = codec.encode_event(CheckpointBarrier(3, 0))
    assert channel.send_priority_event(barrier) == [batch]
    channel.add_credit(1)
    assert wire.sent == [barrier, batch, marker]  # the marker still follows its records
    assert in_flight_input([batch, marker, barrier], 3) == [batch]


def test_a_marker_frame_round_trips():
    marker = LatencyMarker(1_700_000_000_123, 12, 3)
    assert codec.decode(codec.encode_event(marker)) == marker


def test_an_output_sends_a_marker_on_one_channel_of_each_of_its_edges():
    wires = [[_Wire() for _ in range(count)] for count in (2, 3)]
    channels = [[OutputChannel(w) for w in edge_wires] for edge_wires in wires]  # type: ignore[arg-type]
    edges = [EdgeWriter(ForwardPartitioner(), edge_channels, 10) for edge_channels in channels]
    output = RecordWriterOutput(edges)
    output.emit_stream_status(StreamStatus.IDLE)  # idle holds watermarks back, not markers
    for wire in (w for edge_wires in wires for w in edge_wires):
        wire.sent.clear()
    for marked in range(1, 21):
        output.emit_latency_marker(LatencyMarker(marked, 0, 0))
    for edge_wires in wires:
        assert sorted(m.marked_time_ms for _, m in markers_on(edge_wires)) == list(range(1, 21))
    assert output.records == 0  # a marker is no record

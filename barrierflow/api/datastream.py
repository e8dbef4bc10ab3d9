"""DataStream, KeyedStream and DataStreamSink: the PyFlink-style pipeline API."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from barrierflow.api.datastream_sink import DataStreamSink, operator_parallelism
from barrierflow.api.python_dependencies import not_runnable
from barrierflow.connectors.base import Sink
from barrierflow.core.column_key import ColumnKey
from barrierflow.core.output_tag import OutputTag
from barrierflow.core.typeinfo import TypeInformation, check_type_info
from barrierflow.errors import JobDefinitionError
from barrierflow.graph.transformation import Transformation
from barrierflow.runtime.operators.field_aggregation import FieldAggregation
from barrierflow.runtime.operators.keyed import KeyedProcessOperator, KeyedReduceOperator
from barrierflow.runtime.operators.keyed_batch import KeyedBatchOperator
from barrierflow.runtime.operators.keyed_stateless import KeyedFilter, KeyedFlatMap, KeyedMap
from barrierflow.runtime.operators.map_batches import MapBatchesOperator
from barrierflow.runtime.operators.process import ProcessOperator
from barrierflow.runtime.operators.source_sink import SinkOperator
from barrierflow.runtime.operators.stateless import FilterOperator, FlatMapOperator, MapOperator
from barrierflow.runtime.operators.timestamps_and_watermarks import (
    TimestampsAndWatermarksOperator,
)
from barrierflow.runtime.partitioners import (
    BroadcastPartitioner,
    CustomPartitioner,
    ForwardPartitioner,
    KeyGroupStreamPartitioner,
    Partitioner,
    RebalancePartitioner,
    RescalePartitioner,
    ShufflePartitioner,
)

if TYPE_CHECKING:
    from barrierflow.api.all_windowed_stream import AllWindowedStream
    from barrierflow.api.broadcast_stream import BroadcastConnectedStream
    from barrierflow.api.connected_streams import ConnectedStreams
    from barrierflow.api.environment import StreamExecutionEnvironment
    from barrierflow.api.joins import CoGroupedStreams, IntervalJoin, JoinedStreams
    from barrierflow.api.windowed_stream import WindowedStream


class DataStream:
    """A stream of records; each method adds an operator and returns the new stream."""

    def __init__(self, env: StreamExecutionEnvironment, transformation: Transformation) -> None:
        self._env = env
        self._transformation = transformation

    # -- operators ---------------------------------------------------------------------------

    def map(self, func: Any, output_type: Any = None) -> DataStream:
        return self._add_operator("Map", MapOperator, func)._declare(output_type, "map")

    def flat_map(self, func: Any, output_type: Any = None) -> DataStream:
        flat_mapped = self._add_operator("FlatMap", FlatMapOperator, func)
        return flat_mapped._declare(output_type, "flat_map")

    def filter(self, func: Any) -> DataStream:
        return self._add_operator("Filter", FilterOperator, func)._declare(self._declared_type)

    def map_batches(self, func: Any, *, keep_event_time: bool = True) -> DataStream:
        """Run `func(pyarrow.RecordBatch) -> RecordBatch | Table | None` on each batch of
        records: a vectorized map, filter or projection with no Python work per record.

        barrierflow's own (Spark's `mapInArrow`, Ray's `map_batches`). Records read as
        Arrow stay Arrow; Python rows (dicts or NamedTuples) are converted with
        `pa.RecordBatch.from_pylist`. Records downstream that Python code reads are dicts.
        Event time: records that carry timestamps reach `func` with an int64 column
        `_timestamp`; the output's `_timestamp` column is its rows' event time (filter,
        sort and take keep it). An output without it keeps the input's timestamps row for
        row if it has as many rows (a map or projection), and is an error otherwise.
        `keep_event_time=False`: `func` sees no `_timestamp` column and the output rows
        carry no event time (for steps after which nothing needs it).

        >>> import pyarrow.compute as pc
        >>> from barrierflow import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> bids = env.from_collection([{"auction": 246, "price": 10}])
        >>> q2 = bids.map_batches(lambda b: b.filter(pc.equal(pc.remainder(b["auction"], 123), 0)))
        """
        return self._add_operator("MapBatches", MapBatchesOperator, func, keep_event_time)

    def process(self, func: Any, output_type: Any = None) -> DataStream:
        """Run a `ProcessFunction` on every record (timestamps, side outputs, clocks).

        >>> from barrierflow import StreamExecutionEnvironment
        >>> from barrierflow.functions import ProcessFunction
        >>> class Evens(ProcessFunction):
        ...     def process_element(self, value, ctx):
        ...         if value % 2 == 0:
        ...             yield value
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> _ = env.from_collection([1, 2, 3]).process(Evens()).print()
        >>> [v.name for v in env.get_job_graph().vertices]
        ['Collection -> Process -> Print']
        """
        return self._add_operator("Process", ProcessOperator, func)._declare(output_type, "process")

    def assign_timestamps_and_watermarks(self, watermark_strategy: Any) -> DataStream:
        """Re-assign timestamps and generate watermarks here, per subtask.

        Upstream watermarks are dropped (only the end-of-input maximum passes).

        >>> from barrierflow import StreamExecutionEnvironment, WatermarkStrategy
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> strategy = WatermarkStrategy.for_monotonous_timestamps().with_timestamp_assigner(
        ...     lambda value, record_timestamp: value * 1000
        ... )
        >>> _ = env.from_collection([1, 2]).assign_timestamps_and_watermarks(strategy).print()
        >>> [v.name for v in env.get_job_graph().vertices]
        ['Collection -> Timestamps/Watermarks -> Print']
        """
        from barrierflow.core.watermark_strategy import WatermarkStrategy

        if not isinstance(watermark_strategy, WatermarkStrategy):
            raise JobDefinitionError(
                f"assign_timestamps_and_watermarks needs a WatermarkStrategy, "
                f"got {watermark_strategy!r}"
            )
        return self._add_operator(
            "Timestamps/Watermarks", TimestampsAndWatermarksOperator, watermark_strategy
        )

    def union(self, *streams: DataStream) -> DataStream:
        """One stream of this stream's records and those of `streams` (any order between them).

        The operator that follows has one input; its watermark is the minimum over the
        channels of all the streams.

        >>> from barrierflow import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> a, b = env.from_collection([1, 2]), env.from_collection([3])
        >>> _ = a.union(b).map(str).print()
        >>> [v.name for v in env.get_job_graph().vertices]
        ['Collection', 'Collection', 'Map -> Print']
        """
        for stream in streams:
            if not isinstance(stream, DataStream):
                raise JobDefinitionError(f"union needs DataStreams, got {stream!r}")
            if stream._env is not self._env:
                raise JobDefinitionError("union needs streams of the same environment")
        transformation = Transformation(
            "union", "Union", [self._transformation, *(s._transformation for s in streams)]
        )
        self._env._add(transformation)
        return DataStream(self._env, transformation)

    def get_side_output(self, output_tag: OutputTag) -> DataStream:
        """The records this operator emitted to `output_tag` (`ctx.output(tag, value)`).

        The side output leaves the operator's chain over its own edge.

        >>> from barrierflow import OutputTag, StreamExecutionEnvironment
        >>> from barrierflow.functions import ProcessFunction
        >>> odd = OutputTag("odd")
        >>> class Split(ProcessFunction):
        ...     def process_element(self, value, ctx):
        ...         if value % 2:
        ...             ctx.output(odd, value)
        ...         else:
        ...             yield value
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> evens = env.from_collection([1, 2, 3]).process(Split())
        >>> _ = evens.print()
        >>> _ = evens.get_side_output(odd).map(str).print()
        >>> [v.name for v in env.get_job_graph().vertices]
        ['Collection -> Process -> Print', 'Map -> Print']
        """
        if not isinstance(output_tag, OutputTag):
            raise JobDefinitionError(f"get_side_output needs an OutputTag, got {output_tag!r}")
        producer = self._physical("get_side_output")
        transformation = Transformation(
            "side_output",
            f"SideOutput({output_tag.tag_id})",
            [producer],
            side_output=output_tag.tag_id,
        )
        self._env._add(transformation)
        return DataStream(self._env, transformation)

    def connect(self, other: Any) -> ConnectedStreams | BroadcastConnectedStream:
        """This stream and `other` into one two-input operator (`process`, `map`,
        `flat_map`); see `ConnectedStreams`; a `BroadcastStream`: see its module."""
        from barrierflow.api import broadcast_stream
        from barrierflow.api.connected_streams import ConnectedStreams

        if isinstance(other, broadcast_stream.BroadcastStream):
            return broadcast_stream.BroadcastConnectedStream(self, other, other.descriptors)
        if not isinstance(other, DataStream):
            raise JobDefinitionError(f"connect needs a DataStream, got {other!r}")
        return ConnectedStreams(self, other)

    def join(self, other: DataStream) -> JoinedStreams:
        """A window join: `.where(k1).equal_to(k2).window(assigner).apply(join_function)`."""
        from barrierflow.api.joins import JoinedStreams

        return JoinedStreams(self, other)

    def co_group(self, other: DataStream) -> CoGroupedStreams:
        """A window co-group: `.where(k1).equal_to(k2).window(assigner).apply(co_group_fn)`."""
        from barrierflow.api.joins import CoGroupedStreams

        return CoGroupedStreams(self, other)

    def window_all(self, window_assigner: Any) -> AllWindowedStream:
        """Windows over all records of this stream, evaluated in one subtask."""
        from barrierflow.api.all_windowed_stream import AllWindowedStream

        return AllWindowedStream(self, window_assigner)

    def key_by(self, key_selector: Any, key_type: Any = None) -> KeyedStream:
        """Partition by key: `key_selector` is a function of the record, a `KeySelector`,
        or a column name (`key_by("auction")`: `row["auction"]` of a dict, `row.auction`
        of anything else; columnar batches are routed by hashing the Arrow column)."""
        if isinstance(key_selector, str):
            key_selector = ColumnKey(key_selector)
        if not callable(key_selector) and not hasattr(key_selector, "get_key"):
            raise JobDefinitionError(
                f"key_by needs a callable or KeySelector, got {key_selector!r}"
            )
        partitioner = KeyGroupStreamPartitioner(key_selector, self._env.get_max_parallelism())
        keyed = KeyedStream(self._env, self._partition(partitioner), key_selector)
        return keyed._declare(self._declared_type)  # type: ignore[return-value]

    # -- partitioning --------------------------------------------------------------------------

    def rebalance(self) -> DataStream:
        return DataStream(self._env, self._partition(RebalancePartitioner()))

    def broadcast(self, broadcast_state_descriptor: Any = None, *others: Any) -> Any:
        """Every record to every subtask of the next operator; given `MapStateDescriptor`s,
        a `BroadcastStream` with those broadcast states (api/broadcast_stream.py)."""
        stream = DataStream(self._env, self._partition(BroadcastPartitioner()))
        if broadcast_state_descriptor is None:
            return stream
        from barrierflow.api.broadcast_stream import BroadcastStream

        return BroadcastStream(stream, [broadcast_state_descriptor, *others])

    def forward(self) -> DataStream:
        return DataStream(self._env, self._partition(ForwardPartitioner()))

    def shuffle(self) -> DataStream:
        """Each record to a uniformly random subtask of the next operator."""
        return DataStream(self._env, self._partition(ShufflePartitioner()))

    def rescale(self) -> DataStream:
        """Round-robin to the next operator's subtasks. On Spark there is no local subset of
        them to prefer (every channel is a TCP connection), so it is `rebalance()`."""
        return DataStream(self._env, self._partition(RescalePartitioner()))

    def partition_custom(self, partitioner: Any, key_selector: Any) -> DataStream:
        """Each record to subtask `partitioner.partition(key, num_partitions)` of the next
        operator, `key` being `key_selector`'s (a `Partitioner` or a function of the two).
        A partition outside 0..num_partitions-1 fails the job, naming it.

        >>> from barrierflow import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> _ = env.from_collection([1, 2, 3]).partition_custom(lambda k, n: k % n, lambda v: v)
        """
        if not callable(partitioner) and not callable(getattr(partitioner, "partition", None)):
            raise JobDefinitionError(
                "partition_custom needs a Partitioner or a function (key, num_partitions) -> "
                f"int, got {partitioner!r}"
            )
        if not callable(key_selector) and not hasattr(key_selector, "get_key"):
            raise JobDefinitionError(
                f"partition_custom needs a callable or KeySelector, got {key_selector!r}"
            )
        custom = CustomPartitioner(partitioner, key_selector)
        return DataStream(self._env, self._partition(custom))

    # -- properties of the last operator ---------------------------------------------------------

    def uid(self, uid: str) -> DataStream:
        """A stable id for this operator's state in checkpoints and savepoints."""
        if not isinstance(uid, str) or not uid:
            raise JobDefinitionError(f"uid must be a non-empty string, got {uid!r}")
        self._physical("uid").uid = uid
        return self

    def name(self, name: str) -> DataStream:
        self._physical("name").name = name
        return self

    def with_dead_letters(self, enabled: bool = True) -> DataStream:
        """A record for which this operator's user function raises (a map, flat_map, filter,
        process or reduce) leaves as a `DeadLetter` (the operator, the record, the error) on
        the `DEAD_LETTERS` side output instead of failing the job; the other records go on.

        Dead letters are ordinary output: exactly once like any record. Without it, such a
        record fails the job, and after `CheckpointConfig.set_repeated_failure_limit`
        (3) failures in a row at it, the job stops restarting.

        >>> from barrierflow import StreamExecutionEnvironment
        >>> from barrierflow.connectors.base import DEAD_LETTERS
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> numbers = env.from_collection(["1", "x", "3"]).map(int).with_dead_letters()
        >>> _ = numbers.print()
        >>> _ = numbers.get_side_output(DEAD_LETTERS).map(lambda d: d.as_dict()).print()
        """
        transformation = self._physical("with_dead_letters")
        operator = transformation.operator_class
        if not getattr(operator, "supports_dead_letters", False):
            raise JobDefinitionError(
                f"with_dead_letters() applies to a map, flat_map, filter, process or reduce, "
                f"not to '{transformation.name}' (a source takes it on the source: "
                "FileSource.with_dead_letters())"
            )
        transformation.operator_options["dead_letters"] = bool(enabled)
        return self

    def get_name(self) -> str:
        return self._transformation.name

    def start_new_chain(self) -> DataStream:
        """Begin a new chain at this operator: it runs in its own stream task, fed over a
        channel, instead of in its upstream's (the operators after it may chain to it)."""
        self._physical("start_new_chain").chaining = "head"
        return self

    def disable_chaining(self) -> DataStream:
        """Run this operator in a stream task of its own: nothing chains to it or from it."""
        self._physical("disable_chaining").chaining = "never"
        return self

    def slot_sharing_group(self, slot_sharing_group: Any) -> DataStream:
        """Accepted and kept as a name (a str, or a `SlotSharingGroup`'s `get_name()`).

        In Flink, operators of one group may share a TaskManager slot. On Spark each subtask
        (a chain of operators) is one Spark task of the job's barrier stage and takes one
        task slot of its own (`spark.task.cpus` cores); Spark places the tasks, and there is
        nothing to share or separate, so the group changes nothing."""
        name = getattr(slot_sharing_group, "get_name", None)
        name = name() if callable(name) else slot_sharing_group
        if not isinstance(name, str) or not name:
            raise JobDefinitionError(
                f"slot_sharing_group needs a non-empty name, got {slot_sharing_group!r}"
            )
        self._physical("slot_sharing_group").slot_sharing_group = name
        return self

    def set_max_parallelism(self, max_parallelism: int) -> DataStream:
        """The upper bound of this operator's parallelism: a parallelism above it is refused
        when the job is built. Its key groups stay the job's (`env.set_max_parallelism`):
        barrierflow's checkpoints keep one key-group count per job."""
        value = operator_parallelism(max_parallelism)
        if value > 32768:
            raise JobDefinitionError(f"max parallelism must be <= 32768, got {value}")
        self._physical("set_max_parallelism").max_parallelism = value
        return self

    def set_parallelism(self, parallelism: int) -> DataStream:
        """This operator's parallelism; above the environment's and the command line's."""
        self._physical("set_parallelism").parallelism = operator_parallelism(parallelism)
        return self

    # -- sinks ---------------------------------------------------------------------------------

    def execute_and_collect(
        self, job_execution_name: str | None = None, limit: int | None = None
    ) -> Any:
        """Run the job and read this stream's records back: an iterator to use in a `with`
        block (closing it early cancels the job), or with `limit` a list of the first
        `limit` records. Records arrive exactly once as checkpoints complete (api/collect.py)."""
        from barrierflow.api.collect import execute_and_collect

        return execute_and_collect(self, job_execution_name, limit)

    def add_sink(self, sink_func: Any) -> DataStreamSink:
        """PyFlink's `add_sink`: `sink_to` for a barrierflow `Sink`; a SinkFunction is refused."""
        if not isinstance(sink_func, Sink):
            raise JobDefinitionError(not_runnable("add_sink", "Sink (FileSink, ...)", sink_func))
        return self.sink_to(sink_func)

    def sink_to(self, sink: Sink) -> DataStreamSink:
        if not isinstance(sink, Sink):
            raise JobDefinitionError(f"sink_to needs a Sink, got {sink!r}")
        if self._declared_type is not None and hasattr(sink, "with_declared_type"):
            sink = sink.with_declared_type(self._declared_type)  # file_system.FileSink
        transformation = Transformation(
            "sink",
            "Sink",
            [self._transformation],
            operator_class=SinkOperator,
            operator_args=(sink,),
            sink=sink,
        )
        self._env._add(transformation)
        return DataStreamSink(transformation)

    def print(self, sink_identifier: str | None = None) -> DataStreamSink:
        from barrierflow.connectors.print_sink import PrintSink

        sink = self.sink_to(PrintSink(sink_identifier, self._declared_type))
        sink.name("Print")
        return sink

    # -- internals -------------------------------------------------------------------------------

    _declared_type: TypeInformation | None = None  # output_type=/type_info=: used by print()

    def _declare(self, type_info: Any, method: str = "") -> DataStream:
        if type_info is not None:
            self._declared_type = check_type_info(type_info, f"{method}'s declared type")
        return self

    def _add_operator(self, name: str, operator_class: type, *args: Any) -> DataStream:
        transformation = Transformation(
            "operator",
            name,
            [self._transformation],
            operator_class=operator_class,
            operator_args=args,
        )
        self._env._add(transformation)
        return DataStream(self._env, transformation)

    def _partition(self, partitioner: Partitioner) -> Transformation:
        upstream = self._crossing()._transformation
        transformation = Transformation(
            "partition", partitioner.name, [upstream], partitioner=partitioner
        )
        self._env._add(transformation)
        return transformation

    def _crossing(self) -> DataStream:
        """This stream as PyFlink's records leave a chain of Python functions: a record
        declared with a `Types.FLOAT()` goes through its 4-byte coder there, so a map
        narrows it before a partitioning (core/typeinfo.py; a source already did)."""
        declared = self._declared_type
        if (
            declared is None
            or not declared.narrows_floats()
            or self._transformation.kind == "source"
        ):
            return self
        return self._add_operator("Float32", MapOperator, declared.conform)

    def _physical(self, method: str) -> Transformation:
        if self._transformation.is_virtual:
            raise JobDefinitionError(
                f"{method}() applies to an operator; after key_by/rebalance/broadcast/union/"
                "get_side_output there is none yet - call it on the operator that follows"
            )
        return self._transformation


class KeyedStream(DataStream):
    """A stream partitioned by key: keyed state and keyed operators become available."""

    def __init__(
        self, env: StreamExecutionEnvironment, transformation: Transformation, key_selector: Any
    ) -> None:
        super().__init__(env, transformation)
        self._key_selector = key_selector

    def reduce(self, func: Any) -> DataStream:
        reduced = self._add_operator("Reduce", KeyedReduceOperator, self._key_selector, func)
        return reduced._declare(self._declared_type)

    def map(self, func: Any, output_type: Any = None) -> DataStream:
        """`map` whose function may use keyed state (`runtime_context.get_state(...)` in its
        `open`), scoped to each record's key, as in PyFlink."""
        return self._keyed_function("Map", KeyedMap(func))._declare(output_type, "map")

    def flat_map(self, func: Any, output_type: Any = None) -> DataStream:
        """`flat_map` whose function may use keyed state (see `map`)."""
        return self._keyed_function("FlatMap", KeyedFlatMap(func))._declare(output_type, "flat_map")

    def filter(self, func: Any) -> DataStream:
        """`filter` whose function may use keyed state (see `map`)."""
        return self._keyed_function("Filter", KeyedFilter(func))._declare(self._declared_type)

    def sum(self, position_to_sum: int | str = 0) -> DataStream:
        """The running sum of one field per key; the other fields are the key's first
        record's (PyFlink's). The field is a position or a name (Rows, dicts, objects).

        >>> from barrierflow import StreamExecutionEnvironment
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> _ = env.from_collection([("a", 1), ("a", 2)]).key_by(lambda r: r[0]).sum(1).print()
        """
        return self._aggregate("sum", position_to_sum)

    def min(self, position_to_min: int | str = 0) -> DataStream:
        """The running minimum of one field per key, other fields from the key's first
        record; `min_by` keeps the whole record with the minimum instead."""
        return self._aggregate("min", position_to_min)

    def max(self, position_to_max: int | str = 0) -> DataStream:
        """The running maximum of one field per key (see `min`)."""
        return self._aggregate("max", position_to_max)

    def min_by(self, position_to_min_by: int | str = 0) -> DataStream:
        """The record with the smallest field so far per key (the earliest on a tie)."""
        return self._aggregate("min_by", position_to_min_by)

    def max_by(self, position_to_max_by: int | str = 0) -> DataStream:
        """The record with the largest field so far per key (the earliest on a tie)."""
        return self._aggregate("max_by", position_to_max_by)

    def _aggregate(self, kind: str, position: int | str) -> DataStream:
        if isinstance(position, bool) or not isinstance(position, (int, str)):
            raise JobDefinitionError(
                f"{kind} needs a field position (int) or name (str), got {position!r}"
            )
        aggregation = FieldAggregation(kind, position)
        name = "".join(part.capitalize() for part in kind.split("_"))
        aggregated = self._add_operator(name, KeyedReduceOperator, self._key_selector, aggregation)
        return aggregated._declare(self._declared_type)  # records keep their type

    def _keyed_function(self, name: str, function: Any) -> DataStream:
        return self._add_operator(name, KeyedProcessOperator, self._key_selector, function)

    def process(self, func: Any, output_type: Any = None) -> DataStream:
        op = self._add_operator("KeyedProcess", KeyedProcessOperator, self._key_selector, func)
        return op._declare(output_type, "process")

    def process_batches(self, func: Any) -> DataStream:
        """Run a `KeyedBatchFunction` once per batch: `func.process_batch(batch, keys, ctx)`
        gets the batch (a `pyarrow.RecordBatch` when the records are columnar, else the
        list of records) and its keys, and reads and writes the state of all of them in a
        few calls (`runtime_context.get_batch_state(descriptor)`: `get_many`, `put_many`,
        `remove_many`). barrierflow's own; keyed by a column (`key_by("bidder")`) the keys
        come from the Arrow column without a Python call per record.

        >>> from barrierflow import StreamExecutionEnvironment
        >>> from barrierflow.functions import KeyedBatchFunction
        >>> from barrierflow.state import ValueStateDescriptor
        >>> class Count(KeyedBatchFunction):
        ...     def open(self, runtime_context):
        ...         self.counts = runtime_context.get_batch_state(ValueStateDescriptor("n"))
        ...     def process_batch(self, batch, keys, ctx):
        ...         seen = {}
        ...         for key in keys:
        ...             seen[key] = seen.get(key, 0) + 1
        ...         distinct = list(seen)
        ...         old = self.counts.get_many(distinct)
        ...         new = [(o or 0) + seen[k] for k, o in zip(distinct, old)]
        ...         self.counts.put_many(distinct, new)
        ...         return list(zip(distinct, new))
        >>> env = StreamExecutionEnvironment.get_execution_environment()
        >>> words = env.from_collection([{"word": "a"}, {"word": "b"}, {"word": "a"}])
        >>> _ = words.key_by("word").process_batches(Count()).print()
        """
        return self._add_operator(
            "KeyedProcessBatches", KeyedBatchOperator, self._key_selector, func
        )

    def window(self, window_assigner: Any) -> WindowedStream:
        """Cut each key's records into windows (`barrierflow.window` assigners); a window
        function (`reduce`, `aggregate`, `process`, `apply`) completes it."""
        from barrierflow.api.windowed_stream import WindowedStream

        return WindowedStream(self, window_assigner)

    def count_window(self, size: int, slide: int = 0) -> WindowedStream:
        """Tumbling (`slide` 0) or sliding count windows of `size` elements per key
        (`barrierflow.window.CountTumblingWindowAssigner` / `CountSlidingWindowAssigner`,
        PyFlink's semantics: a window fires once it holds `size` elements)."""
        from barrierflow.api.windowed_stream import WindowedStream
        from barrierflow.core.windows.count_assigners import (
            CountSlidingWindowAssigner,
            CountTumblingWindowAssigner,
        )

        if slide == 0:
            return WindowedStream(self, CountTumblingWindowAssigner(size))
        return WindowedStream(self, CountSlidingWindowAssigner(size, slide))

    def interval_join(self, other: KeyedStream) -> IntervalJoin:
        """Join with `other` on equal keys and `left.ts + lower <= right.ts <= left.ts + upper`:
        `.between(lower, upper).process(ProcessJoinFunction)`."""
        from barrierflow.api.joins import IntervalJoin

        if not isinstance(other, KeyedStream):
            raise JobDefinitionError(f"interval_join needs a KeyedStream, got {other!r}")
        return IntervalJoin(self, other)

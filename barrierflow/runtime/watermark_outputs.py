"""How a source combines the watermarks of its splits (Flink's WatermarkOutputMultiplexer).

Pure logic (DESIGN §6): each split a source subtask reads gets its own watermark
generator, and the subtask's watermark is the minimum over its splits. The source
operator feeds the multiplexer records (`on_event`) and the periodic tick
(`on_periodic_emit`), and forwards what comes out to its output.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

from barrierflow.core.watermark_strategy import WatermarkGenerator, WatermarkOutput
from barrierflow.runtime.elements import MAX_WATERMARK, StreamStatus, Watermark
from barrierflow.runtime.watermarks import MIN_WATERMARK, StatusWatermarkOutput

__all__ = ["SplitWatermarkMultiplexer"]


class _Split(WatermarkOutput):
    """One live split: its generator, and the `WatermarkOutput` that generator writes to."""

    __slots__ = ("_multiplexer", "generator", "idle", "waiting", "watermark")

    def __init__(
        self, multiplexer: SplitWatermarkMultiplexer, generator: WatermarkGenerator, waiting: bool
    ):
        self._multiplexer = multiplexer
        self.generator = generator
        self.watermark = MIN_WATERMARK
        self.idle = False
        self.waiting = waiting
        """Not read yet by a reader that reads its splits in turn: holds nothing back."""

    # A finished split is no longer among the multiplexer's splits: whatever its
    # generator still emits changes nothing.

    def emit_watermark(self, watermark: Watermark) -> None:
        # Emitting a watermark also ends idleness (Flink's WatermarkOutput contract).
        changed = self.idle or watermark.timestamp > self.watermark
        self.idle = False
        if watermark.timestamp > self.watermark:
            self.watermark = watermark.timestamp
        if changed:
            self._multiplexer._split_changed()

    def mark_idle(self) -> None:
        if not self.idle:
            self.idle = True
            self._multiplexer._split_changed()

    def mark_active(self) -> None:
        if self.idle:
            self.idle = False
            self._multiplexer._split_changed()


class SplitWatermarkMultiplexer:
    """Combines one watermark generator per source split into the source's watermark.

    Mailbox thread only. Guarantees that the watermarks it emits strictly increase and that
    the IDLE and ACTIVE it emits alternate, starting with IDLE (the source starts ACTIVE),
    each only when it changes. The source's watermark is the minimum over its live splits
    that are not idle; the source is idle only when every live split is. A split registered
    `waiting` (a reader reading its splits in turn has not begun it: its records all come
    after those of the splits before it) holds nothing back and is not idle until its first
    record; while only such splits are live the source is at the greatest watermark a
    finished split reached (its generator's last periodic emit comes as it finishes). A
    finished split no longer holds the watermark back, and once every registered split has
    finished the watermark becomes `MAX_WATERMARK`: so assumes no split is registered after
    that (a source that is assigned splits one at a time should finish the last one only at
    the end of its input). With no split registered, nothing is emitted. Built with
    `bounded=False` (a source that keeps discovering splits, such as a monitored folder), it
    never reaches `MAX_WATERMARK` on its own: once every registered split has finished it is
    idle, and a split registered later makes it active again.

    A watermark emitted from `on_event` counts at once; those emitted from
    `on_periodic_emit` are combined after every split has had its turn, so one tick
    emits at most one watermark. Watermarks are not checkpointed (as in Flink): after a
    restore, splits start again from `MIN_WATERMARK`.

    >>> from barrierflow.core.time import Duration
    >>> from barrierflow.core.watermark_strategy import WatermarkStrategy
    >>> class Print:
    ...     def emit_watermark(self, watermark): print(watermark)
    ...     def emit_stream_status(self, status): print(status)
    >>> strategy = WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_millis(100))
    >>> source = SplitWatermarkMultiplexer(strategy.create_watermark_generator, Print())
    >>> source.register_split("part-0")
    >>> source.register_split("part-1")
    >>> source.on_event("part-0", "a", 1_000)
    >>> source.on_event("part-1", "b", 2_000)
    >>> source.on_periodic_emit()
    Watermark(timestamp=899)
    >>> source.finish_split("part-0")
    Watermark(timestamp=1899)
    >>> source.finish_split("part-1")
    Watermark(timestamp=9223372036854775807)
    """

    def __init__(
        self,
        create_generator: Callable[[], WatermarkGenerator],
        output: StatusWatermarkOutput,
        *,
        bounded: bool = True,
    ) -> None:
        """`create_generator` makes the generator of each new split: the strategy's
        `create_watermark_generator`, given the task's clock if the strategy has idleness.
        `bounded=False`: splits keep coming, so all finished means idle, not the end."""
        self._create_generator = create_generator
        self._output = output
        self._bounded = bounded
        self._splits: dict[Hashable, _Split] = {}
        self._finished: set[Hashable] = set()
        self._finished_watermark = MIN_WATERMARK
        """The greatest final watermark of a finished split: what the source may emit while
        only waiting splits are live (a split read in one batch never had a periodic emit)."""
        self._last_output_watermark = MIN_WATERMARK
        self._idle = False
        self._deferring = False

    @property
    def last_output_watermark(self) -> int:
        """The source's last emitted watermark (`MIN_WATERMARK` before the first)."""
        return self._last_output_watermark

    @property
    def is_idle(self) -> bool:
        """Whether the source's last emitted status is IDLE."""
        return self._idle

    @property
    def live_splits(self) -> list[Hashable]:
        """The registered splits that have not finished, in registration order."""
        return list(self._splits)

    def register_split(self, split_id: Hashable, waiting: bool = False) -> None:
        """Start tracking a split; it holds the watermark back until it emits one or idles
        (`waiting`: only from its first record on)."""
        if split_id in self._splits or split_id in self._finished:
            raise ValueError(f"split {split_id!r} is already registered")
        if self._last_output_watermark == MAX_WATERMARK:
            raise ValueError(
                f"cannot register split {split_id!r}: every split had finished and the "
                "source already emitted MAX_WATERMARK"
            )
        self._splits[split_id] = _Split(self, self._create_generator(), waiting)
        if self._idle:
            self._combine_and_emit()  # a new split is active: the source is no longer idle

    def finish_split(self, split_id: Hashable) -> None:
        """The split's input ended: it no longer holds the watermark back. Its generator
        emits once more first, which counts while only waiting splits are left."""
        split = self._live_split(split_id, "finish")
        if not split.waiting:
            self._let_generators_emit([split])
            self._finished_watermark = max(self._finished_watermark, split.watermark)
        del self._splits[split_id]
        self._finished.add(split_id)
        self._combine_and_emit()

    def on_event(self, split_id: Hashable, record: Any, timestamp: int) -> None:
        """Feed one record of a split, with the timestamp the assigner gave it."""
        split = self._splits.get(split_id)
        if split is None:
            split = self._live_split(split_id, "read")
        if split.waiting:  # begun: from now on it holds the watermark back
            split.waiting = False
        split.generator.on_event(record, timestamp, split)

    def on_periodic_emit(self) -> None:
        """Let every live split's generator emit (a waiting split's has seen nothing), then
        emit the combined result once."""
        self._let_generators_emit([s for s in self._splits.values() if not s.waiting])
        self._combine_and_emit()

    def _let_generators_emit(self, splits: list[_Split]) -> None:
        """The periodic emit of each of `splits`' generators, not yet combined."""
        self._deferring = True
        try:
            for split in splits:
                split.generator.on_periodic_emit(split)
        finally:
            self._deferring = False

    def _live_split(self, split_id: Hashable, verb: str) -> _Split:
        split = self._splits.get(split_id)
        if split is None:
            state = "has finished" if split_id in self._finished else "is not registered"
            raise KeyError(f"cannot {verb} split {split_id!r}: it {state}")
        return split

    def _split_changed(self) -> None:
        if not self._deferring:
            self._combine_and_emit()

    def _combine_and_emit(self) -> None:
        if self._splits:
            splits = self._splits.values()
            active = [split.watermark for split in splits if not split.idle and not split.waiting]
            if not active and any(split.waiting for split in splits):
                # between splits read in turn: not idle; what the finished ones reached
                active = [self._finished_watermark]
            if not active:
                if not self._idle:
                    self._idle = True
                    self._output.emit_stream_status(StreamStatus.IDLE)
                return
            watermark = min(active)
        elif self._finished and self._bounded:
            watermark = MAX_WATERMARK
        elif self._finished:
            if not self._idle:  # unbounded: waits for new splits, holding nothing back
                self._idle = True
                self._output.emit_stream_status(StreamStatus.IDLE)
            return
        else:
            return  # no split registered yet: nothing to say
        if self._idle:
            self._idle = False
            self._output.emit_stream_status(StreamStatus.ACTIVE)
        if watermark > self._last_output_watermark:
            self._last_output_watermark = watermark
            self._output.emit_watermark(Watermark(watermark))

"""IntervalJoinLogic: Flink's `IntervalJoinOperator` as pure logic over two keyed inputs.

Mailbox thread only. For every key the logic keeps a left and a right buffer of
elements by timestamp. It joins a left element at time l with every right element
of the same key at time r such that

    l + lower_bound <= r <= l + upper_bound    (either bound may be exclusive)

and emits what the `ProcessJoinFunction` returns for the pair, at max(l, r).

Rules, all Flink's:

- An element is joined with the other side's buffer and then buffered itself, so each
  matching pair is found exactly once, by whichever element arrives second.
- An element is late when its timestamp is below the current watermark; it is neither
  joined nor buffered, and comes back as a `LateRecord` (the adapter sends it to the
  late-data side output or drops and counts it).
- Cleanup: a left element at l can still match while the watermark is below
  l + upper_bound, a right element at r while it is below r - lower_bound; so each
  buffered timestamp gets a cleanup timer at that time (at the element's own time when
  the bound is not positive), and `on_watermark` removes the buffers whose timers are
  due. With a watermark that honours its contract (no element at or below it follows),
  cleanup never loses a match.

Exclusive bounds are moved by one millisecond once, on construction: (a, b] is [a+1, b].

State is plain data per key (`snapshot`/`restore`): the two buffers as sorted
[timestamp, [values...]] lists. Timers are not stored: every buffered timestamp has
exactly one, so `restore` rebuilds them (key groups are the adapter's business).

>>> join = IntervalJoinLogic(-2, 1, process_join_function=lambda left, right, ctx: [(left, right)])
>>> join.process_left("k", "L5", 5, watermark=MIN_WATERMARK)
[]
>>> join.process_right("k", "R4", 4, watermark=MIN_WATERMARK)      # 5 - 2 <= 4 <= 5 + 1
[JoinedRecord(value=('L5', 'R4'), timestamp=5)]
>>> join.process_right("k", "R7", 7, watermark=MIN_WATERMARK)      # 7 > 5 + 1: no match
[]
>>> join.on_watermark(6)                 # L5 can match up to 6: cleaned; R4 up to 6 too
>>> join.buffered_timestamps("k")
([], [7])
>>> join.process_left("k", "L3", 3, watermark=6)
[LateRecord(side=<JoinSide.LEFT: 'left'>, value='L3', timestamp=3)]
"""

from __future__ import annotations

import bisect
import enum
import heapq
import itertools
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from barrierflow.core.join_functions import ProcessJoinFunction, as_process_join, outputs_of
from barrierflow.core.time import Duration, to_millis
from barrierflow.errors import ConfigurationError, StateRestoreError

__all__ = [
    "MIN_WATERMARK",
    "IntervalJoinLogic",
    "JoinSide",
    "JoinedRecord",
    "LateRecord",
]

MIN_WATERMARK = -(2**63)
"""The watermark before any has arrived (Flink's Long.MIN_VALUE): nothing is late."""


class JoinSide(enum.Enum):
    """Which input of a two-input join an element came from."""

    LEFT = "left"
    """The first input: the stream `interval_join` was called on."""
    RIGHT = "right"
    """The second input: the stream passed to `interval_join`."""


@dataclass(frozen=True, slots=True)
class JoinedRecord:
    """One output of the join function, at the timestamp of its pair."""

    value: Any
    timestamp: int


@dataclass(frozen=True, slots=True)
class LateRecord:
    """An input element that arrived below the watermark: not joined, not buffered."""

    side: JoinSide
    value: Any
    timestamp: int


class _PairContext(ProcessJoinFunction.Context):
    """The context handed to the join function; reused for every pair."""

    __slots__ = ("left_timestamp", "right_timestamp", "timestamp")

    def __init__(self) -> None:
        self.left_timestamp = MIN_WATERMARK
        self.right_timestamp = MIN_WATERMARK
        self.timestamp = MIN_WATERMARK

    def get_left_timestamp(self) -> int:
        return self.left_timestamp

    def get_right_timestamp(self) -> int:
        return self.right_timestamp

    def get_timestamp(self) -> int:
        return self.timestamp


class _Buffer:
    """One side of one key: values by timestamp, with the timestamps kept sorted."""

    __slots__ = ("by_timestamp", "timestamps")

    def __init__(self) -> None:
        self.by_timestamp: dict[int, list[Any]] = {}
        self.timestamps: list[int] = []

    def add(self, timestamp: int, value: Any) -> bool:
        """Buffer a value; True if its timestamp is new to this buffer."""
        bucket = self.by_timestamp.get(timestamp)
        if bucket is not None:
            bucket.append(value)
            return False
        self.by_timestamp[timestamp] = [value]
        bisect.insort(self.timestamps, timestamp)
        return True

    def remove(self, timestamp: int) -> None:
        if self.by_timestamp.pop(timestamp, None) is not None:
            del self.timestamps[bisect.bisect_left(self.timestamps, timestamp)]

    def between(self, low: int, high: int) -> Iterable[tuple[int, list[Any]]]:
        """The buckets with low <= timestamp <= high, in timestamp order."""
        start = bisect.bisect_left(self.timestamps, low)
        end = bisect.bisect_right(self.timestamps, high)
        for timestamp in self.timestamps[start:end]:
            yield timestamp, self.by_timestamp[timestamp]

    def __bool__(self) -> bool:
        return bool(self.timestamps)


class _KeyState:
    __slots__ = ("left", "right")

    def __init__(self) -> None:
        self.left = _Buffer()
        self.right = _Buffer()

    def side(self, side: JoinSide) -> _Buffer:
        return self.left if side is JoinSide.LEFT else self.right


def interval_bounds(lower_bound: int | Duration, upper_bound: int | Duration) -> tuple[int, int]:
    """The bounds in milliseconds; a lower bound above the upper one is refused."""
    lower = to_millis(lower_bound, "lower_bound")
    upper = to_millis(upper_bound, "upper_bound")
    if lower > upper:
        raise ConfigurationError(
            f"an interval join needs lower_bound <= upper_bound, got {lower} > {upper}"
        )
    return lower, upper


class IntervalJoinLogic:
    """Joins two keyed inputs on `left + lower <= right <= left + upper`, Flink's way.

    Mailbox thread only. Guarantees each pair of non-late elements within the bounds is
    passed to the join function exactly once, if the watermark honours its contract;
    assumes keys are hashable and timestamps are ints (ms).
    """

    def __init__(
        self,
        lower_bound: int | Duration,
        upper_bound: int | Duration,
        lower_inclusive: bool = True,
        upper_inclusive: bool = True,
        process_join_function: Any = None,
    ) -> None:
        lower, upper = interval_bounds(lower_bound, upper_bound)
        if process_join_function is None:
            raise ConfigurationError("an interval join needs a ProcessJoinFunction")
        self._process = as_process_join(process_join_function)
        # Shift exclusive bounds once, so the checks below are all inclusive.
        self.lower_bound = lower if lower_inclusive else lower + 1
        self.upper_bound = upper if upper_inclusive else upper - 1
        self._keys: dict[Hashable, _KeyState] = {}
        self._timers: list[tuple[int, int, Hashable, JoinSide, int]] = []
        """Cleanup timers: (time, tie-breaker, key, side, buffered timestamp), a heap."""
        self._timer_set: set[tuple[Hashable, JoinSide, int]] = set()
        self._tie_breaker = itertools.count()
        self._context = _PairContext()
        self.current_watermark = MIN_WATERMARK
        """The greatest watermark passed to `on_watermark`."""

    # ---- input ---------------------------------------------------------------------------------

    def process_left(
        self, key: Hashable, value: Any, timestamp: int | None, watermark: int | None = None
    ) -> list[JoinedRecord | LateRecord]:
        """One element of the left input; `watermark` is the operator's current one
        (None: the last one given to `on_watermark`)."""
        return self._process_element(JoinSide.LEFT, key, value, timestamp, watermark)

    def process_right(
        self, key: Hashable, value: Any, timestamp: int | None, watermark: int | None = None
    ) -> list[JoinedRecord | LateRecord]:
        """One element of the right input; see `process_left`."""
        return self._process_element(JoinSide.RIGHT, key, value, timestamp, watermark)

    def _process_element(
        self,
        side: JoinSide,
        key: Hashable,
        value: Any,
        timestamp: int | None,
        watermark: int | None,
    ) -> list[JoinedRecord | LateRecord]:
        if timestamp is None or timestamp == MIN_WATERMARK:
            raise ValueError(
                "elements of an interval join need timestamps: assign them with a "
                f"WatermarkStrategy (got {value!r} without one)"
            )
        current = self.current_watermark if watermark is None else watermark
        if current != MIN_WATERMARK and timestamp < current:
            return [LateRecord(side, value, timestamp)]

        state = self._keys.get(key)
        if state is None:
            state = self._keys[key] = _KeyState()
        is_left = side is JoinSide.LEFT
        # The other side's window, relative to this element: for a right element r the
        # lefts l with l + lower <= r <= l + upper, i.e. r - upper <= l <= r - lower.
        relative_lower = self.lower_bound if is_left else -self.upper_bound
        relative_upper = self.upper_bound if is_left else -self.lower_bound

        state.side(side).add(timestamp, value)
        outputs: list[JoinedRecord | LateRecord] = []
        other = state.right if is_left else state.left
        for other_timestamp, others in other.between(
            timestamp + relative_lower, timestamp + relative_upper
        ):
            for other_value in others:
                if is_left:
                    self._join(value, other_value, timestamp, other_timestamp, outputs)
                else:
                    self._join(other_value, value, other_timestamp, timestamp, outputs)

        self._register_cleanup(key, side, timestamp, self.cleanup_time(side, timestamp))
        return outputs

    def _join(
        self,
        left: Any,
        right: Any,
        left_timestamp: int,
        right_timestamp: int,
        outputs: list[JoinedRecord | LateRecord],
    ) -> None:
        timestamp = max(left_timestamp, right_timestamp)
        context = self._context
        context.left_timestamp = left_timestamp
        context.right_timestamp = right_timestamp
        context.timestamp = timestamp
        for output in outputs_of(self._process(left, right, context)):
            outputs.append(JoinedRecord(output, timestamp))

    # ---- cleanup -------------------------------------------------------------------------------

    def cleanup_time(self, side: JoinSide, timestamp: int) -> int:
        """When the buffered elements of `side` at `timestamp` can no longer match."""
        relative_upper = self.upper_bound if side is JoinSide.LEFT else -self.lower_bound
        return timestamp + relative_upper if relative_upper > 0 else timestamp

    def _register_cleanup(
        self, key: Hashable, side: JoinSide, timestamp: int, cleanup_time: int
    ) -> None:
        timer = (key, side, timestamp)
        if timer in self._timer_set:
            return
        self._timer_set.add(timer)
        heapq.heappush(self._timers, (cleanup_time, next(self._tie_breaker), key, side, timestamp))

    def on_watermark(self, watermark: int) -> None:
        """Event time reached `watermark`: drop every buffer whose cleanup time is due."""
        self.current_watermark = max(self.current_watermark, watermark)
        timers = self._timers
        while timers and timers[0][0] <= watermark:
            _, _, key, side, timestamp = heapq.heappop(timers)
            self._timer_set.discard((key, side, timestamp))
            state = self._keys.get(key)
            if state is None:
                continue
            state.side(side).remove(timestamp)
            if not state.left and not state.right:
                del self._keys[key]

    # ---- inspection ----------------------------------------------------------------------------

    def buffered_timestamps(self, key: Hashable) -> tuple[list[int], list[int]]:
        """The timestamps buffered for `key`: (left, right), each sorted."""
        state = self._keys.get(key)
        if state is None:
            return [], []
        return list(state.left.timestamps), list(state.right.timestamps)

    def buffered_keys(self) -> list[Hashable]:
        return list(self._keys)

    @property
    def num_cleanup_timers(self) -> int:
        return len(self._timer_set)

    # ---- checkpoints ---------------------------------------------------------------------------

    def snapshot(self) -> dict[Hashable, dict[str, list[list[Any]]]]:
        """Every key's buffers as plain data: {key: {"left": [[ts, [values...]], ...],
        "right": [...]}}, timestamps ascending. A copy: later input does not change it."""
        return {
            key: {
                "left": [[ts, list(state.left.by_timestamp[ts])] for ts in state.left.timestamps],
                "right": [
                    [ts, list(state.right.by_timestamp[ts])] for ts in state.right.timestamps
                ],
            }
            for key, state in self._keys.items()
        }

    def restore(self, snapshot: Mapping[Hashable, Mapping[str, Iterable[Any]]]) -> None:
        """Add the buffers of `snapshot` (one or several, when rescaling) and rebuild
        their cleanup timers; they fire at the first watermark that reaches them."""
        for key, sides in snapshot.items():
            if key in self._keys:
                raise StateRestoreError(f"interval join state of key {key!r} restored twice")
            state = _KeyState()
            for side in JoinSide:
                for item in sides.get(side.value, ()):
                    timestamp, values = item
                    if not isinstance(timestamp, int) or not isinstance(values, list):
                        raise StateRestoreError(
                            f"malformed interval join buffer entry for key {key!r}: {item!r}"
                        )
                    for value in values:
                        state.side(side).add(timestamp, value)
                    self._register_cleanup(key, side, timestamp, self.cleanup_time(side, timestamp))
            if state.left or state.right:
                self._keys[key] = state

"""Drive one operator (or a short chain) directly: manual clock, collecting output, no Spark.

For an operator that runs a user function (keyed process, co-process, window, process,
map, flat_map) use the public harness instead, `barrierflow.testing` (docs/testing.md): it
sets the operator up as a task does, snapshots and restores it at any parallelism, and its
`operator` takes whole batches where a test needs them. What stays here is for the rest:
sources, sinks, chains, async I/O, a hand-made key-group range or `RestoredState`."""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Sequence
from typing import Any

from barrierflow import WatermarkStrategy
from barrierflow.connectors.base import Source, SourceReader, SourceSplit, SplitBatch
from barrierflow.runtime.chain_outputs import CollectingOutput
from barrierflow.runtime.mailbox_executor import NO_MAILBOX, MailboxExecutor
from barrierflow.runtime.operators.base import OperatorContext, RestoredState, StreamOperator
from barrierflow.runtime.operators.source_sink import SourceOperator
from barrierflow.state.key_groups import KeyGroupRange
from support.clocks import ManualClock


def context(
    clock: Callable[[], int],
    interval_ms: int = 100,
    key_group_range: KeyGroupRange | None = None,
    max_parallelism: int = 128,
    mailbox: MailboxExecutor = NO_MAILBOX,
    subtask_index: int = 0,
    parallelism: int = 1,
) -> OperatorContext:
    return OperatorContext(
        subtask_index=subtask_index,
        parallelism=parallelism,
        max_parallelism=max_parallelism,
        key_group_range=key_group_range or KeyGroupRange(0, max_parallelism - 1),
        attempt=0,
        deployment_id="test",
        processing_time=clock,
        auto_watermark_interval_ms=interval_ms,
        mailbox=mailbox,
    )


class QueuedMailbox:
    """A test MailboxExecutor: actions handed over from any thread wait until the test runs
    them on its own thread, which plays the task's mailbox thread."""

    WAIT_S = 10.0
    """How long `run_one` waits for a mail before the test declares a hang."""

    def __init__(self) -> None:
        self._mails: queue.Queue[tuple[Callable[[], None], str]] = queue.Queue()
        self.owner = threading.current_thread()

    def execute(self, action: Callable[[], None], description: str) -> None:
        self._mails.put((action, description))

    def run_one(self) -> str:
        """Run the next mail, waiting for it; returns its description."""
        assert threading.current_thread() is self.owner
        try:
            action, description = self._mails.get(timeout=self.WAIT_S)
        except queue.Empty:
            raise AssertionError(f"no mail arrived within {self.WAIT_S} s") from None
        action()
        return description

    def run_until(self, condition: Callable[[], bool]) -> int:
        """Run mails (waiting for each) until `condition()` holds; returns how many ran."""
        ran = 0
        while not condition():
            self.run_one()
            ran += 1
        return ran

    @property
    def pending(self) -> int:
        return self._mails.qsize()


def started(
    operator: StreamOperator,
    clock: Callable[[], int],
    restored: RestoredState | None = None,
    **settings: Any,
) -> tuple[StreamOperator, CollectingOutput]:
    """Set up, restore and open `operator` with a collecting output."""
    output = CollectingOutput()
    operator.setup(context(clock, **settings), output)
    operator.initialize_state(restored)
    operator.open()
    return operator, output


def started_source(
    source: Source,
    clock: Callable[[], int] | None = None,
    restored: RestoredState | None = None,
    *,
    name: str = "src",
    strategy: WatermarkStrategy | None = None,
    interval_ms: int = 0,
) -> tuple[SourceOperator, CollectingOutput]:
    """A SourceOperator reading every split of `source`, set up, restored and open.

    `interval_ms` 0: no periodic watermarks unless the test emits them."""
    operator = SourceOperator("src", name, source, strategy or WatermarkStrategy.no_watermarks())
    operator.assign_splits(source.create_splits())
    return started(operator, clock or ManualClock(), restored, interval_ms=interval_ms)


def fire_due(operator: StreamOperator, clock: ManualClock) -> None:
    """What the task's mailbox loop does: call the operator if its wake-up is due."""
    due = operator.next_wakeup()
    if due is not None and due <= clock():
        operator.on_processing_time(clock())


class ScriptedReader(SourceReader):
    """Returns the SplitBatches of its script one per poll, then None (end of input)."""

    def __init__(self, split_ids: list[str], script: list[SplitBatch]) -> None:
        self._split_ids = split_ids
        self.script = list(script)

    def restore(self, positions: dict[str, Any]) -> None:
        pass

    def poll_batch(self, max_records: int) -> list[Any] | None:
        raise AssertionError("the source operator reads per split")

    def snapshot(self) -> dict[str, Any]:
        return {}

    def split_ids(self) -> list[str]:
        return list(self._split_ids)

    def poll_split_batch(self, max_records: int) -> SplitBatch | None:
        return self.script.pop(0) if self.script else None


class ScriptedSource(Source):
    def __init__(self, reader: SourceReader) -> None:
        self.reader = reader

    def create_splits(self) -> list[SourceSplit]:
        return []

    def create_reader(self, splits: Sequence[SourceSplit]) -> SourceReader:
        return self.reader

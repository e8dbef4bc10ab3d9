"""NatsSource: a NATS JetStream stream read exactly once, one split per subject.

Splits are the stream's subjects (or those given to `set_subjects`), made on the driver
from the stream's info. A split's position is the stream sequence of the last message
consumed on it, stored in every checkpoint; a reader resumes each split at the next
sequence with an ephemeral pull consumer filtered on its subject (no acks: the
checkpoint, not the broker, is the source of truth). Each reader runs the nats-py
client on an asyncio loop of its own thread, which fills a bounded queue that the
task's mailbox thread drains without blocking.

Bounded (`set_bounded`): each split ends at the last message its subject held when the
job was started (sequences recorded on the driver, in the split). Unbounded (the
default): the splits never end.

Event time: each record carries its JetStream timestamp (ms) and each split gets its
own watermark generator.

A broker that is unreachable at start, or a stream that does not exist, fails
`create_splits` with a `SourceError` naming them; a broker that goes away mid-run fails
the task once the client has not reconnected within `set_reconnect_timeout` seconds, and
recovery retries per the restart strategy (a restart connects again in its readers; the
splits are not made again). Closing a reader abandons a connection still being tried. A
message the deserializer cannot decode fails the job naming split and stream sequence, or
goes to the `DEAD_LETTERS` side output with `set_dead_letters(True)`.

>>> source = (
...     NatsSource.builder()
...     .set_servers("nats://127.0.0.1:4222")
...     .set_stream("events")
...     .set_value_only_deserializer(bytes.decode)
...     .set_bounded()
...     .build()
... )
>>> source.stream, source.bounded, source.dead_letters
('events', True, False)
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import math
import queue
import threading
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from barrierflow._clock import SYSTEM_CLOCK, Clock
from barrierflow.connectors.base import (
    DEAD_LETTERS,
    BadRecord,
    Source,
    SourceReader,
    SourceSplit,
    SplitBatch,
)
from barrierflow.errors import ConfigurationError, SourceError, SourceUnavailableError

__all__ = [
    "CLOSE_TIMEOUT_S",
    "CONSUMER_CHECK_S",
    "CONSUMER_INACTIVE_S",
    "DEAD_LETTERS",
    "FETCH_BATCH",
    "FETCH_WAIT_S",
    "QUEUE_CAPACITY",
    "RECONNECT_WAIT_S",
    "NatsReader",
    "NatsSource",
    "NatsSourceBuilder",
]

FETCH_BATCH = 256
"""Messages asked for in one pull request."""
FETCH_WAIT_S = 0.5
"""How long one pull request waits for messages (also the stop and liveness check period)."""
QUEUE_CAPACITY = 4096
"""Messages a reader buffers ahead of its task (plus at most one pull batch per split)."""
CONSUMER_CHECK_S = 5.0
"""An idle split checks this often that its consumer still exists on the server."""
CONSUMER_INACTIVE_S = 300.0
"""The server deletes a consumer of a reader that died without closing after this long."""
RECONNECT_WAIT_S = 0.2
"""Pause between two attempts to reach a lost broker."""
CLOSE_TIMEOUT_S = 5.0
"""Bound on closing a reader (consumers deleted, connection closed, thread joined)."""

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
_MILLISECOND = datetime.timedelta(milliseconds=1)


def _import_nats() -> Any:
    try:
        import nats
        import nats.js.api
        import nats.js.errors
    except ImportError as error:
        raise SourceError(
            "NatsSource needs the nats-py package: pip install 'barrierflow[nats]'"
        ) from error
    return nats


class NatsSource(Source):
    """Reads a JetStream stream exactly once; build it with `NatsSource.builder()`.

    Exactly-once because each split's position (the stream sequence of its last consumed
    message) is in every checkpoint and a restore replays from the next one. Assumes the
    stream keeps the messages after a checkpoint's positions until the job has passed
    them (retention limits that drop unread messages lose them), and that the split
    subjects do not overlap (each message belongs to one split).
    """

    def __init__(
        self,
        servers: Sequence[str],
        stream: str,
        deserializer: Callable[[bytes], Any],
        *,
        subjects: Sequence[str] | None = None,
        bounded: bool = False,
        dead_letters: bool = False,
        reconnect_timeout_s: float = 10.0,
        connect_timeout_s: float = 5.0,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.servers = list(servers)
        self.stream = stream
        self.deserializer = deserializer
        self.subjects = None if subjects is None else list(subjects)
        self.bounded = bounded
        self.dead_letters = dead_letters
        self.reconnect_timeout_s = reconnect_timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.clock = clock
        """Where the reader reads time (the reconnect timeout, consumer checks): a test
        passes a `ManualClock`."""

    @staticmethod
    def builder() -> NatsSourceBuilder:
        return NatsSourceBuilder()

    def describe_servers(self) -> str:
        return ", ".join(self.servers)

    # ---- on the driver -----------------------------------------------------------------------

    def create_splits(self) -> list[SourceSplit]:
        """One split per subject, with the subject's last sequence now if bounded."""
        _import_nats()
        return _run_sync(self._create_splits())

    async def _create_splits(self) -> list[SourceSplit]:
        import nats
        import nats.js.errors

        try:
            nc = await nats.connect(
                self.servers,
                allow_reconnect=False,
                connect_timeout=self.connect_timeout_s,
                reconnect_time_wait=0.1,
                max_reconnect_attempts=1,  # 0 would mean forever
                error_cb=_ignore_error,
            )
        except Exception as error:
            raise SourceError(
                f"NatsSource: cannot connect to the NATS server {self.describe_servers()} "
                f"(stream {self.stream!r}): {_error_text(error)}"
            ) from None
        try:
            js = nc.jetstream(timeout=self.connect_timeout_s)
            try:
                info = await js.stream_info(self.stream)
            except nats.js.errors.NotFoundError:
                raise SourceError(
                    f"NatsSource: the JetStream stream {self.stream!r} does not exist on "
                    f"{self.describe_servers()}"
                ) from None
            subjects = self.subjects if self.subjects is not None else info.config.subjects
            if not subjects:
                raise SourceError(f"NatsSource: the stream {self.stream!r} has no subjects")
            splits = []
            for subject in subjects:
                stop = None
                if self.bounded:
                    stop = await _last_sequence(js, self.stream, subject, info.state.last_seq)
                splits.append(SourceSplit(subject, {"subject": subject, "stop": stop}))
            return splits
        except SourceError:
            raise
        except Exception as error:
            raise SourceError(
                f"NatsSource: cannot read the stream {self.stream!r} on "
                f"{self.describe_servers()}: {_error_text(error)}"
            ) from None
        finally:
            await nc.close()

    # ---- in the tasks ------------------------------------------------------------------------

    def create_reader(self, splits: Sequence[SourceSplit]) -> NatsReader:
        _import_nats()
        return NatsReader(self, splits)


class NatsSourceBuilder:
    """Configures a `NatsSource` (Flink's KafkaSource builder style)."""

    def __init__(self) -> None:
        self._servers: list[str] = []
        self._stream: str | None = None
        self._deserializer: Callable[[bytes], Any] | None = None
        self._subjects: list[str] | None = None
        self._bounded = False
        self._dead_letters = False
        self._reconnect_timeout_s = 10.0
        self._connect_timeout_s = 5.0

    def set_servers(self, servers: str | Sequence[str]) -> NatsSourceBuilder:
        """One URL, a comma-separated list, or a list (`nats://host:port`)."""
        if isinstance(servers, str):
            servers = [s.strip() for s in servers.split(",") if s.strip()]
        self._servers = list(servers)
        return self

    def set_stream(self, stream: str) -> NatsSourceBuilder:
        self._stream = stream
        return self

    def set_value_only_deserializer(
        self, deserializer: Callable[[bytes], Any]
    ) -> NatsSourceBuilder:
        """Turns a message's payload (bytes) into the record; may raise on bad input."""
        self._deserializer = deserializer
        return self

    def set_subjects(self, subjects: Sequence[str]) -> NatsSourceBuilder:
        """The splits, one per subject filter (wildcards allowed; they must not overlap).
        Default: the stream's own subjects."""
        self._subjects = list(subjects)
        return self

    def set_bounded(self) -> NatsSourceBuilder:
        """Stop each split at the last message present when the job starts."""
        self._bounded = True
        return self

    def set_unbounded(self) -> NatsSourceBuilder:
        """Keep reading new messages (the default)."""
        self._bounded = False
        return self

    def set_dead_letters(self, enabled: bool = True) -> NatsSourceBuilder:
        """Send messages the deserializer rejects to the `DEAD_LETTERS` side output
        instead of failing the job."""
        self._dead_letters = enabled
        return self

    def set_reconnect_timeout(self, seconds: float) -> NatsSourceBuilder:
        """How long a reader waits for a lost broker to come back before failing the task."""
        self._reconnect_timeout_s = seconds
        return self

    def set_connect_timeout(self, seconds: float) -> NatsSourceBuilder:
        self._connect_timeout_s = seconds
        return self

    def build(self) -> NatsSource:
        if not self._servers:
            raise ConfigurationError("NatsSource needs set_servers('nats://host:port')")
        if not isinstance(self._stream, str) or not self._stream:
            raise ConfigurationError("NatsSource needs set_stream(name)")
        if not callable(self._deserializer):
            raise ConfigurationError(
                "NatsSource needs set_value_only_deserializer(f), f taking the message's bytes"
            )
        subjects = self._subjects
        if subjects is not None and (not subjects or len(set(subjects)) != len(subjects)):
            raise ConfigurationError(f"set_subjects needs distinct subjects, got {subjects!r}")
        for name, value in (
            ("reconnect timeout", self._reconnect_timeout_s),
            ("connect timeout", self._connect_timeout_s),
        ):
            if not isinstance(value, int | float) or not 0 < value < math.inf:
                raise ConfigurationError(f"the {name} must be a positive number, got {value!r}")
        return NatsSource(
            self._servers,
            self._stream,
            self._deserializer,
            subjects=self._subjects,
            bounded=self._bounded,
            dead_letters=self._dead_letters,
            reconnect_timeout_s=self._reconnect_timeout_s,
            connect_timeout_s=self._connect_timeout_s,
        )


# ---- the reader (mailbox thread) ---------------------------------------------------------------


@dataclass(frozen=True)
class _SplitEnd:
    split_id: str


@dataclass(frozen=True)
class _Failure:
    message: str
    unavailable: bool = False
    """The broker could not be reached (a SourceUnavailableError: transient)."""


class NatsReader(SourceReader):
    """Hands out the messages its fetcher thread queued. Mailbox thread only; never blocks.

    Positions are advanced only here, as records are handed to the task, so a snapshot
    taken between two polls is exactly what the task has emitted.
    """

    def __init__(self, source: NatsSource, splits: Sequence[SourceSplit]) -> None:
        self._source = source
        self._subjects = {split.split_id: split.payload["subject"] for split in splits}
        self._stops: dict[str, int | None] = {
            split.split_id: split.payload["stop"] for split in splits
        }
        self._positions: dict[str, int] = {split.split_id: 0 for split in splits}
        self._finished: set[str] = set()
        self._buffer: deque[Any] = deque()
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._fetcher: _Fetcher | None = None

    def restore(self, positions: dict[str, Any]) -> None:
        for split_id in self._positions:
            if split_id in positions:
                self._positions[split_id] = int(positions[split_id])

    def snapshot(self) -> dict[str, Any]:
        return dict(self._positions)

    def split_ids(self) -> list[str]:
        return list(self._positions)

    def poll_batch(self, max_records: int) -> list[Any] | None:
        batch = self.poll_split_batch(max_records)
        if batch is None:
            return None
        if batch.bad:
            raise SourceError(batch.bad[0].describe(f"NATS stream {self._source.stream}"))
        return batch.records

    def poll_split_batch(self, max_records: int) -> SplitBatch | None:
        """The next queued messages of one split (decoded), an ended split, or nothing yet."""
        if self._fetcher is None:
            self._start()
        buffer = self._buffer
        queued = self._queue
        while len(buffer) < max_records:
            try:
                buffer.append(queued.get_nowait())
            except queue.Empty:
                break
        while buffer and type(buffer[0]) is not tuple:
            item = buffer.popleft()
            if isinstance(item, _Failure):
                raise (SourceUnavailableError if item.unavailable else SourceError)(item.message)
            if item.split_id not in self._finished:
                self._finished.add(item.split_id)
                return SplitBatch(item.split_id, [], finished=True)
        if not buffer:
            if self._source.bounded and len(self._finished) == len(self._positions):
                return None
            return SplitBatch(self._idle_split_id(), [])
        return self._decode(buffer, max_records)

    def close(self) -> None:
        if self._fetcher is not None:
            self._fetcher.stop()

    # ---- internals -----------------------------------------------------------------------

    def _start(self) -> None:
        plans = []
        for split_id, position in self._positions.items():
            stop = self._stops[split_id]
            if stop is not None and position >= stop:
                self._queue.put(_SplitEnd(split_id))  # nothing left before the bound
            else:
                plans.append(_SplitPlan(split_id, self._subjects[split_id], position + 1, stop))
        self._fetcher = _Fetcher(self._source, plans, self._queue)
        if plans:
            self._fetcher.start()

    def _idle_split_id(self) -> str:
        for split_id in self._positions:
            if split_id not in self._finished:
                return split_id
        return next(iter(self._positions), "")

    def _decode(self, buffer: deque[Any], max_records: int) -> SplitBatch:
        split_id = buffer[0][0]
        deserialize = self._source.deserializer
        records: list[Any] = []
        timestamps: list[int] = []
        bad: list[BadRecord] = []
        position = self._positions[split_id]
        taken = 0
        while buffer and taken < max_records:
            item = buffer[0]
            if type(item) is not tuple or item[0] != split_id:
                break
            buffer.popleft()
            taken += 1
            _, position, data, timestamp = item
            try:
                records.append(deserialize(data))
            except Exception as error:
                bad.append(
                    BadRecord(split_id, position, data, _error_text(error), "stream sequence")
                )
                continue
            timestamps.append(timestamp)
        self._positions[split_id] = position
        return SplitBatch(split_id, records, timestamps, bad=bad)


# ---- the fetcher (its own thread, its own event loop) ------------------------------------------


@dataclass(frozen=True)
class _SplitPlan:
    split_id: str
    subject: str
    start: int
    """The first stream sequence to read."""
    stop: int | None
    """The last stream sequence to read (bounded), or None."""


class _ConnectionLost(Exception):
    pass


class _Fetcher:
    """Pulls every split's messages on a thread of its own and queues them in order.

    Holds no operator objects: it only puts `(split_id, sequence, data, timestamp_ms)`
    tuples, `_SplitEnd` and `_Failure` values into the queue. Each split reads with one
    ephemeral pull consumer (ack policy none) from its next sequence; after a reconnect,
    or when its consumer has vanished, the split resubscribes from the sequence after the
    last one it queued, so nothing is lost or repeated.
    """

    def __init__(
        self, source: NatsSource, plans: list[_SplitPlan], output: queue.SimpleQueue[Any]
    ) -> None:
        self._source = source
        self._plans = plans
        self._queue = output
        self._thread = threading.Thread(
            target=self._run, name=f"nats-reader-{source.stream}", daemon=True
        )
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._stop_requested = False
        self._nc: Any = None
        self._js: Any = None
        self._disconnected_at: float | None = None
        self._generation = 0
        """Bumped at every reconnect: every split then resubscribes."""
        self._consumers: dict[str, str] = {}

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ask the loop to end, and wait (bounded) for it to close the connection."""
        self._stop_requested = True
        if not self._thread.is_alive():
            return
        self._ready.wait(CLOSE_TIMEOUT_S)
        loop, stopping = self._loop, self._stopping
        if loop is not None and stopping is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                loop.call_soon_threadsafe(stopping.set)
        self._thread.join(CLOSE_TIMEOUT_S)

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except Exception as error:  # a bug here must still reach the task
            self._queue.put(_Failure(f"NatsSource: the reader thread failed: {error!r}"))

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._ready.set()
        if self._stop_requested:
            return
        source = self._source
        stopping = asyncio.create_task(self._stopping.wait())
        connecting = asyncio.create_task(self._connect())
        # A broker that is away keeps the first connection retrying for up to the reconnect
        # timeout: a close meanwhile (the attempt is cancelled) abandons it at once.
        await asyncio.wait({connecting, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if not connecting.done():
            await _cancel(connecting)
            await self._close_connection()
            return
        if connecting.exception() is not None:
            await _cancel(stopping)
            self._queue.put(
                _Failure(
                    f"NatsSource: cannot connect to the NATS server {source.describe_servers()} "
                    f"(stream {source.stream!r}): {_error_text(connecting.exception())}",
                    unavailable=True,
                )
            )
            await self._close_connection()
            return
        self._js = self._nc.jetstream(timeout=source.connect_timeout_s)
        tasks = [asyncio.create_task(self._read_split(plan)) for plan in self._plans]
        try:
            pending: set[asyncio.Task[Any]] = {*tasks, stopping}
            while not stopping.done():
                done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                failed = [t for t in done if t is not stopping and t.exception() is not None]
                if failed:
                    error = failed[0].exception()
                    lost = isinstance(error, _ConnectionLost)
                    self._queue.put(_Failure(self._failure_text(error), unavailable=lost))
                    break
                if pending == {stopping}:
                    break  # every split ended (bounded)
        finally:
            for task in (*tasks, stopping):
                await _cancel(task)
            await self._close_connection()

    async def _connect(self) -> None:
        """Connect `self._nc` (set before connecting, so that a close can end it)."""
        from nats.aio.client import Client

        source = self._source
        self._nc = Client()
        await self._nc.connect(
            source.servers,
            connect_timeout=source.connect_timeout_s,
            reconnect_time_wait=RECONNECT_WAIT_S,
            # Bounds the first connection too; `_check_connection` also bounds by time.
            max_reconnect_attempts=max(1, math.ceil(source.reconnect_timeout_s / RECONNECT_WAIT_S)),
            disconnected_cb=self._on_disconnected,
            reconnected_cb=self._on_reconnected,
            error_cb=_ignore_error,
        )

    def _failure_text(self, error: BaseException | None) -> str:
        source = self._source
        if isinstance(error, _ConnectionLost):
            return str(error)
        return (
            f"NatsSource: reading the stream {source.stream!r} on {source.describe_servers()} "
            f"failed: {_error_text(error)}"
        )

    async def _close_connection(self) -> None:
        nc = self._nc
        if nc is None or nc.is_closed:
            return
        with contextlib.suppress(Exception):
            if nc.is_connected:
                await asyncio.wait_for(
                    asyncio.gather(
                        *(
                            self._js.delete_consumer(self._source.stream, name)
                            for name in self._consumers.values()
                        ),
                        return_exceptions=True,
                    ),
                    timeout=1.0,
                )
        with contextlib.suppress(Exception):
            await asyncio.wait_for(nc.close(), timeout=1.0)

    async def _on_disconnected(self) -> None:
        if self._disconnected_at is None:
            self._disconnected_at = self._source.clock.monotonic()

    async def _on_reconnected(self) -> None:
        self._disconnected_at = None
        self._generation += 1

    def _check_connection(self) -> None:
        source = self._source
        lost = self._disconnected_at
        if self._nc.is_closed or (
            lost is not None and source.clock.monotonic() - lost > source.reconnect_timeout_s
        ):
            raise _ConnectionLost(
                f"NatsSource: lost the connection to the NATS server {source.describe_servers()} "
                f"(stream {source.stream!r}) and could not reconnect within "
                f"{source.reconnect_timeout_s:g} s"
            )

    async def _subscribe(self, plan: _SplitPlan, start: int) -> tuple[Any, int]:
        """A fresh ephemeral consumer of the split from `start`; returns it and its backlog."""
        from nats.js.api import AckPolicy, ConsumerConfig, DeliverPolicy

        stream = self._source.stream
        old = self._consumers.pop(plan.split_id, None)
        if old is not None:
            with contextlib.suppress(Exception):
                await self._js.delete_consumer(stream, old)
        name = f"barrierflow-{uuid.uuid4().hex}"
        config = ConsumerConfig(
            name=name,
            deliver_policy=DeliverPolicy.BY_START_SEQUENCE,
            opt_start_seq=start,
            ack_policy=AckPolicy.NONE,
            filter_subject=plan.subject,
            inactive_threshold=CONSUMER_INACTIVE_S,
            mem_storage=True,
            num_replicas=1,
        )
        info = await self._js.add_consumer(stream, config=config)
        self._consumers[plan.split_id] = name
        subscription = await self._js.pull_subscribe_bind(consumer=name, stream=stream)
        return subscription, info.num_pending

    async def _read_split(self, plan: _SplitPlan) -> None:
        import nats.errors
        import nats.js.errors

        put, split_id, stop = self._queue.put, plan.split_id, plan.stop
        next_seq = plan.start
        subscription = None
        generation = -1
        clock = self._source.clock
        last_check = clock.monotonic()
        failing_since: float | None = None
        """When subscribing or fetching started failing (e.g. JetStream not ready yet after
        a reconnect): an error that lasts longer than the reconnect timeout fails the task."""
        while True:
            self._check_connection()
            if self._disconnected_at is not None:
                await asyncio.sleep(0.1)  # the client is reconnecting
                continue
            if subscription is None or generation != self._generation:
                generation = self._generation
                try:
                    subscription, backlog = await self._subscribe(plan, next_seq)
                except nats.errors.Error as error:
                    subscription = None
                    failing_since = self._still_failing(failing_since, error)
                    await asyncio.sleep(0.1)
                    continue
                if stop is not None and backlog == 0:
                    put(_SplitEnd(split_id))  # nothing more up to the bound
                    return
                last_check = clock.monotonic()
            if self._queue.qsize() >= QUEUE_CAPACITY:
                await asyncio.sleep(0.01)  # the task is behind: keep the buffer bounded
                continue
            try:
                messages = await subscription.fetch(FETCH_BATCH, timeout=FETCH_WAIT_S)
            except TimeoutError:  # no message now (nats-py's timeouts included)
                failing_since = None
                if clock.monotonic() - last_check > CONSUMER_CHECK_S:
                    last_check = clock.monotonic()
                    if not await self._consumer_exists(split_id):
                        subscription = None
                continue
            except nats.errors.Error as error:
                subscription = None  # resubscribe from next_seq once connected
                failing_since = self._still_failing(failing_since, error)
                await asyncio.sleep(0.1)
                continue
            failing_since = None
            for message in messages:
                metadata = message.metadata
                sequence = metadata.sequence.stream
                if sequence < next_seq:
                    continue  # delivered again after a resubscribe
                if stop is not None and sequence > stop:
                    put(_SplitEnd(split_id))
                    return
                timestamp = (metadata.timestamp - _EPOCH) // _MILLISECOND
                put((split_id, sequence, message.data, timestamp))
                next_seq = sequence + 1
                if stop is not None and (sequence >= stop or metadata.num_pending == 0):
                    put(_SplitEnd(split_id))
                    return

    def _still_failing(self, since: float | None, error: Exception) -> float:
        """When the current run of errors began; raises `error` once it lasted too long."""
        now = self._source.clock.monotonic()
        since = now if since is None else since
        if now - since > self._source.reconnect_timeout_s:
            raise error
        return since

    async def _consumer_exists(self, split_id: str) -> bool:
        import nats.js.errors

        name = self._consumers.get(split_id)
        if name is None:
            return False
        try:
            await self._js.consumer_info(self._source.stream, name)
        except nats.js.errors.NotFoundError:
            return False
        except Exception:
            return True  # cannot tell now; the connection checks handle a lost broker
        return True


# ---- helpers -----------------------------------------------------------------------------------


async def _last_sequence(js: Any, stream: str, subject: str, stream_last: int) -> int:
    """The sequence of the last message on `subject` now (0: none); for a wildcard, the
    stream's last sequence (the reader then also stops when nothing is pending)."""
    import nats.js.errors

    if "*" in subject or ">" in subject:
        return stream_last
    try:
        message = await js.get_last_msg(stream, subject)
    except nats.js.errors.NotFoundError:
        return 0
    return int(message.seq)


def _run_sync(coroutine: Any) -> Any:
    """Run a coroutine to completion on a fresh event loop of a helper thread (works whether
    or not the caller's thread already runs a loop, e.g. in a notebook)."""
    result: list[Any] = []
    failure: list[BaseException] = []

    def run() -> None:
        try:
            result.append(asyncio.run(coroutine))
        except BaseException as error:  # re-raised in the caller's thread
            failure.append(error)

    thread = threading.Thread(target=run, name="nats-driver", daemon=True)
    thread.start()
    thread.join()
    if failure:
        raise failure[0]
    return result[0]


async def _cancel(task: asyncio.Task[Any]) -> None:
    """Cancel `task` until it has ended: nats-py swallows a cancellation that lands while it
    cleans up after a failed connection attempt (it awaits its own cancelled tasks)."""
    while not task.done():
        task.cancel()
        await asyncio.wait({task}, timeout=0.05)
    if not task.cancelled():
        task.exception()  # retrieved, so asyncio does not log it as never retrieved


async def _ignore_error(error: Exception) -> None:
    """nats-py's error callback: the reader reports failures itself, not through logs."""


def _error_text(error: BaseException | None) -> str:
    text = str(error)
    name = type(error).__name__
    return f"{name}: {text}" if text else name

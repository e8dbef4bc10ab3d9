"""Async I/O (Flink's AsyncWaitOperator): queues, the asyncio runner and the user API.

- `queue`: `OrderedStreamElementQueue` and `UnorderedStreamElementQueue`, pure logic.
- `wait_logic`: `AsyncWaitLogic`, the operator's mailbox-thread half, pure logic.
- `runner`: `AsyncFunctionRunner`, the asyncio loop in one helper thread (the edge).
- `retry`: `AsyncRetryStrategy` and its factories.
- `api`: `AsyncFunction`, `AsyncDataStream`, `AsyncWaitSpec` (what users and the job graph see).
"""

from barrierflow.runtime.async_io.api import (
    AsyncDataStream,
    AsyncFunction,
    AsyncWaitSpec,
    OutputMode,
)
from barrierflow.runtime.async_io.errors import AsyncOperationFailedError
from barrierflow.runtime.async_io.queue import (
    CompletedRecord,
    OrderedStreamElementQueue,
    QueueEntry,
    Record,
    StreamElementQueue,
    UnorderedStreamElementQueue,
)
from barrierflow.runtime.async_io.retry import (
    NO_RETRY_STRATEGY,
    AsyncRetryPredicate,
    AsyncRetryStrategy,
)
from barrierflow.runtime.async_io.runner import AsyncFunctionRunner
from barrierflow.runtime.async_io.wait_logic import AsyncWaitLogic, AsyncWaitOutput

__all__ = [
    "NO_RETRY_STRATEGY",
    "AsyncDataStream",
    "AsyncFunction",
    "AsyncFunctionRunner",
    "AsyncOperationFailedError",
    "AsyncRetryPredicate",
    "AsyncRetryStrategy",
    "AsyncWaitLogic",
    "AsyncWaitOutput",
    "AsyncWaitSpec",
    "CompletedRecord",
    "OrderedStreamElementQueue",
    "OutputMode",
    "QueueEntry",
    "Record",
    "StreamElementQueue",
    "UnorderedStreamElementQueue",
]

"""Async I/O (Flink's AsyncWaitOperator): queues, the asyncio runner and the operator's spec.

- `queue`: `OrderedStreamElementQueue` and `UnorderedStreamElementQueue`, pure logic.
- `wait_logic`: `AsyncWaitLogic`, the operator's mailbox-thread half, pure logic.
- `runner`: `AsyncFunctionRunner`, the asyncio loop in one helper thread (the edge).
- `retry`: `AsyncRetryStrategy` and its factories.
- `spec`: `AsyncWaitSpec`, what the operator is built from (the user's `AsyncFunction` is
  in `barrierflow.core.async_function`; the `AsyncDataStream` builder in `barrierflow.api`).
"""

from barrierflow.errors import AsyncOperationFailedError
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
from barrierflow.runtime.async_io.spec import AsyncWaitSpec, OutputMode
from barrierflow.runtime.async_io.wait_logic import AsyncWaitLogic, AsyncWaitOutput

__all__ = [
    "NO_RETRY_STRATEGY",
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

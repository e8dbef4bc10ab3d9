"""Errors of async I/O.

BarrierflowError
  AsyncOperationFailedError   an async call of a record failed or timed out: the task fails
"""

from __future__ import annotations

from barrierflow.errors import BarrierflowError

__all__ = ["AsyncOperationFailedError"]


class AsyncOperationFailedError(BarrierflowError):
    """An async call of a record failed or timed out; the cause is chained. Fails the task."""

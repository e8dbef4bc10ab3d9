"""PyFlink's ready-made retry predicates for async I/O (`pyflink.datastream.
async_retry_predicates`), for `AsyncRetryStrategy.fixed_delay(..., result_predicate=,
exception_predicate=)`.

>>> import functools
>>> retry_on_timeout = functools.partial(exception_type_predicate, expected_error_type=TimeoutError)
>>> retry_on_timeout(TimeoutError()), empty_result_predicate([])
(True, True)
"""

from __future__ import annotations

from typing import Any

__all__ = ["empty_result_predicate", "exception_type_predicate", "has_exception_predicate"]


def empty_result_predicate(result: list[Any] | None) -> bool:
    """Retry when the call returned nothing."""
    return result is None or len(result) == 0


def has_exception_predicate(error: BaseException | None) -> bool:
    """Retry on any exception."""
    return error is not None


def exception_type_predicate(
    error: BaseException | None, expected_error_type: type[BaseException]
) -> bool:
    """Retry on an exception of `expected_error_type` (bind it with functools.partial)."""
    return isinstance(error, expected_error_type)

"""What a window keeps and what it emits: the window function kinds (Flink's window
state plus its InternalWindowFunction).

One `WindowContents` per window operator says how an element joins a window's
contents (`add`), how two windows' contents combine when sessions merge
(`merge`), and what a firing emits (`emit`):

- `ReducingWindowContents(reduce_function)`: keeps one reduced value, emits it.
- `AggregatingWindowContents(aggregate_function)`: keeps an accumulator, emits
  `get_result(accumulator)`.
- `ListWindowContents(window_function)`: keeps every element, emits what a
  `ProcessWindowFunction` (or `WindowFunction`) returns for them.

The first two also take a `window_function`, which then receives the one
pre-aggregated value (Flink's `reduce(f, process)` and `aggregate(f, process)`).
Contents are never None: None means the window holds nothing.

>>> contents = ReducingWindowContents(lambda a, b: a + b)
>>> held = None
>>> for value in [1, 2, 3]:
...     held = contents.add(held, value)
>>> list(contents.emit("key", None, held, None))
[6]
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable
from typing import Any

from barrierflow.core.functions import Function, as_callable
from barrierflow.core.window_functions import AggregateFunction
from barrierflow.core.windows.window import Window
from barrierflow.errors import ConfigurationError

__all__ = [
    "AggregatingWindowContents",
    "ListWindowContents",
    "ReducingWindowContents",
    "WindowContents",
]


class _WindowFunctionCall:
    """A window function: an object with `process(key, context, elements)` (a
    ProcessWindowFunction), one with `apply(key, window, inputs)` (a WindowFunction,
    also duck-typed), or a callable(key, context, elements)."""

    def __init__(self, function: Any) -> None:
        self.function = function
        if callable(getattr(function, "process", None)):
            self._call = self._process
        elif callable(getattr(function, "apply", None)):
            self._call = self._apply
        elif callable(function):
            self._call = self._callable
        else:
            raise ConfigurationError(
                "a window function must be a ProcessWindowFunction, a WindowFunction or a "
                f"callable(key, context, elements), got {function!r}"
            )

    def __call__(
        self, key: Hashable, window: Window, context: Any, elements: list[Any]
    ) -> list[Any]:
        results = self._call(key, window, context, elements)
        return [] if results is None else list(results)

    def _process(self, key: Hashable, window: Window, context: Any, elements: list[Any]) -> Any:
        return self.function.process(key, context, elements)

    def _apply(self, key: Hashable, window: Window, context: Any, elements: list[Any]) -> Any:
        return self.function.apply(key, window, elements)

    def _callable(self, key: Hashable, window: Window, context: Any, elements: list[Any]) -> Any:
        return self.function(key, context, elements)

    def clear(self, context: Any) -> None:
        if self._call == self._process and callable(getattr(self.function, "clear", None)):
            self.function.clear(context)


def _has_life_cycle(function: Any) -> bool:
    """Whether `function` is an object with open/close (a Function, or one shaped like it)."""
    return isinstance(function, Function) or (
        callable(getattr(function, "open", None)) and callable(getattr(function, "close", None))
    )


class WindowContents(ABC):
    """How a window holds its elements and turns them into results."""

    def __init__(self, functions: list[Any], window_function: Any = None) -> None:
        self._window_function = (
            None if window_function is None else _WindowFunctionCall(window_function)
        )
        if window_function is not None:
            functions.append(window_function)
        self._functions = [f for f in functions if _has_life_cycle(f)]

    @abstractmethod
    def add(self, contents: Any, value: Any) -> Any:
        """The contents with `value` added (`contents` None: the window is empty)."""

    @abstractmethod
    def merge(self, target: Any, source: Any) -> Any:
        """Both windows' contents in one (neither is None)."""

    @abstractmethod
    def _result(self, contents: Any) -> Any:
        """The pre-aggregated result of `contents` (not used by `ListWindowContents`)."""

    def emit(self, key: Hashable, window: Window, contents: Any, context: Any) -> list[Any]:
        """The results of firing `window` with `contents` (runs the user's functions now)."""
        result = self._result(contents)
        if self._window_function is None:
            return [result]
        return self._window_function(key, window, context, [result])

    def clear(self, context: Any) -> None:
        """The window is gone for good: `ProcessWindowFunction.clear(context)`."""
        if self._window_function is not None:
            self._window_function.clear(context)

    def open(self, runtime_context: Any) -> None:
        """Open the user's function objects (once, after state is restored)."""
        for function in self._functions:
            function.open(runtime_context)

    def close(self) -> None:
        """Close the user's function objects."""
        for function in self._functions:
            function.close()


class ReducingWindowContents(WindowContents):
    """Keeps `reduce(reduce(e1, e2), e3)...`; emits it, or passes it to `window_function`."""

    def __init__(self, reduce_function: Any, window_function: Any = None) -> None:
        self._reduce: Callable[[Any, Any], Any] = as_callable(
            reduce_function, "reduce", "ReduceFunction"
        )
        super().__init__([reduce_function], window_function)

    def add(self, contents: Any, value: Any) -> Any:
        return value if contents is None else self._reduce(contents, value)

    def merge(self, target: Any, source: Any) -> Any:
        return self._reduce(target, source)

    def _result(self, contents: Any) -> Any:
        return contents


class AggregatingWindowContents(WindowContents):
    """Keeps an accumulator; emits `get_result`, or passes it to `window_function`."""

    def __init__(self, aggregate_function: AggregateFunction, window_function: Any = None) -> None:
        for method in ("create_accumulator", "add", "get_result", "merge"):
            if not callable(getattr(aggregate_function, method, None)):
                raise ConfigurationError(
                    f"an AggregateFunction needs .{method}(), got {aggregate_function!r}"
                )
        self._aggregate = aggregate_function
        super().__init__([aggregate_function], window_function)

    def add(self, contents: Any, value: Any) -> Any:
        accumulator = self._aggregate.create_accumulator() if contents is None else contents
        return self._aggregate.add(value, accumulator)

    def merge(self, target: Any, source: Any) -> Any:
        return self._aggregate.merge(target, source)

    def _result(self, contents: Any) -> Any:
        return self._aggregate.get_result(contents)


class ListWindowContents(WindowContents):
    """Keeps every element in arrival order; emits what `window_function` returns for them."""

    def __init__(self, window_function: Any) -> None:
        if window_function is None:
            raise ConfigurationError("a window that keeps its elements needs a window function")
        super().__init__([], window_function)

    def add(self, contents: Any, value: Any) -> Any:
        if contents is None:
            return [value]
        contents.append(value)
        return contents

    def merge(self, target: Any, source: Any) -> Any:
        return target + source

    def _result(self, contents: Any) -> Any:
        raise NotImplementedError  # emit() hands over the elements themselves

    def emit(self, key: Hashable, window: Window, contents: Any, context: Any) -> list[Any]:
        assert self._window_function is not None
        # A copy: the user's function may keep or change the list it gets.
        return self._window_function(key, window, context, list(contents))

"""A broken user function, or a harness used wrongly, is reported in one line that names
the problem: the function, the call, the element or timer, and the line that raised."""

from __future__ import annotations

import json

import pytest

from barrierflow.errors import ConfigurationError, UserFunctionError
from barrierflow.functions import KeyedProcessFunction, ProcessFunction
from barrierflow.state import ValueStateDescriptor
from barrierflow.testing import (
    KeyedProcessFunctionHarness,
    MapFunctionHarness,
    ProcessFunctionHarness,
    WindowOperatorHarness,
)
from barrierflow.window import TumblingEventTimeWindows


class Broken(KeyedProcessFunction):
    """Divides by the amount (0 breaks it); its timer reads a state that is not there."""

    def open(self, runtime_context):
        self.last = runtime_context.get_state(ValueStateDescriptor("last"))

    def process_element(self, value, ctx):
        self.last.update(100 // value[1])
        ctx.timer_service().register_event_time_timer(10)
        ctx.timer_service().register_processing_time_timer(5)
        return []

    def on_timer(self, timestamp, ctx):
        return [self.missing_attribute]


def keyed(function=None, **settings):
    return KeyedProcessFunctionHarness(function or Broken(), lambda r: r[0], **settings)


def test_an_element_the_function_raises_on_is_named_with_the_line():
    h = keyed()
    h.process_element(("a", 4), 1)
    with pytest.raises(UserFunctionError) as caught:
        h.process_element(("a", 0), 2)
    message = str(caught.value)
    assert message.startswith("Broken raised ZeroDivisionError: integer division or modulo by zero")
    assert "while handling the element ('a', 0) at 2" in message
    assert "test_harness_errors.py:" in message and "in process_element" in message
    assert isinstance(caught.value.__cause__, ZeroDivisionError)
    assert h.get_state("a", ValueStateDescriptor("last")) == 25  # the harness goes on


@pytest.mark.parametrize(
    ("move", "named"),
    [
        (lambda h: h.process_watermark(10), "while handling the watermark 10"),
        (lambda h: h.set_processing_time(7), "while handling a processing-time timer at 7 ms"),
    ],
)
def test_a_timer_the_function_raises_in_is_named(move, named):
    h = keyed()
    h.process_element(("a", 1), 1)
    with pytest.raises(UserFunctionError, match=f"AttributeError: .*missing_attribute.*{named}"):
        move(h)


def test_open_and_a_key_selector_that_raise_are_named():
    class NoOpen(ProcessFunction):
        def open(self, runtime_context):
            raise RuntimeError("cannot connect")

        def process_element(self, value, ctx):
            return []

    with pytest.raises(UserFunctionError, match=r"NoOpen raised RuntimeError: cannot connect "
                       r"while handling open \(test_harness_errors.py:\d+ in open\)"):  # fmt: skip
        ProcessFunctionHarness(NoOpen())
    h = KeyedProcessFunctionHarness(Broken(), lambda r: r["id"])
    with pytest.raises(UserFunctionError, match=r"TypeError.* the key selector on \('a', 1\)"):
        h.process_element(("a", 1))


def test_timers_on_a_non_keyed_stream_are_the_functions_mistake_not_the_harness():
    class Timers(ProcessFunction):
        def process_element(self, value, ctx):
            ctx.timer_service().register_event_time_timer(5)

    with pytest.raises(UserFunctionError, match="timers need a keyed stream"):
        ProcessFunctionHarness(Timers()).process_element(1)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: KeyedProcessFunctionHarness(lambda x: x, lambda x: x), "KeyedProcessFunction"),
        (lambda: keyed(parallelism=2, subtask_index=0).process_element(("k9", 1)),
         r"key 'k9' is in key group \d+, which subtask 1 of 2 owns; this harness is subtask 0"),
        (lambda: keyed().set_processing_time(-1), "processing time does not go back"),
        (lambda: keyed().process_element(("a", 1), "noon"), "a timestamp is int milliseconds"),
        (lambda: keyed(restore_from=b"bytes"), "restore_from needs a HarnessSnapshot"),
        (lambda: keyed(max_parallelism=64, restore_from=keyed().snapshot()), "max parallelism"),
        (lambda: WindowOperatorHarness(TumblingEventTimeWindows.of(5), lambda x: x),
         "reduce_function, aggregate_function or window_function"),
        (lambda: WindowOperatorHarness("hourly", lambda x: x, reduce_function=max),
         "needs a WindowAssigner"),
    ],
)  # fmt: skip
def test_a_harness_used_wrongly_says_so_in_one_line(make, message):
    with pytest.raises(Exception, match=message) as caught:
        make()
    assert "\n" not in str(caught.value)
    assert not isinstance(caught.value, UserFunctionError)


def test_a_closed_harness_refuses_more_input():
    h = MapFunctionHarness(str)
    h.close()
    h.close()  # once
    with pytest.raises(ConfigurationError, match="the harness is closed"):
        h.process_element(1)


def test_an_error_raised_inside_a_library_the_function_calls_names_the_functions_line():
    class Parse(ProcessFunction):
        def process_element(self, value, ctx):
            yield json.loads(value)

    line = r"\(test_harness_errors.py:\d+ in process_element\)$"
    with pytest.raises(UserFunctionError, match=line):
        ProcessFunctionHarness(Parse()).process_element("{broken")

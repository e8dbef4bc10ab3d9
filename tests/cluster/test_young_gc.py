"""A stream task's process raises the collector's young threshold, and only raises it."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from barrierflow.cluster.executor.young_gc import TASK_YOUNG_THRESHOLD, raise_young_threshold


@pytest.fixture(autouse=True)
def kept_threshold() -> Iterator[None]:
    saved = gc.get_threshold()
    yield
    gc.set_threshold(*saved)


def test_the_default_threshold_is_raised_and_the_older_generations_kept() -> None:
    gc.set_threshold(700, 10, 10)
    raise_young_threshold()
    assert gc.get_threshold() == (TASK_YOUNG_THRESHOLD, 10, 10)


def test_a_higher_threshold_is_left_alone() -> None:
    gc.set_threshold(TASK_YOUNG_THRESHOLD * 2, 5, 20)
    raise_young_threshold()
    assert gc.get_threshold() == (TASK_YOUNG_THRESHOLD * 2, 5, 20)


def test_a_disabled_collector_stays_disabled() -> None:
    gc.set_threshold(0, 10, 10)
    raise_young_threshold()
    assert gc.get_threshold() == (0, 10, 10)

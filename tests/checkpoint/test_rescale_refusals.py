"""What cannot be rescaled is refused before any task starts, with an error that says what
differs and what to do (issue 11, "Rescaling")."""

from __future__ import annotations

from dataclasses import replace

import pytest
from test_metadata import acknowledged, keyed_job

from barrierflow.checkpoint.metadata import build_metadata, check_compatible
from barrierflow.errors import StateRestoreError


def test_another_max_parallelism_names_both_values():
    old = keyed_job(2, max_parallelism=128)
    metadata = build_metadata(old, 7, 1234, False, acknowledged(old, 1))
    with pytest.raises(StateRestoreError) as refused:
        check_compatible(keyed_job(3, max_parallelism=64), metadata, "checkpoint /c/chk-7")
    assert str(refused.value).startswith(
        "checkpoint /c/chk-7 was taken with max parallelism 128, this job has 64"
    )


def test_an_unaligned_checkpoint_with_in_flight_data_says_to_rescale_from_a_savepoint():
    old = keyed_job(2)
    handles = acknowledged(old, 1)
    first = min(handles)
    handles[first] = replace(handles[first], channel_state=(10, 30))
    metadata = build_metadata(old, 7, 1234, False, handles)
    with pytest.raises(StateRestoreError) as refused:
        check_compatible(keyed_job(3), metadata, "checkpoint /c/chk-7")
    message = str(refused.value)
    assert message.startswith("checkpoint /c/chk-7 is an unaligned checkpoint holding in-flight")
    assert "count (2 -> 3)" in message  # the operator whose parallelism changed
    assert "To rescale, take a savepoint (always aligned) at the old parallelism" in message


def test_an_aligned_checkpoint_rescales_in_both_directions():
    old = keyed_job(2)
    metadata = build_metadata(old, 7, 1234, False, acknowledged(old, 1))
    for parallelism in (1, 3):
        check_compatible(keyed_job(parallelism), metadata, "checkpoint 7")

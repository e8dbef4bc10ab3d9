"""Checkpointing settings with PyFlink's names: modes, unaligned checkpoints, aligned timeout."""

from __future__ import annotations

import pytest

from barrierflow import CheckpointingMode, Duration, StreamExecutionEnvironment
from barrierflow.errors import ConfigurationError
from barrierflow.runtime.barriers.aligner import CheckpointBarrierAligner
from barrierflow.runtime.barriers.tracker import CheckpointBarrierTracker
from barrierflow.runtime.barriers.unaligner import CheckpointBarrierUnaligner
from barrierflow.runtime.task import TaskSettings


def test_enable_checkpointing_takes_at_least_once_as_pyflink_does():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.enable_checkpointing(1000, CheckpointingMode.AT_LEAST_ONCE)
    config = env.get_checkpoint_config()
    assert config.get_checkpointing_mode() is CheckpointingMode.AT_LEAST_ONCE
    assert config.get_checkpoint_interval() == 1000


def test_unaligned_checkpoints_are_off_until_enabled_and_the_timeout_takes_a_duration():
    config = StreamExecutionEnvironment.get_execution_environment().get_checkpoint_config()
    assert not config.is_unaligned_checkpoints_enabled()
    config.enable_unaligned_checkpoints()
    config.set_aligned_checkpoint_timeout(Duration.of_seconds(2))
    assert config.is_unaligned_checkpoints_enabled()
    assert config.get_aligned_checkpoint_timeout() == 2000
    config.enable_unaligned_checkpoints(False)
    assert not config.is_unaligned_checkpoints_enabled()


@pytest.mark.parametrize("timeout", [-1, 1.5, "10"])
def test_an_aligned_timeout_that_is_not_whole_milliseconds_is_refused(timeout):
    config = StreamExecutionEnvironment.get_execution_environment().get_checkpoint_config()
    with pytest.raises(ConfigurationError, match="aligned checkpoint timeout"):
        config.set_aligned_checkpoint_timeout(timeout)


def test_at_least_once_with_unaligned_checkpoints_fails_at_submit_with_a_clear_error():
    env = StreamExecutionEnvironment.get_execution_environment()
    env.enable_checkpointing(1000, CheckpointingMode.AT_LEAST_ONCE)
    env.get_checkpoint_config().enable_unaligned_checkpoints()
    env.from_collection([1, 2]).print()
    with pytest.raises(ConfigurationError, match=r"unaligned checkpoints need .*EXACTLY_ONCE"):
        env.execute_async("refused")


def settings(**checkpointing) -> TaskSettings:
    return TaskSettings(
        job_id="job",
        attempt=0,
        deployment_id="d",
        secret=b"s",
        jobmaster_address=("127.0.0.1", 1),
        task_bind_address="127.0.0.1",
        checkpoint_dir="/tmp/nowhere",
        partitions=(),
        **checkpointing,
    )


@pytest.mark.parametrize(
    ("checkpointing", "handler", "sources_unaligned"),
    [
        ({}, CheckpointBarrierAligner, False),
        ({"checkpointing_mode": "at_least_once"}, CheckpointBarrierTracker, False),
        ({"unaligned_checkpoints": True}, CheckpointBarrierUnaligner, True),
        (
            {"unaligned_checkpoints": True, "aligned_checkpoint_timeout_ms": 50},
            CheckpointBarrierUnaligner,
            False,
        ),
    ],
    ids=["exactly-once", "at-least-once", "unaligned", "aligned-with-timeout"],
)
def test_a_task_picks_its_barrier_handler_from_the_jobs_settings(
    checkpointing, handler, sources_unaligned
):
    task_settings = settings(**checkpointing)
    assert type(task_settings.barrier_handler(2)) is handler
    assert task_settings.sources_unaligned is sources_unaligned

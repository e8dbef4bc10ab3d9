"""`barrierflow run --allow-fallback-duplicates` reaches the job for its run only, like
`CheckpointConfig.set_allow_fallback_duplicates(True)` (issue 21, item 6)."""

from __future__ import annotations

import textwrap

import pytest
from click.testing import CliRunner

from barrierflow import StreamExecutionEnvironment
from barrierflow.api.environment import command_line_defaults
from barrierflow.cli import main

JOB = textwrap.dedent(
    """
    from barrierflow.api.environment import command_line_defaults
    print("allowed:", command_line_defaults.allow_fallback_duplicates)
    """
)


@pytest.mark.parametrize("flag", [True, False])
def test_the_flag_reaches_the_job_for_its_run_only(tmp_path, flag):
    job = tmp_path / "job.py"
    job.write_text(JOB)
    args = ["run", str(job)] + (["--allow-fallback-duplicates"] if flag else [])
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1] == f"allowed: {flag}"
    assert command_line_defaults.allow_fallback_duplicates is False


def test_the_checkpoint_config_allows_them_explicitly():
    config = StreamExecutionEnvironment().get_checkpoint_config()
    assert config.is_allow_fallback_duplicates() is False
    assert config.set_allow_fallback_duplicates(True) is config
    assert config.is_allow_fallback_duplicates() is True

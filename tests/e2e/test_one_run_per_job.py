"""One run per job (issue 21, item 3): a job started again with the same name and checkpoint
folder while it runs is refused at once, in this process and from the command line, naming
the running one, and the running one finishes exactly once."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from barrierflow.api.environment import ENDED_STATES
from barrierflow.errors import JobAlreadyRunningError

from .conftest import read_rows
from .jobs import paced_word_count, running_count_rows, word_of

pytestmark = pytest.mark.spark

RECORDS = 8_000
RATE = 1_000
"""About 8 s of input, after a start of several seconds: the second starts come meanwhile."""

OTHER_JOB = textwrap.dedent(
    """
    from barrierflow import StreamExecutionEnvironment

    env = StreamExecutionEnvironment.get_execution_environment()
    env.enable_checkpointing(300)
    env.from_collection(["x"]).print()
    env.execute("one-run")
    """
)


def test_a_second_start_is_refused_at_once_while_the_first_finishes_exactly_once(spark, tmp_path):
    first = paced_word_count(tmp_path, RECORDS, RATE).execute_async("one-run")
    job_id = first.get_job_id()
    lease = tmp_path / "checkpoints" / "one-run" / "_lease-1"
    deadline = time.monotonic() + 60
    while not lease.exists():  # taken first thing, before Spark is asked for anything
        assert time.monotonic() < deadline and first.get_job_status() not in ENDED_STATES
        first.join(0.05)

    job_file = tmp_path / "other_job.py"
    job_file.write_text(OTHER_JOB)
    started = time.monotonic()
    command = subprocess.Popen(
        [str(Path(sys.executable).parent / "barrierflow"), "run", str(job_file),
         "--checkpoint-dir", str(tmp_path / "checkpoints"), "--progress", "off"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
        env={**os.environ, "PYSPARK_PYTHON": sys.executable},
    )  # fmt: skip

    second = paced_word_count(tmp_path, RECORDS, None).execute_async("one-run")
    with pytest.raises(JobAlreadyRunningError) as refused:
        second.wait(timeout=60)
    line = str(refused.value)
    assert f"job 'one-run' is already running on checkpoint folder file://{tmp_path}" in line
    assert f"job {job_id} on host " in line and f"(pid {os.getpid()})" in line
    assert f"`barrierflow cancel {job_id}`" in line

    _, stderr = command.communicate(timeout=120)
    refused_after_s = time.monotonic() - started
    assert first.get_job_status() not in ENDED_STATES  # both refusals came while it ran
    assert command.returncode == 1, stderr[-3000:]
    errors = [text for text in stderr.splitlines() if text.startswith("error:")]
    assert len(errors) == 1 and f"job {job_id} on host " in errors[0], stderr[-3000:]
    assert "Spark" not in stderr  # refused before any session started
    print(f"the command line's second start was refused after {refused_after_s:.1f} s")

    assert first.wait_for_completed_checkpoints(1, timeout=120)
    if first.rest_url is not None:  # the lease names it once it is up
        assert first.rest_url in lease.read_text()
    first.wait(timeout=240)
    assert read_rows(tmp_path / "out") == running_count_rows(word_of(i) for i in range(RECORDS))
    assert list(lease.parent.glob("_lease-*")) == []

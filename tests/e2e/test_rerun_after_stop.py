"""A job stopped with a savepoint, then run again without `--from-savepoint` (issue 11,
"Retained checkpoints"): the rerun restores the stop's savepoint, the newest snapshot of the
job, not the older retained checkpoint of its folder, so nothing is committed twice."""

from __future__ import annotations

import logging

import pytest

from barrierflow import _fs
from barrierflow.checkpoint.storage import load_metadata

from .conftest import read_rows
from .jobs import DEPLOY_S, paced_word_count, running_count_rows, word_of

pytestmark = [pytest.mark.spark, pytest.mark.timeout(900)]  # minutes on a busy host

RECORDS = 12_000


def test_a_rerun_after_a_stop_with_savepoint_restores_the_savepoint_and_commits_once(
    spark, tmp_path, caplog
):
    first = paced_word_count(tmp_path, RECORDS, 3000).execute_async("rerun-after-stop")
    assert first.wait_for_completed_checkpoints(2, timeout=DEPLOY_S)
    stopped = first.stop_with_savepoint(False, str(tmp_path / "savepoints"), timeout=120).result()
    first.wait(timeout=60)
    savepoint_id = load_metadata(_fs.Location(stopped))["checkpoint_id"]
    job_dir = tmp_path / "checkpoints" / "rerun-after-stop"
    retained = [int(p.name[4:]) for p in job_dir.glob("chk-*") if (p / "_metadata").exists()]
    assert retained and max(retained) < savepoint_id  # the trap: an older checkpoint is left
    assert 0 < sum(read_rows(tmp_path / "out").values()) < RECORDS

    with caplog.at_level(logging.INFO, logger="barrierflow.cluster"):
        rerun = paced_word_count(tmp_path, RECORDS, None).execute_async("rerun-after-stop")
        rerun.wait(timeout=DEPLOY_S)

    # Every running count exactly once: the records between the retained checkpoint and the
    # savepoint were committed by the first run and are not read again.
    assert read_rows(tmp_path / "out") == running_count_rows(word_of(i) for i in range(RECORDS))
    assert rerun.restored_from == savepoint_id
    assert f"restoring savepoint {savepoint_id} from {stopped}" in caplog.text

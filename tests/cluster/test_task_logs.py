"""Task logs: a task's Python log records reach the JobMaster in batches and land in the
subtask's file of the job's log folder; the driver's own lines go to jobmaster.log."""

from __future__ import annotations

import logging

from job_master_builder import PARTITIONS, job_master_builder

from barrierflow.cluster.executor.task_logs import BUFFER_RECORDS, TaskLogForwarder, task_log_name
from barrierflow.graph.job_graph import SubtaskId
from barrierflow.runtime import task_messages as msg


def record(message: str, attempt: int = 0, level: str = "WARNING") -> msg.TaskLogRecord:
    return msg.TaskLogRecord(1_700_000_000_000, level, "user.job", message, attempt)


def test_a_tasks_records_are_appended_to_its_subtasks_file(tmp_path):
    job = job_master_builder(tmp_path)
    job.run_all()
    subtasks = job.master.partitions
    job.send(1, msg.TaskLogRecords(0, 1, (record("first"), record("second"))))
    job.send(1, msg.TaskLogRecords(0, 1, (record("third"),)))
    job.send(2, msg.TaskLogRecords(0, 2, (record("other task"),)))

    folder = tmp_path / "logs"
    first = (folder / task_log_name(subtasks[1])).read_text().splitlines()
    assert [line.split(": ", 1)[1] for line in first] == ["first", "second", "third"]
    assert "WARNING [attempt 0] user.job" in first[0]
    assert (folder / task_log_name(subtasks[2])).read_text().endswith("other task\n")
    assert not (folder / task_log_name(subtasks[0])).exists()


def test_records_of_an_earlier_attempt_are_kept_and_drops_are_said(tmp_path):
    """A failed attempt's last words arrive after the JobMaster moved on: they still count."""
    job = job_master_builder(tmp_path)
    job.run_all()
    job.send(0, msg.TaskLogRecords(7, 0, (record("late words", attempt=7),), dropped=3))
    text = (tmp_path / "logs" / task_log_name(job.master.partitions[0])).read_text()
    assert "[attempt 7] user.job: late words" in text
    assert "3 records dropped" in text
    assert job.master.status.state != "FAILED"


def test_the_jobmasters_lines_go_to_jobmaster_log_and_spark_log_is_asked_for(tmp_path):
    job = job_master_builder(tmp_path)
    logging.getLogger("barrierflow.cluster.jobmaster.job_master").warning("a line for the file")
    job.master.close()
    assert "a line for the file" in (tmp_path / "logs" / "jobmaster.log").read_text()
    assert job.runner is not None and job.runner.log_folder == tmp_path / "logs"


def test_the_forwarder_batches_records_at_its_level_and_counts_what_it_dropped():
    attempt = [0]
    forwarder = TaskLogForwarder(partition=3, attempt=lambda: attempt[0], level=logging.WARNING)
    logger = logging.getLogger("test.task_logs.forwarder")
    logger.addHandler(forwarder)
    logger.propagate = False
    try:
        logger.info("below the level")
        logger.warning("kept %d", 1)
        attempt[0] = 1
        try:
            raise ValueError("bad record")
        except ValueError:
            logger.exception("failed")
        batch = forwarder.take()
        assert batch is not None and batch.partition == 3 and batch.dropped == 0
        assert [(r.message, r.attempt, r.level) for r in batch.records] == [
            ("kept 1", 0, "WARNING"),
            ("failed", 1, "ERROR"),
        ]
        assert "ValueError: bad record" in batch.records[1].exception
        assert forwarder.take() is None
        for index in range(BUFFER_RECORDS + 5):
            logger.warning("flood %d", index)
        sent: list[msg.TaskLogRecords] = []
        forwarder.flush_to(sent.append)
        assert sum(len(b.records) for b in sent) == BUFFER_RECORDS
        assert sum(b.dropped for b in sent) == 5
        assert sent[-1].records[-1].message == f"flood {BUFFER_RECORDS + 4}"
    finally:
        logger.removeHandler(forwarder)


def test_task_log_names_follow_vertex_and_subtask():
    assert task_log_name(SubtaskId(0, 1)) == "task-0-1.log"
    assert len(PARTITIONS) > 2

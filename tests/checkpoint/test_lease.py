"""The lease's files on a real disk and on an S3-compatible server: one start wins, a second is
refused naming the first, an expired lease or one of a killed process is taken over, the old
holder learns it lost the lease and never deletes its successor's, faults of the storage are
survived until the lease expires."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import textwrap
import threading

import pytest

from barrierflow import _fs
from barrierflow._clock import ManualClock
from barrierflow.checkpoint.lease import (
    EXPIRY_MS,
    CheckpointLease,
    probe_process,
    this_process,
)
from barrierflow.checkpoint.lease_rules import ProcessState, first_lease
from barrierflow.errors import CheckpointStorageError, JobAlreadyRunningError, LeaseLostError

NAME = "word-count"


def lease_of(folder, job_id: str, clock: ManualClock, **kwargs) -> CheckpointLease:
    holder = this_process(job_id, f"run-{job_id}", NAME)
    return CheckpointLease(_fs.location(folder), holder, clock, **kwargs)


def lease_files(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def read_lease(folder, generation: int) -> dict:
    return json.loads((folder / f"_lease-{generation}").read_text())


def test_a_start_takes_the_lease_and_a_second_start_is_refused_naming_the_first(tmp_path):
    folder = tmp_path / "chk" / NAME
    clock = ManualClock(epoch_ms=1_000_000)
    first = lease_of(folder, "first", clock)
    first.acquire()
    first.renew("http://127.0.0.1:8081")
    assert lease_files(folder) == ["_lease-1"]
    written = read_lease(folder, 1)
    assert written["holder"]["job_id"] == "first"
    assert written["holder"]["pid"] == os.getpid()
    assert written["expires_ms"] == 1_000_000 + EXPIRY_MS

    clock.advance(3_000)
    second = lease_of(folder, "second", clock)
    with pytest.raises(JobAlreadyRunningError) as refused:
        second.acquire()
    line = str(refused.value)
    assert f"job 'word-count' is already running on checkpoint folder file://{folder}" in line
    assert f"job first on host {first.holder.host} (pid {os.getpid()})" in line
    assert "REST http://127.0.0.1:8081" in line
    assert "`barrierflow cancel first`" in line and "(in 27 s)" in line
    assert not second.held
    assert lease_files(folder) == ["_lease-1"]  # the refused start wrote nothing
    assert read_lease(folder, 1)["holder"]["job_id"] == "first"


def test_of_simultaneous_starts_exactly_one_wins(tmp_path):
    folder = tmp_path / NAME
    clock = ManualClock(epoch_ms=1_000_000)
    starts = [lease_of(folder, f"start-{n}", clock) for n in range(8)]
    gate = threading.Barrier(len(starts))
    outcomes: dict[str, str] = {}

    def start(lease: CheckpointLease) -> None:
        gate.wait()
        try:
            lease.acquire()
            outcomes[lease.holder.job_id] = "won"
        except JobAlreadyRunningError:
            outcomes[lease.holder.job_id] = "refused"

    threads = [threading.Thread(target=start, args=(lease,)) for lease in starts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    winners = [job for job, outcome in outcomes.items() if outcome == "won"]
    assert len(outcomes) == 8 and len(winners) == 1
    assert lease_files(folder) == ["_lease-1"]
    assert read_lease(folder, 1)["holder"]["job_id"] == winners[0]


def test_an_expired_lease_is_taken_over_and_its_old_holder_stops_without_deleting_it(
    tmp_path, caplog
):
    folder = tmp_path / NAME
    clock = ManualClock(epoch_ms=1_000_000)
    old = lease_of(folder, "old", clock)
    old.acquire()
    clock.advance(EXPIRY_MS)  # never renewed: a driver stuck for 30 s, or on another host
    new = lease_of(folder, "new", clock)
    with caplog.at_level(logging.WARNING, "barrierflow.checkpoint.lease"):
        new.acquire()
    assert f"takes over checkpoint folder file://{folder} from job old on host" in caplog.text
    assert "last renewed 30 s ago and has expired" in caplog.text
    assert lease_files(folder) == ["_lease-2"]  # the stale generation is gone

    with pytest.raises(LeaseLostError) as lost:
        old.renew(None)
    assert str(lost.value).startswith(
        f"lost the lease of checkpoint folder file://{folder} (taken over by job new on host "
    )
    assert str(lost.value).endswith("stopping so that two runs never write the same checkpoints")
    assert not old.held
    old.release()
    assert lease_files(folder) == ["_lease-2"]
    new.renew(None)
    new.release()
    assert lease_files(folder) == []


def test_a_holder_renews_before_it_expires_and_keeps_the_folder(tmp_path):
    folder = tmp_path / NAME
    clock = ManualClock(epoch_ms=1_000_000)
    holder = lease_of(folder, "holder", clock)
    holder.acquire()
    for _ in range(10):  # 50 s of renewals every 5 s
        clock.advance(5_000)
        holder.renew("http://h:1")
    assert read_lease(folder, 1)["expires_ms"] == clock.epoch_millis() + EXPIRY_MS
    with pytest.raises(JobAlreadyRunningError):
        lease_of(folder, "late", clock).acquire()


def test_a_storage_fault_at_renewal_is_survived_until_the_lease_expires(tmp_path, caplog):
    folder = tmp_path / NAME
    clock = ManualClock(epoch_ms=1_000_000)
    holder = lease_of(folder, "holder", clock)
    holder.acquire()
    (folder / "_lease-1").unlink()
    (folder / "_lease-1").mkdir()  # reading it now fails with an OSError
    clock.advance(5_000)
    with caplog.at_level(logging.WARNING, "barrierflow.checkpoint.lease"):
        holder.renew(None)
    assert "could not renew its lease" in caplog.text and "it expires in 25 s" in caplog.text
    assert holder.held
    clock.advance(EXPIRY_MS - 5_000)
    with pytest.raises(LeaseLostError, match="not renewed before it expired"):
        holder.renew(None)


def test_a_lease_file_deleted_under_a_holder_is_a_lost_lease(tmp_path):
    folder = tmp_path / NAME
    holder = lease_of(folder, "holder", ManualClock())
    holder.acquire()
    (folder / "_lease-1").unlink()
    with pytest.raises(LeaseLostError, match="its file is gone"):
        holder.renew(None)


KILLED_DRIVER = textwrap.dedent(
    """
    import sys
    from barrierflow import _fs
    from barrierflow.checkpoint.lease import CheckpointLease, this_process

    lease = CheckpointLease(_fs.location(sys.argv[1]), this_process("killed", "r", "word-count"))
    lease.acquire()
    lease.renew("http://127.0.0.1:9")
    print("held", flush=True)
    sys.stdin.read()  # until killed
    """
)


def test_the_lease_of_a_killed_process_on_this_host_is_taken_at_once(tmp_path, caplog):
    folder = tmp_path / NAME
    driver = subprocess.Popen(
        [sys.executable, "-c", KILLED_DRIVER, str(folder)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    try:
        assert driver.stdout.readline() == "held\n"
        clock = ManualClock(epoch_ms=read_lease(folder, 1)["renewed_ms"])  # its lease is live
        with pytest.raises(JobAlreadyRunningError, match=f"pid {driver.pid}"):
            lease_of(folder, "rerun", clock).acquire()
        driver.kill()
        os.waitid(os.P_PID, driver.pid, os.WEXITED | os.WNOWAIT)  # dead, not reaped: a zombie
        rerun = lease_of(folder, "rerun", clock)
        with caplog.at_level(logging.WARNING, "barrierflow.checkpoint.lease"):
            rerun.acquire()
    finally:
        driver.kill()
        driver.wait()
    assert f"its process {driver.pid} on this machine is gone" in caplog.text
    assert lease_files(folder) == ["_lease-2"]


def test_a_pid_now_running_another_process_is_told_apart_by_its_start_time(tmp_path):
    own = this_process("x", "r", NAME)
    assert probe_process(own.pid, own.process_start) is ProcessState.ALIVE
    if own.process_start is not None:  # /proc gives start times here
        assert probe_process(own.pid, "1") is ProcessState.REUSED
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                              capture_output=True, text=True, check=True)  # fmt: skip
    assert probe_process(int(finished.stdout), None) is ProcessState.GONE


def test_the_refused_start_is_clear_about_an_unwritable_or_unreadable_folder(tmp_path):
    blocker = tmp_path / "blocker"
    blocker.write_text("a file where a folder should be")
    with pytest.raises(CheckpointStorageError, match="blocker/word-count is not writable"):
        lease_of(blocker / NAME, "a", ManualClock()).acquire()
    folder = tmp_path / NAME
    folder.mkdir()
    (folder / "_lease-4").write_text("not json")
    with pytest.raises(CheckpointStorageError, match=r"_lease-4 is not a lease.*delete that file"):
        lease_of(folder, "a", ManualClock()).acquire()


# ---- an object store -------------------------------------------------------------------------


def test_on_an_object_store_a_start_reads_its_lease_back_and_the_last_writer_wins(s3_server):
    folder = _fs.location(s3_server.fresh_uri("chk")).child(NAME)
    clock = ManualClock(epoch_ms=1_000_000)
    other = this_process("other", "r", NAME)

    def other_start_lands(seconds: float) -> None:
        """While the first start settles, a second one that found the folder free at the
        same moment (before the first upload) uploads the same generation over it."""
        rival = first_lease(1, other, clock.epoch_millis(), EXPIRY_MS)
        _fs.write_bytes(folder.child("_lease-1"), rival.encode())

    first = CheckpointLease(folder, this_process("first", "r", NAME), clock,
                            sleep=other_start_lands)  # fmt: skip
    with pytest.raises(JobAlreadyRunningError, match="job other on host"):
        first.acquire()
    assert not first.held
    assert _fs.list_dir(folder) == ["_lease-1"]

    rerun = CheckpointLease(folder, this_process("rerun", "r", NAME), clock, sleep=lambda s: None)
    with pytest.raises(JobAlreadyRunningError, match="job other"):
        rerun.acquire()
    clock.advance(EXPIRY_MS)
    rerun.acquire()
    assert _fs.list_dir(folder) == ["_lease-2"]
    rerun.renew("http://h:1")
    rerun.release()
    assert _fs.list_dir(folder) == []

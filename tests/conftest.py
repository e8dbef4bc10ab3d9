"""Settings of the whole test session."""

from __future__ import annotations

import os
import shutil
import tempfile

import pytest
from hypothesis import settings

# Property tests check behaviour, not speed: on a busy 2-core CI machine one example can take
# longer than hypothesis's default 200 ms deadline, which would fail a correct test.
settings.register_profile("barrierflow", deadline=None)
settings.load_profile("barrierflow")

# Jobs started by tests register in a folder of their own, never in the user's registry of
# running jobs (tests that look at a registry point BARRIERFLOW_REGISTRY_DIR elsewhere).
_session_folders = [tempfile.mkdtemp(prefix="barrierflow-test-registry-")]
os.environ["BARRIERFLOW_REGISTRY_DIR"] = _session_folders[0]
# Likewise every job's log folder (spark.log, jobmaster.log, task logs) goes to a temporary
# folder, not ./.barrierflow/logs of the checkout.
if "BARRIERFLOW_LOG_DIR" not in os.environ:
    _session_folders.append(tempfile.mkdtemp(prefix="barrierflow-test-logs-"))
    os.environ["BARRIERFLOW_LOG_DIR"] = _session_folders[-1]


def pytest_terminal_summary(terminalreporter, exitstatus: int) -> None:
    """Remove the session's registry and log folders after a passing run; keep them (and say
    where) after a failing one, for its job logs."""
    if exitstatus == 0:
        for folder in _session_folders:
            shutil.rmtree(folder, ignore_errors=True)
    else:
        terminalreporter.write_line(f"job logs of this run: {', '.join(_session_folders)}")


# Session fixtures of the real servers, started only when a test asks for them.
from nats_server import nats_server  # noqa: E402, F401
from pg_server import postgres_server  # noqa: E402, F401
from s3_fault_proxy import s3_faults  # noqa: E402, F401
from s3_server import s3_server  # noqa: E402, F401


@pytest.fixture
def storage_faults():
    """Install `_fs.FaultInjector` rules for one test: `storage_faults("delete:*/chk-1:1")`."""
    from barrierflow import _fs

    removers = []
    yield lambda spec: removers.append(_fs.add_hook(_fs.FaultInjector.parse(spec)))
    for remove in removers:
        remove()

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

# Every folder a test session makes outside pytest's tmp_path lives under one root, shared
# by the pytest-xdist workers (they inherit the environment of the process that starts them)
# and removed after a passing run.
_ROOT_VARIABLE = "BARRIERFLOW_TEST_SESSION_ROOT"
if _ROOT_VARIABLE not in os.environ:
    os.environ[_ROOT_VARIABLE] = tempfile.mkdtemp(prefix="barrierflow-test-")
_session_root = os.environ[_ROOT_VARIABLE]
_worker = os.environ.get("PYTEST_XDIST_WORKER", "main")  # gw0, gw1... under pytest-xdist
# Jobs started by tests register in a folder of their own, one per worker (two workers may
# run jobs of the same name at once), never in the user's registry of running jobs (tests
# that look at a registry point BARRIERFLOW_REGISTRY_DIR elsewhere).
os.environ["BARRIERFLOW_REGISTRY_DIR"] = os.path.join(_session_root, f"registry-{_worker}")
os.makedirs(os.environ["BARRIERFLOW_REGISTRY_DIR"], exist_ok=True)
# Likewise every job's log folder (spark.log, jobmaster.log, task logs) goes to the session's
# root, not ./.barrierflow/logs of the checkout.
if "BARRIERFLOW_LOG_DIR" not in os.environ:
    os.environ["BARRIERFLOW_LOG_DIR"] = os.path.join(_session_root, "logs")
    os.makedirs(os.environ["BARRIERFLOW_LOG_DIR"], exist_ok=True)


# The two pytest-xdist workers (`--dist loadfile`) take whole files from one queue, in the
# order below, each taking the next file when it is nearly done with its own. A heavy file
# taken last keeps one worker busy alone at the end, so the queue starts with the known
# heavy files, heaviest first (minutes each, from `--durations` of a quiet run), then the
# other end-to-end files (Spark jobs, tens of seconds each), then the rest (seconds each),
# which fill in the end. (`--no-loadscope-reorder` in pyproject.toml keeps this order:
# xdist would otherwise queue the files with the most tests first.)
HEAVY_FILES = (
    "tests/e2e/test_standalone.py",  # ~260 s: a standalone Spark cluster, four drivers
    "tests/e2e/test_chaos.py",  # ~170 s: chaos runs, 3-15 failures each
    "tests/e2e/test_driver_stop_cleanup.py",  # ~140 s: two drivers struck, two reruns
    "tests/e2e/test_chaos_drivers.py",  # ~100 s (est.): a driver killed, a new one starts Spark
    "tests/e2e/test_local_cluster.py",  # ~90 s: an executor JVM killed
    "tests/e2e/test_flagship.py",  # ~55 s
    "tests/e2e/test_quiet_logs.py",  # ~40 s
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Queue the heavy files first (see HEAVY_FILES); a file's tests stay together and in
    their order, and so does every group."""

    def rank(item: pytest.Item) -> tuple[int, int]:
        path = item.nodeid.split("::", 1)[0]
        if path in HEAVY_FILES:
            return (0, HEAVY_FILES.index(path))
        return (1, 0) if path.startswith("tests/e2e/") else (2, 0)

    items.sort(key=rank)  # stable: the rest keep their collection order


def pytest_terminal_summary(terminalreporter, exitstatus: int) -> None:
    """Remove the session's folders after a passing run; keep them (and say where) after a
    failing one, for its job logs. (Only the process that reports runs this hook.)"""
    if exitstatus == 0:
        shutil.rmtree(_session_root, ignore_errors=True)
    else:
        terminalreporter.write_line(f"job logs of this run: {_session_root}")


# Session fixtures of the real servers, started only when a test asks for them.
from support.kafka_cluster import kafka_cluster  # noqa: E402, F401
from support.nats_server import nats_server  # noqa: E402, F401
from support.pg_server import postgres_server  # noqa: E402, F401
from support.s3_fault_proxy import s3_faults  # noqa: E402, F401
from support.s3_server import s3_server  # noqa: E402, F401


@pytest.fixture
def storage_faults():
    """Install `_fs.FaultInjector` rules for one test: `storage_faults("delete:*/chk-1:1")`."""
    from barrierflow import _fs

    removers = []
    yield lambda spec: removers.append(_fs.add_hook(_fs.FaultInjector.parse(spec)))
    for remove in removers:
        remove()

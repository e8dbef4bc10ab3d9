"""The slot wait, its messages, durations, and the Python files shipped to executors: the
parts of spark_session that need no Spark."""

from __future__ import annotations

import logging
import os
import stat
import sys
import zipfile

import pytest

from barrierflow._clock import ManualClock
from barrierflow.cluster.spark.session import (
    SparkOptions,
    _is_this_python,
    is_local_master,
    parse_duration_s,
    python_file_for_spark,
    shortage_message,
    wait_for_slots,
    zip_folder,
)
from barrierflow.errors import ConfigurationError, InsufficientResourcesError


class Cluster:
    """Executors that register as the (manual) clock moves: `arrivals` maps seconds after
    the start to the slot count from then on."""

    def __init__(self, clock: ManualClock, arrivals: dict[float, int]) -> None:
        self.clock = clock
        self.arrivals = arrivals
        self.pauses: list[float] = []

    def slots(self) -> int:
        now = self.clock.monotonic()
        return max((n for t, n in self.arrivals.items() if t <= now), default=0)

    def pause(self, seconds: float) -> None:
        self.pauses.append(seconds)
        self.clock.advance(round(seconds * 1000))


def shortage(have: int, waited: float) -> InsufficientResourcesError:
    return InsufficientResourcesError(f"have {have} after {waited:.2f} s")


def wait(cluster: Cluster, needed: int, timeout_s: float) -> int:
    return wait_for_slots(
        needed, cluster.slots, timeout_s, cluster.clock, cluster.pause, shortage, poll_s=0.5,
        report_s=10,
    )  # fmt: skip


def test_enough_slots_at_once_returns_without_pausing():
    cluster = Cluster(ManualClock(), {0: 4})
    assert wait(cluster, 4, 60) == 4
    assert cluster.pauses == []


def test_the_wait_returns_as_soon_as_the_executors_registered(caplog):
    cluster = Cluster(ManualClock(), {0: 0, 3: 2, 12: 4})
    with caplog.at_level(logging.INFO, "barrierflow.cluster.spark.session"):
        assert wait(cluster, 4, 60) == 4
    assert cluster.clock.monotonic() == 12
    assert set(cluster.pauses) == {0.5}
    progress = [r.getMessage() for r in caplog.records if "waiting for executors" in r.message]
    assert progress == [
        "waiting for executors: 0 of 4 task slots registered (0 s of 60 s)",
        "waiting for executors: 2 of 4 task slots registered (10 s of 60 s)",
    ]


def test_too_few_slots_raise_after_the_timeout_and_never_pause_past_it():
    cluster = Cluster(ManualClock(), {0: 2, 1: 4})
    with pytest.raises(InsufficientResourcesError, match=r"have 4 after 5.00 s"):
        wait(cluster, 6, 5)
    assert cluster.clock.monotonic() == 5


def test_a_timeout_between_polls_is_not_overshot():
    cluster = Cluster(ManualClock(), {})
    with pytest.raises(InsufficientResourcesError, match=r"have 0 after 1.20 s"):
        wait(cluster, 1, 1.2)
    assert cluster.pauses[-1] == pytest.approx(0.2)


def test_a_zero_timeout_checks_once():
    cluster = Cluster(ManualClock(), {0: 1})
    with pytest.raises(InsufficientResourcesError, match=r"have 1 after 0.00 s"):
        wait(cluster, 2, 0)
    assert cluster.pauses == []


def test_the_shortage_message_names_the_counts_and_the_settings_that_give_slots():
    text = shortage_message(
        "spark://h:7077", 6, 4, 30, {"spark.executor.cores": "2", "spark.task.cpus": "1"}
    )
    assert text.startswith(
        "the job has 6 subtasks but Spark master spark://h:7077 offers 4 task slots after "
        "waiting 30 s for executors."
    )
    for setting in (
        "spark.executor.instances",
        "--num-executors",
        "spark.executor.cores (2)",
        "spark.task.cpus (1)",
        "spark.dynamicAllocation.minExecutors",
        "spark.dynamicAllocation.enabled=false",
        "lower the job's parallelism",
        "spark.barrierflow.slots.waitTimeout",
    ):
        assert setting in text


def test_with_dynamic_allocation_on_the_message_says_so():
    text = shortage_message("yarn", 8, 2, 60, {"spark.dynamicAllocation.enabled": "true"})
    assert "dynamic allocation is on: set spark.dynamicAllocation.enabled=false" in text
    assert "minExecutors high enough for 8 slots" in text


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("60s", 60), ("2min", 120), ("2m", 120), ("500ms", 0.5), ("45", 45), (" 1h ", 3600),
     ("1.5s", 1.5), ("10 S", 10)],
)  # fmt: skip
def test_durations_are_read_as_spark_writes_them(text, seconds):
    assert parse_duration_s(text) == seconds


@pytest.mark.parametrize("text", ["", "soon", "-5s", "5 days", "1e3"])
def test_a_bad_duration_is_a_configuration_error_naming_the_key(text):
    with pytest.raises(ConfigurationError, match=r"spark\.barrierflow\.slots\.waitTimeout must be"):
        parse_duration_s(text)


def test_local_cluster_counts_as_a_cluster_master():
    assert is_local_master("local[4]") and is_local_master("local")
    assert not is_local_master("local-cluster[2,2,1024]")
    assert not is_local_master("spark://127.0.0.1:7077")


def test_only_workers_running_this_interpreter_get_the_preloading_daemon(tmp_path):
    # the daemon imports barrierflow: another Python may not have it (or another version)
    assert _is_this_python(sys.executable)
    other = tmp_path / "bin" / "python"  # another environment's link to the same binary
    other.parent.mkdir()
    other.symlink_to(os.path.realpath(sys.executable))
    assert not _is_this_python(str(other))
    assert not _is_this_python(str(tmp_path / "no-such-python"))


def test_merged_options_add_files_once_and_let_the_later_conf_win():
    first = SparkOptions({"a": "1", "b": "1"}, ("x.py",))
    merged = first.merged(SparkOptions({"b": "2"}, ("x.py", "y.zip")))
    assert merged == SparkOptions({"a": "1", "b": "2"}, ("x.py", "y.zip"))


def test_a_folder_is_shipped_as_a_zip_importable_by_its_name(tmp_path):
    package = tmp_path / "helpers"
    (package / "__pycache__").mkdir(parents=True)
    (package / "__init__.py").write_text("VALUE = 1\n")
    (package / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"")
    shipped = python_file_for_spark(str(package))
    assert shipped.endswith("helpers.zip")
    with zipfile.ZipFile(shipped) as archive:
        assert archive.namelist() == ["helpers/__init__.py"]
    assert zip_folder(package) == zip_folder(package)  # zipped once per process


def test_a_missing_or_unusable_python_file_is_refused(tmp_path):
    with pytest.raises(ConfigurationError, match="does not exist"):
        python_file_for_spark(str(tmp_path / "nope.py"))
    (tmp_path / "data.txt").write_text("")
    with pytest.raises(ConfigurationError, match=r"not a \.py, \.zip or \.egg"):
        python_file_for_spark(str(tmp_path / "data.txt"))
    (tmp_path / "ok.py").write_text("")
    assert python_file_for_spark(str(tmp_path / "ok.py")) == str(tmp_path / "ok.py")


def test_the_startup_log4j_file_has_a_name_nobody_can_guess_and_only_we_can_read(
    tmp_path, monkeypatch
):
    # issue 21: the file was /tmp/barrierflow-log4j2-startup-<uid>.properties, a name another
    # user could take first (then our JVM read their file)
    from barrierflow.cluster.spark import session as spark_session

    monkeypatch.setattr(spark_session.tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(spark_session, "_startup_config", [])
    squatted = tmp_path / f"barrierflow-log4j2-startup-{os.getuid()}.properties"
    squatted.write_text("rootLogger.level = ALL\n")
    path = spark_session.startup_log_config()
    assert path.parent == tmp_path and path != squatted
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert "rootLogger.level = error" in path.read_text()
    assert spark_session.startup_log_config() == path  # one per process
    monkeypatch.setattr(spark_session, "_startup_config", [])
    assert spark_session.startup_log_config() != path  # never the same name twice

"""The same job on a Spark standalone cluster (a Master and two Workers started from the pyspark
package), launched as a user would: `barrierflow run job.py --master spark://...`.

The driver runs in an environment of its own that has a module the executors lack
(`driver_only_helpers`, installed next to the driver's packages, so it is pickled by
reference): without `--py-files` the job fails at once naming it; with it, the output is
exactly what the job must write, and what a local[*] run writes, and what its print() sink
prints in the executors' tasks shows on the driver's standard output (as on local[*]). A
job needing more slots than the cluster has fails after the slot wait, naming the settings.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import sysconfig
from collections import defaultdict
from pathlib import Path

import pytest

from .conftest import read_rows
from .spark_cluster import (
    REPO,
    SPARK_HOME,
    StandaloneCluster,
    cluster_environment,
    standalone_cluster,
)
from .standalone_job import PRINTED, expected

pytestmark = pytest.mark.spark

JOB = Path(__file__).with_name("standalone_job.py")
WORKERS, CORES = 2, 7
PARALLELISM = 4
"""Three vertices (source+map, count+sink, window+sink) at 4 and --print's source+print at
2: 14 subtasks, 14 slots."""
RECORDS = 3000
HELPER = "def shout(word):\n    return word.upper()\n"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory) -> StandaloneCluster:
    with standalone_cluster(tmp_path_factory.mktemp("standalone"), WORKERS, CORES) as running:
        yield running


@pytest.fixture(scope="module")
def driver_python(tmp_path_factory) -> Path:
    """A Python environment with this one's packages (through a .pth file) plus
    `driver_only_helpers`: the driver has it, the executors (this Python) do not."""
    folder = tmp_path_factory.mktemp("driver-env")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    python = folder / "bin" / "python"
    site = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    (Path(site) / "parent_env.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (Path(site) / "driver_only_helpers.py").write_text(HELPER)
    return python


def start_run(python: Path, cluster: StandaloneCluster | None, *args: str) -> subprocess.Popen:
    """`barrierflow run` of the job on `cluster`, or on the embedded local[*] if None, started
    (`finish` waits for it)."""
    master = [] if cluster is None else ["--master", cluster.master_url]
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "PYSPARK_PYTHON": sys.executable,
    }
    return subprocess.Popen(
        [str(python), "-m", "barrierflow.cli", "run", str(JOB), *master,
         "--conf", f"spark.pyspark.python={sys.executable}", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=REPO,
    )  # fmt: skip


def finish(run: subprocess.Popen, timeout: float = 240) -> subprocess.CompletedProcess:
    """Wait for a started run (killed if it outlasts `timeout`), with its output."""
    try:
        stdout, stderr = run.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        run.kill()
        run.communicate()
        raise
    return subprocess.CompletedProcess(run.args, run.returncode, stdout, stderr)


def barrierflow_run(python: Path, cluster: StandaloneCluster | None, *args: str, timeout=240):
    """`barrierflow run` of the job on `cluster`, or on the embedded local[*] if None."""
    return finish(start_run(python, cluster, *args), timeout)


def test_without_py_files_the_job_fails_at_once_naming_the_module_only_the_driver_has(
    cluster, driver_python, tmp_path
):
    # At parallelism 1 (3 subtasks): the executors still start and run the job's tasks, which
    # fail at once, but with 3 Python workers to start instead of 12 (about 10 s less).
    result = barrierflow_run(
        driver_python, cluster, "-p", "1", "--", str(tmp_path), str(RECORDS), "--shout"
    )
    assert result.returncode == 1, result.stderr[-3000:]
    error = result.stderr
    assert "cannot import module 'driver_only_helpers'" in error, error[-3000:]
    assert "--py-files" in error
    assert "restarting" not in error


@pytest.mark.timeout(900)  # two drivers, each starting Spark: minutes on a busy machine
def test_word_count_and_windows_on_the_standalone_cluster_write_exactly_the_expected_rows(
    cluster, driver_python, tmp_path
):
    helper = tmp_path / "driver_only_helpers.py"
    helper.write_text(HELPER)
    outputs, runs = {}, {}
    # The same job on local[*] too, the two drivers side by side (each mostly waits for its
    # Spark to start).
    for where, on in (("cluster", cluster), ("local", None)):
        out = outputs[where] = tmp_path / where
        runs[where] = start_run(
            driver_python, on, "-p", str(PARALLELISM), "--py-files", str(helper),
            "--", str(out), str(RECORDS), "--shout", "--print",
        )  # fmt: skip
    try:
        results = {where: finish(run, timeout=420) for where, run in runs.items()}
    finally:
        for run in runs.values():  # the other one, if waiting for one failed
            if run.poll() is None:
                run.kill()
                run.communicate()
    for where, result in results.items():
        assert result.returncode == 0, f"{where}: {result.stderr[-4000:]}"
    want = expected(RECORDS, str.upper)
    for table in ("counts", "windows"):
        on_cluster = read_rows(outputs["cluster"] / table)
        assert on_cluster == read_rows(outputs["local"] / table)
        assert on_cluster == want[table]
    # print() in tasks on the cluster's executors (as on local[*]) shows on the driver's
    # console: every number once, from both subtasks, each subtask's in its order
    for where, result in results.items():
        printed = printed_numbers(result.stdout)
        every = sorted(value for values in printed.values() for value in values)
        assert every == list(range(PRINTED)), (where, printed)
        assert set(printed) == {"1", "2"}, (where, printed)
        assert all(values == sorted(values) for values in printed.values()), (where, printed)


def printed_numbers(stdout: str) -> dict[str, list[int]]:
    """The `numbers:N> i` lines of a driver's standard output, by subtask N, in their order."""
    printed: dict[str, list[int]] = defaultdict(list)
    for subtask, value in re.findall(r"^numbers:(\d+)> (\d+)$", stdout, re.MULTILINE):
        printed[subtask].append(int(value))
    return printed


def test_a_job_needing_more_slots_than_the_cluster_has_fails_naming_the_settings(cluster, tmp_path):
    result = barrierflow_run(
        Path(sys.executable), cluster, "-p", "5",
        "--conf", "spark.barrierflow.slots.waitTimeout=4s",
        "--", str(tmp_path), "10",
    )  # fmt: skip
    assert result.returncode == 1, result.stderr[-3000:]
    error = " ".join(result.stderr.split())
    assert f"the job has 15 subtasks but Spark master {cluster.master_url} offers" in error
    for setting in (
        "spark.executor.instances",
        "spark.executor.cores",
        "spark.task.cpus",
        "spark.dynamicAllocation.minExecutors",
        "lower the job's parallelism",
    ):
        assert setting in error


SUBMITTED_JOB = """
import sys
from pyspark import SparkContext
from barrierflow import StreamExecutionEnvironment
from barrierflow.connectors.files import FileSink

env = StreamExecutionEnvironment.get_execution_environment()
env.set_parallelism(2)
env.from_collection(["a", "b", "c"]).map(lambda w: (w, 1)).sink_to(FileSink.for_rows(sys.argv[1]))
env.execute("submitted")
print("master", SparkContext._active_spark_context.master)
"""


def test_a_job_launched_with_spark_submit_runs_on_the_master_spark_submit_set(tmp_path):
    job = tmp_path / "job.py"
    job.write_text(SUBMITTED_JOB)
    env = {
        **cluster_environment(),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }
    submit = str(SPARK_HOME / "bin" / "spark-submit")
    result = subprocess.run(
        [submit, "--master", "local[4]", str(job), str(tmp_path / "out")],
        capture_output=True, text=True, env=env, cwd=tmp_path, timeout=240,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "master local[4]" in result.stdout
    assert read_rows(tmp_path / "out") == {("a", 1): 1, ("b", 1): 1, ("c", 1): 1}

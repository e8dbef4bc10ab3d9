"""`barrierflow run --conf/--executor-memory/--py-files/...` become the Spark settings of the
job's session; a bad one is a usage error."""

from __future__ import annotations

import json
import textwrap

import pytest
from click.testing import CliRunner

from barrierflow.api.environment import command_line_defaults
from barrierflow.cli import main

JOB = textwrap.dedent(
    """
    import json, sys
    from barrierflow.api.environment import command_line_defaults
    options = command_line_defaults.spark_options
    print(json.dumps({"conf": dict(options.conf), "py_files": list(options.py_files)}))
    """
)


@pytest.fixture
def job(tmp_path):
    path = tmp_path / "job.py"
    path.write_text(JOB)
    return path


def run(*args: str):
    return CliRunner().invoke(main, list(args))


def test_spark_options_reach_the_job_as_spark_settings(job, tmp_path):
    helpers = tmp_path / "helpers.py"
    helpers.write_text("")
    (tmp_path / "pkg").mkdir()
    result = run(
        "run", str(job),
        "--conf", "spark.task.cpus=1", "--conf", "spark.barrierflow.slots.waitTimeout=2min",
        "--executor-memory", "2g", "--num-executors", "3", "--executor-cores", "2",
        "--py-files", f"{helpers},{tmp_path / 'pkg'}",
        "--archives", "env.tar.gz#environment",
        "--conf", "spark.pyspark.python=./environment/bin/python",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    seen = json.loads(result.output.strip().splitlines()[-1])
    assert seen["conf"] == {
        "spark.task.cpus": "1",
        "spark.barrierflow.slots.waitTimeout": "2min",
        "spark.executor.memory": "2g",
        "spark.executor.instances": "3",
        "spark.executor.cores": "2",
        "spark.archives": "env.tar.gz#environment",
        "spark.pyspark.python": "./environment/bin/python",
    }
    assert seen["py_files"] == [str(helpers), str(tmp_path / "pkg")]
    assert command_line_defaults.spark_options is None  # for this run only


@pytest.mark.parametrize("bad", ["spark.task.cpus", "=1"])
def test_a_conf_without_key_and_value_is_a_usage_error(job, bad):
    result = run("run", str(job), "--conf", bad)
    assert result.exit_code == 2
    assert "--conf takes KEY=VALUE" in result.output


def test_a_missing_py_file_is_a_usage_error(job, tmp_path):
    result = run("run", str(job), "--py-files", str(tmp_path / "nope.py"))
    assert result.exit_code == 2
    assert "nope.py does not exist" in result.output


def test_chaos_takes_the_same_spark_options(job):
    result = run("chaos", str(job), "-n", "0", "--conf", "broken")
    assert result.exit_code == 2
    assert "--conf takes KEY=VALUE" in result.output

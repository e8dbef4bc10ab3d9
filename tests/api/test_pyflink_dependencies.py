"""PyFlink's add_source and dependency methods (issue 24 item 14): what can run is
accepted (a barrierflow Source through add_source, python files and archives and the
executors' Python as Spark settings, jars accepted and ignored with a warning); the rest is
refused with one line naming it, when called."""

from __future__ import annotations

import logging

import pytest

from barrierflow import StreamExecutionEnvironment
from barrierflow.connectors.collection import CollectionSource
from barrierflow.errors import ConfigurationError, JobDefinitionError


def env() -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment.get_execution_environment().set_parallelism(1)


def test_add_source_runs_a_barrierflow_source_under_pyflinks_default_name():
    job = env()
    job.add_source(CollectionSource([1, 2])).print()
    job.add_source(CollectionSource([3]), "numbers").print()
    assert [v.name for v in job.get_job_graph().vertices] == [
        "Custom Source -> Print",
        "numbers -> Print",
    ]


def test_add_source_refuses_a_source_function_naming_it():
    class KafkaConsumerFunction:  # what a PyFlink SourceFunction would be here
        pass

    with pytest.raises(
        JobDefinitionError,
        match=r"add_source needs a barrierflow Source .*, got KafkaConsumerFunction: a PyFlink "
        "SourceFunction or SinkFunction wraps Java code",
    ):
        env().add_source(KafkaConsumerFunction())


def test_python_files_archives_and_executable_become_spark_settings(tmp_path):
    module, archive = tmp_path / "helpers.py", tmp_path / "venv.tar.gz"
    module.write_text("X = 1\n")
    archive.write_bytes(b"\x1f\x8b")
    job = env().add_python_file(file_path=str(module))
    job.add_python_archive(str(archive), "venv").add_python_archive(str(archive))
    job.set_python_executable("venv/bin/python")
    options = job._spark_options()
    assert options.py_files == (str(module),)
    assert options.conf == {
        "spark.archives": f"{archive}#venv,{archive}",
        "spark.pyspark.python": "venv/bin/python",
    }


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda e: e.add_python_file("/no/such/file.py"), "python file /no/such/file.py does"),
        (lambda e: e.add_python_archive("/no/such.zip"), "python archive /no/such.zip does not"),
        (lambda e: e.set_python_executable(""), "python executable must be a path, got ''"),
        (
            lambda e: e.set_python_requirements("requirements.txt"),
            "set_python_requirements\\('requirements.txt'\\) is not supported: barrierflow "
            "does not install packages on the executors",
        ),
    ],
)
def test_what_cannot_run_is_refused_in_one_line(call, message):
    with pytest.raises(ConfigurationError, match=message):
        call(env())


def test_jars_and_classpaths_are_accepted_and_ignored_with_a_warning(caplog):
    job = env()
    with caplog.at_level(logging.WARNING, logger="barrierflow.api.python_dependencies"):
        assert job.add_jars("file:///opt/flink-connector-kafka.jar") is job
        assert job.add_classpaths("file:///opt/classes") is job
    assert "flink-connector-kafka.jar" in caplog.text and "/opt/classes" in caplog.text
    assert job._spark_options().conf == {}


def test_pyflinks_source_and_sink_functions_are_refused_naming_them():
    from barrierflow.functions import SinkFunction, SourceFunction

    job = env()
    with pytest.raises(JobDefinitionError, match=r"add_source needs .*, got SourceFunction"):
        job.add_source(SourceFunction("org.apache.flink.SomeSource"))
    numbers = job.from_collection([1])
    with pytest.raises(JobDefinitionError, match=r"add_sink needs .*, got SinkFunction"):
        numbers.add_sink(SinkFunction("org.apache.flink.SomeSink"))


def test_add_sink_runs_a_barrierflow_sink():
    from barrierflow.connectors.discarding import DiscardingSink

    job = env()
    job.from_collection([1]).add_sink(DiscardingSink()).name("Discard")
    assert [v.name for v in job.get_job_graph().vertices] == ["Collection -> Discard"]

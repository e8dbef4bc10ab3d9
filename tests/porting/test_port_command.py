"""`barrierflow port`: the porting rule applied to imports and dotted references only, and the
list of what barrierflow lacks; no Spark."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from barrierflow.cli.commands import main
from barrierflow.cli.port import port_source

# (PyFlink source, ported source): the rule of docs/porting.md, one case a line
REWRITES = [
    ("from pyflink.datastream import StreamExecutionEnvironment\n",
     "from barrierflow import StreamExecutionEnvironment\n"),
    ("from pyflink.common import WatermarkStrategy  # keep me\n",
     "from barrierflow import WatermarkStrategy  # keep me\n"),
    ("from pyflink.common.typeinfo import Types\n", "from barrierflow import Types\n"),
    ("from pyflink.common.time import Duration\n", "from barrierflow import Duration\n"),
    ("from pyflink.common.watermark_strategy import TimestampAssigner\n",
     "from barrierflow import TimestampAssigner\n"),
    ("from pyflink.common.serialization import SimpleStringSchema\n",
     "from barrierflow.serialization import SimpleStringSchema\n"),
    ("from pyflink.datastream.functions import MapFunction\n",
     "from barrierflow.functions import MapFunction\n"),
    ("from pyflink.datastream.state import ValueStateDescriptor\n",
     "from barrierflow.state import ValueStateDescriptor\n"),
    ("from pyflink.datastream.window import TumblingEventTimeWindows\n",
     "from barrierflow.window import TumblingEventTimeWindows\n"),
    ("from pyflink.datastream.connectors.file_system import FileSink\n",
     "from barrierflow.connectors.file_system import FileSink\n"),
    ("from pyflink.datastream.state_backend import HashMapStateBackend\n",
     "from barrierflow import HashMapStateBackend\n"),
    ("import pyflink.datastream as ds\nenv = ds.StreamExecutionEnvironment\n",
     "import barrierflow as ds\nenv = ds.StreamExecutionEnvironment\n"),
    ("import pyflink.common.typeinfo\nt = pyflink.common.typeinfo.Types.INT()\n",
     "import barrierflow\nt = barrierflow.Types.INT()\n"),
    ("from pyflink.datastream import (\n    StreamExecutionEnvironment,  # env\n    OutputTag)\n",
     "from barrierflow import (\n    StreamExecutionEnvironment,  # env\n    OutputTag)\n"),
    ('s = "pyflink.common"  # pyflink.datastream in a comment\n',
     's = "pyflink.common"  # pyflink.datastream in a comment\n'),
    ("x.pyflink.common = 1\n", "x.pyflink.common = 1\n"),
]  # fmt: skip


@pytest.mark.parametrize(("before", "after"), REWRITES)
def test_the_rule_rewrites_imports_and_dotted_references_only(before, after):
    assert port_source(before).source == after


def test_what_barrierflow_lacks_is_listed_by_line():
    source = (
        "from pyflink.datastream import StreamExecutionEnvironment, NoSuchThing\n"
        "from pyflink.table import StreamTableEnvironment\n"
        "import pyflink.datastream as ds\n"
        "ds.AlsoMissing\n"
    )
    report = port_source(source)
    assert [(f.line, f.text) for f in report.unsupported] == [
        (1, "barrierflow.NoSuchThing: not in barrierflow"),
        (2, "pyflink.table: no barrierflow counterpart"),
        (4, "barrierflow.AlsoMissing: not in barrierflow"),
    ]


def test_the_command_writes_the_ported_file_and_fails_on_what_is_unsupported(tmp_path):
    job = tmp_path / "job.py"
    job.write_text("from pyflink.datastream import StreamExecutionEnvironment\n")
    out = tmp_path / "ported.py"
    result = CliRunner().invoke(main, ["port", str(job), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.read_text() == "from barrierflow import StreamExecutionEnvironment\n"
    assert "1 pyflink references rewritten" in result.output

    job.write_text("from pyflink.datastream import NoSuchThing\n")
    result = CliRunner().invoke(main, ["port", str(job)])
    assert result.exit_code == 1
    assert "from barrierflow import NoSuchThing\n" in result.output  # stdout without -o
    assert f"{job}:1: barrierflow.NoSuchThing: not in barrierflow" in result.output


def test_a_file_that_is_not_python_is_one_line(tmp_path):
    job = tmp_path / "job.py"
    job.write_bytes(b"\xff\xfe not text")
    result = CliRunner().invoke(main, ["port", str(job)])
    assert result.exit_code == 2
    assert "cannot read" in result.output and "Traceback" not in result.output


def test_ignored_calls_are_listed_and_refused_ones_fail():
    ignored = port_source("env.add_jars('file:///connector.jar')\n")
    assert [(f.line, f.unsupported) for f in ignored.findings] == [(1, False)]
    assert ignored.findings[0].text.startswith("add_jars: accepted and ignored (")
    refused = port_source("x = 1\nenv.set_python_requirements('requirements.txt')\n")
    assert [(f.line, f.unsupported) for f in refused.unsupported] == [(2, True)]
    assert "refused when the job is built (ConfigurationError:" in refused.unsupported[0].text


PYFLINK_EXAMPLES = Path("/root/peers/flink/venv/lib/python3.11/site-packages/pyflink/examples")


@pytest.mark.skipif(not PYFLINK_EXAMPLES.is_dir(), reason="PyFlink's examples are not installed")
def test_every_pyflink_datastream_example_ports_by_its_imports_alone():
    """The tool on PyFlink's own examples: a `pyflink` reference is left only where the rule
    has no counterpart (pyflink.table), listed on its line; lines without one are unchanged."""
    examples = sorted((PYFLINK_EXAMPLES / "datastream").rglob("*.py"))
    assert len(examples) > 10
    for path in examples:
        before = path.read_text()
        report = port_source(before)
        code = re.sub(r"#.*|'[^']*'|\"[^\"]*\"", "", report.source).splitlines()
        left = {n for n, line in enumerate(code, 1) if "pyflink." in line}
        listed = {f.line for f in report.findings if "no barrierflow counterpart" in f.text}
        assert left <= listed, (path, left - listed)
        pairs = zip(before.splitlines(), report.source.splitlines(), strict=True)
        assert all(a == b for a, b in pairs if "pyflink" not in a), path


def test_the_ported_examples_use_nothing_barrierflow_lacks():
    """examples/pyflink/ are PyFlink's examples after the rule: the tool finds nothing to
    rewrite and nothing unsupported in them."""
    examples = sorted((Path(__file__).parents[2] / "examples" / "pyflink").rglob("*.py"))
    assert len(examples) == 10
    for path in examples:
        report = port_source(path.read_text())
        assert (report.rewritten, report.unsupported) == (0, []), path


def test_the_refused_pyflink_names_are_listed_as_unsupported(tmp_path):
    """A legacy job (Kafka consumer, a Java state backend, the legacy file sink) ports, and
    the tool lists each refused name on its line with the error the job would stop on."""
    job = tmp_path / "legacy.py"
    job.write_text(
        "from pyflink.datastream import StreamExecutionEnvironment, CustomStateBackend\n"
        "from pyflink.datastream.connectors.kafka import FlinkKafkaConsumer\n"
        "from pyflink.datastream.connectors.file_system import StreamingFileSink\n"
        "from pyflink.common import InputDependencyConstraint, MemorySize\n"
    )
    result = CliRunner().invoke(main, ["port", str(job)])
    assert result.exit_code == 1
    lines = [line for line in result.output.splitlines() if line.startswith(f"{job}:")]
    assert [line.split(": ", 2)[1] for line in lines[:-1]] == [
        "CustomStateBackend",
        "FlinkKafkaConsumer",
        "StreamingFileSink",
        "InputDependencyConstraint",
    ]
    assert "FlinkKafkaConsumer: refused when the job is built (JobDefinitionError" in lines[1]
    assert "use KafkaSource.builder()" in lines[1]
    assert "InputDependencyConstraint: accepted and ignored (" in lines[3]
    assert lines[-1].endswith("4 pyflink references rewritten; 3 unsupported")

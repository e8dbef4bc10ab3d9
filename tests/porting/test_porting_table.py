"""docs/porting.md's tables say the truth about this barrierflow: every "supported" name
imports from where the porting rule puts it, every "not yet" name does not, refused names and
calls raise what the page says when the job is built, and the page is up to date with
PyFlink's name list. No Spark."""

from __future__ import annotations

import importlib
import importlib.util
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import barrierflow
from barrierflow import StreamExecutionEnvironment, errors
from barrierflow.cli.port import target_module
from barrierflow.cli.porting_notes import IGNORED, REFUSED
from barrierflow.errors import ConfigurationError

ROOT = Path(__file__).parents[2]


def _env() -> StreamExecutionEnvironment:
    return StreamExecutionEnvironment.get_execution_environment()


def _requirements(tmp_path: Path) -> None:
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("numpy\n")
    _env().set_python_requirements(str(requirements))


def _compaction(tmp_path: Path) -> None:
    from barrierflow.connectors.file_system import FileCompactor, FileCompactStrategy, FileSink

    strategy = FileCompactStrategy.builder().enable_compaction_on_checkpoint(2).build()
    builder = FileSink.for_row_format(str(tmp_path), barrierflow.Encoder.simple_string_encoder())
    builder.enable_compact(strategy, FileCompactor.concat_file_compactor())


def _kafka_producer(tmp_path: Path) -> None:
    from barrierflow.connectors.kafka import FlinkKafkaProducer, Semantic

    FlinkKafkaProducer(
        "out", barrierflow.SimpleStringSchema(), {"bootstrap.servers": "localhost:9092"},
        semantic=Semantic.EXACTLY_ONCE,
    )  # fmt: skip


REFUSED_CALLS: dict[str, Callable[[Path], Any]] = {
    "set_python_requirements": _requirements,
    "SourceFunction": lambda _: _env().add_source(barrierflow.SourceFunction("com.acme.Src")),
    "SinkFunction": lambda _: (
        _env().from_collection([1]).add_sink(barrierflow.SinkFunction("com.acme.Sink"))
    ),
    "CustomCheckpointStorage": lambda _: barrierflow.CustomCheckpointStorage(None),
    "CustomStateBackend": lambda _: barrierflow.CustomStateBackend(None),
    "AssignerWithPeriodicWatermarksWrapper": (
        lambda _: barrierflow.AssignerWithPeriodicWatermarksWrapper(None)
    ),
    "BulkWriterFactory": lambda _: importlib.import_module(
        "barrierflow.serialization"
    ).BulkWriterFactory(None),
    "BulkFormat": lambda _: importlib.import_module(
        "barrierflow.connectors.file_system"
    ).BulkFormat(None),
    "StreamingFileSink": lambda tmp: importlib.import_module(
        "barrierflow.connectors.file_system"
    ).StreamingFileSink.for_row_format(str(tmp), barrierflow.Encoder.simple_string_encoder()),
    "FileCompactStrategy": _compaction,
    "FileCompactor": _compaction,
    "FlinkKafkaConsumer": lambda _: importlib.import_module(
        "barrierflow.connectors.kafka"
    ).FlinkKafkaConsumer("in", barrierflow.SimpleStringSchema(), {}),
    "FlinkKafkaProducer": _kafka_producer,
    "Semantic": _kafka_producer,
}
"""Each refused name's refused call, as a ported PyFlink job makes it."""
PAGE = (ROOT / "docs" / "porting.md").read_text()
ROW = re.compile(r"^\| `(pyflink\.[\w.]+)\.(\w+)` \| ([\w ,]+) \| (.*) \|$", re.M)


def generator():
    path = Path(__file__).with_name("generate_porting_table.py")
    spec = importlib.util.spec_from_file_location("generate_porting_table", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows(status: str) -> list[tuple[str, str, str]]:
    return [(m, n, detail) for m, n, s, detail in ROW.findall(PAGE) if s == status]


def imports(module: str, name: str) -> bool:
    try:
        loaded = importlib.import_module(module)
    except ImportError:
        return False
    if hasattr(loaded, name):
        return True
    try:
        importlib.import_module(f"{module}.{name}")
    except ImportError:
        return False
    return True


def test_the_page_lists_every_pyflink_name_with_its_status_today():
    names = generator().pyflink_names()
    assert len(ROW.findall(PAGE)) == len(names)
    assert generator().page_with_table(PAGE) == PAGE, (
        "docs/porting.md's name table is out of date: run "
        ".venv/bin/python tests/porting/generate_porting_table.py"
    )


def test_every_supported_name_imports_from_where_the_rule_puts_it():
    supported = rows("supported")
    assert supported
    for module, name, where in supported:
        target = target_module(module)
        assert where == f"{target}.{name}", (module, name, where)
        assert imports(target, name), f"{module}.{name} is 'supported' but not in {target}"


def test_no_name_the_page_calls_missing_or_refused_imports_silently():
    for module, name, _ in rows("not yet"):
        target = target_module(module)
        assert target is None or not imports(target, name), (
            f"{module}.{name} imports from {target} now: regenerate the table"
        )
    for module, name, error in rows("refused"):
        assert name in REFUSED and REFUSED[name] in error, (module, name)
    for module, name, why in rows("accepted, ignored"):
        assert name in IGNORED and IGNORED[name] in why, (module, name)


def test_refused_calls_raise_what_the_page_says_and_ignored_ones_change_nothing(tmp_path):
    env = StreamExecutionEnvironment.get_execution_environment()
    requirements = tmp_path / "requirements.txt"
    requirements.write_text("numpy\n")
    with pytest.raises(ConfigurationError, match="does not install packages on the executors"):
        env.set_python_requirements(str(requirements))
    assert "`ConfigurationError`: barrierflow does not install packages" in PAGE
    assert env.add_jars("file:///flink-connector.jar") is env
    assert env.add_classpaths("file:///flink-connector.jar") is env


def test_no_pyflink_name_is_left_without_a_decision():
    """Issue 24's rule: each name is supported, accepted and ignored (with why) or refused
    (with the error). A name PyFlink adds, or one barrierflow loses, shows up here as "not
    yet" until it gets one of the three."""
    undecided = [f"{module}.{name}: {detail}" for module, name, detail in rows("not yet")]
    assert undecided == [], (
        "these PyFlink names have no status: support them, or add them to "
        "barrierflow/cli/porting_notes.py's IGNORED or REFUSED:\n" + "\n".join(undecided)
    )
    assert " not yet" not in PAGE.split(generator().BEGIN)[1].splitlines()[2]


@pytest.mark.parametrize("name", sorted(REFUSED_CALLS))
def test_a_refused_name_raises_the_error_the_page_quotes(name, tmp_path):
    """The refused call raises the barrierflow error class the note names, ending with the
    note's line (set_python_requirements first names its file): the page and the code cannot
    drift apart."""
    note = REFUSED[name]
    error_class, _, message = note.partition(": ")
    expected = getattr(errors, error_class.split()[0])
    with pytest.raises(expected) as raised:
        REFUSED_CALLS[name](tmp_path)
    assert type(raised.value) is expected
    assert str(raised.value).endswith(message)  # after the call's own words, if any
    assert "\n" not in str(raised.value)


def test_every_refused_name_has_a_refused_call():
    assert sorted(set(REFUSED) - set(REFUSED_CALLS)) == []
    refused_on_page = {name for _, name, _ in rows("refused")}
    assert refused_on_page <= set(REFUSED_CALLS)

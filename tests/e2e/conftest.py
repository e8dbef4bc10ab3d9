"""One Spark session for every end-to-end test (a session takes ~8 s to start)."""

from __future__ import annotations

import json
import os
import sys
from collections import Counter
from pathlib import Path

import pytest

SLOTS = 8

collect_ignore = ["chaos_jobs"]
"""Job files that `barrierflow chaos` runs; importing them would run their jobs."""


@pytest.fixture(scope="session")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from barrierflow.cluster.spark.session import obtain_spark

    session = obtain_spark(f"local[{SLOTS}]", SLOTS)
    yield session
    session.stop()


def read_rows(folder: Path) -> Counter:
    """Every committed JSON line of a FileSink folder, as hashable values."""
    rows: Counter = Counter()
    for part in sorted(folder.glob("part-*")):
        for line in part.read_text().splitlines():
            value = json.loads(line)
            rows[tuple(value) if isinstance(value, list) else value] += 1
    return rows

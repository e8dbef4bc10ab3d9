"""The peer benchmarks' own logic, without Spark or PyFlink: the batched keyed count of
keyed_count_vs_spark.py writes exactly the per-record job's rows, state_vs_flink.py's table
and ratios come from given figures, and the PyFlink script keys records as barrierflow's."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest

from barrierflow.state import ValueStateDescriptor
from barrierflow.state.batched import BatchValueState
from barrierflow.state.heap_backend import HeapKeyedStateBackend
from barrierflow.state.key_groups import KeyGroupRange

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture
def benchmarks(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.syspath_prepend(str(BENCHMARKS / "peers"))
    yield
    for name in ("keyed_count_vs_spark", "state_vs_flink", "flink_keyed_state", "state"):
        sys.modules.pop(name, None)


def per_record_rows(keys: list[str], every: int) -> list[tuple[str, int]]:
    """The per-record job's output: (key, count) whenever a key's count is a multiple."""
    counts: Counter[str] = Counter()
    rows = []
    for key in keys:
        counts[key] += 1
        if counts[key] % every == 0:
            rows.append((key, counts[key]))
    return rows


@pytest.mark.parametrize("batch_size", [1, 7, 999, 1000, 4096])
def test_the_batched_count_writes_the_per_record_jobs_rows(benchmarks, batch_size):
    from keyed_count_vs_spark import EVERY, BatchedCount

    backend = HeapKeyedStateBackend(KeyGroupRange(0, 127), 128)
    count = BatchedCount()
    count.counts = BatchValueState(backend.get_value_state(ValueStateDescriptor("count")))
    keys = [f"key-{(i * 2654435761) % 7}" for i in range(20_000)]
    rows = []
    for start in range(0, len(keys), batch_size):
        rows += count.process_batch(None, keys[start : start + batch_size], None)
    expected = per_record_rows(keys, EVERY)
    assert len(expected) == 14  # 20,000 records over 7 keys: 2,857 or 2,858 each, 2 rows
    assert sorted(rows) == sorted(expected)


def test_the_table_has_the_ratios_of_the_medians_and_names_failures(benchmarks):
    import state_vs_flink

    class Args:
        backends = ["hashmap", "rocksdb"]
        intervals = [0, 1000]

    runs = {
        ("barrierflow", "hashmap", 0): [{"events_per_second": 50_000.0}],
        ("pyflink", "hashmap", 0): [{"events_per_second": 4_000}, {"events_per_second": 6_000}],
        ("barrierflow", "hashmap", 1000): [{"events_per_second": 40_000.0}],
        ("pyflink", "hashmap", 1000): [{"events_per_second": 5_000}],
        ("pyflink", "rocksdb", 1000): [{"error": "exit 1: java.lang.OutOfMemoryError"}],
    }
    table = state_vs_flink.table(runs, Args).splitlines()
    assert table[2] == "| hashmap | none | 50,000 (50,000) | 5,000 (4,000, 6,000) | 10.00 |"
    assert table[3] == "| hashmap | 1 s | 40,000 (40,000) | 5,000 (5,000) | 8.00 |"
    assert table[5] == ("| rocksdb | 1 s | - | failed: exit 1: java.lang.OutOfMemoryError | - |")
    assert "| hashmap | barrierflow | 0.80 |" in table
    assert "| hashmap | pyflink | 1.00 |" in table


def test_pyflink_keys_the_records_as_barrierflows_job(benchmarks):
    import state
    from flink_keyed_state import KeyOf

    assert [KeyOf(10_000)(i) for i in range(1000)] == [state.KeyOf(10_000)(i) for i in range(1000)]

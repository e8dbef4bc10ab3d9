"""benchmarks/cold_state.py on a small state: the state it builds and the table it prints."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def load():
    path = ROOT / "benchmarks" / "cold_state.py"
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


bench = load()


def test_the_state_keeps_at_most_ten_bids_a_key_and_fresh_values_are_equal_new_objects():
    state = bench.build_state(keys=50, updates=2_000)
    assert len(state) == 50
    assert all(1 <= len(top) <= bench.TOP for top in state.values())
    assert sum(len(top) for top in state.values()) == 50 * bench.TOP  # 40 bids a key on average
    values = list(state.values())
    fresh = bench._fresh(values)
    assert fresh == values
    assert fresh[0] is not values[0] and fresh[0][0] is not values[0][0]
    assert fresh[0][0][4] is not values[0][0][4]  # even the strings are new objects


def test_the_table_has_a_row_for_each_sample_and_layout(capsys):
    assert bench.main(["--keys", "40", "--updates", "800", "--sample", "10"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| ")]
    assert [row.split(" | ")[:2] for row in rows[1:]] == [
        ["| sample", "scattered"],
        ["| sample", "contiguous"],
        ["| whole state", "scattered"],
        ["| whole state", "contiguous"],
    ]
    rates = [float(row.split(" | ")[2]) for row in rows[1:]]
    assert all(rate > 0 for rate in rates)

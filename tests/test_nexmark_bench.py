"""benchmarks/nexmark.py without its peers: the table, ratios and chart from given figures,
the query lists against the peer scripts, and a peer that cannot run reported in one line."""

from __future__ import annotations

import doctest
import importlib.util
import json
import sys
from pathlib import Path

import pytest

from barrierflow.nexmark.queries import QUERY_NAMES

ROOT = Path(__file__).resolve().parent.parent
PEERS = ROOT / "benchmarks" / "peers"


def load(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module


bench = load(ROOT / "benchmarks" / "nexmark.py")
Cell, Run = bench.Cell, bench.Run


def flink_sql_run(rate: float, wall: float = 1000.0) -> Run:
    return Run("flink-sql", "q5", {"events_per_second": rate, "events_per_second_wall": wall})


def test_the_docstring_examples_hold():
    assert doctest.testmod(bench).failed == 0


def test_medians_ratios_and_the_table_from_given_figures():
    runs = [
        Run("barrierflow", "q5", {"events": 1000, "events_per_second": r, "wall_seconds": 2.0})
        for r in (90_000, 110_000, 100_000)
    ]
    ckpt = {"events": 1000, "events_per_second": 80_000, "wall_seconds": 2.5}
    runs += [Run("barrierflow-ckpt", "q5", ckpt)]
    runs += [flink_sql_run(r) for r in (50_000, 40_000, 60_000)]
    runs += [Run("spark-ss", "q5", error="exit 1: AnalysisException: not supported")]
    runs += [Run("flink-ds", "count", {"events_per_second": 9_000})]
    for run in runs:  # as run_one completes them
        if run.figures is not None and "events_per_second_wall" not in run.figures:
            run.figures["events_per_second_wall"] = bench.wall_figure(run.figures)
    cells = bench.summarize(runs)
    assert cells["q5"]["barrierflow"].events_per_second == 100_000
    assert cells["q5"]["barrierflow"].events_per_second_wall == 500
    assert cells["q5"]["flink-sql"].runs == [50_000, 40_000, 60_000]
    assert cells["q5"]["spark-ss"].events_per_second is None

    systems = ["barrierflow", "barrierflow-ckpt", "flink-sql", "flink-ds", "spark-ss"]
    lines = bench.table(cells, ["q5", "count"], systems).splitlines()
    assert lines[0].split(" | ")[1:] == [
        "barrierflow", "barrierflow, ckpt", "ckpt/none", "Flink SQL", "bf/Flink SQL",
        "PyFlink DataStream", "bf/PyFlink DataStream", "Spark SS", "bf/Spark SS |",
    ]  # fmt: skip
    assert lines[2] == "| q5 | 100,000 | 80,000 | 0.80x | 50,000 | 2.00x | - | - | - | - |"
    assert lines[3] == "| count | - | - | - | - | - | 9,000 | - | - | - |"
    wall = bench.table(cells, ["q5"], systems, wall=True).splitlines()
    assert wall[2] == "| q5 | 500 | 400 | 0.80x | 1,000 | 0.50x | - | - | - | - |"
    assert bench.notes(cells) == ["q5 Spark SS: exit 1: AnalysisException: not supported"]
    assert bench.geometric_mean_ratio(cells, "flink-sql", ["q5", "count"]) == 2.0
    assert bench.geometric_mean_ratio(cells, "spark-ss", ["q5"]) is None


def test_flink_sql_with_checkpoints_is_compared_with_itself_and_our_checkpointed_run():
    runs = [
        Run("barrierflow", "q16", {"events_per_second": 50_000}),
        Run("barrierflow-ckpt", "q16", {"events_per_second": 40_000}),
        Run("flink-sql", "q16", {"events_per_second": 20_000}),
        Run("flink-sql-ckpt", "q16", {"events_per_second": 15_000}),
        Run("flink-sql-ckpt", "q16", {"events_per_second": 13_000}),
        Run("flink-sql-ckpt", "q16", {"events_per_second": 14_000}),
    ]
    cells = bench.summarize(runs)
    systems = ["barrierflow", "barrierflow-ckpt", "flink-sql", "flink-sql-ckpt"]
    lines = bench.table(cells, ["q16"], systems).splitlines()
    assert lines[0].split(" | ")[-3:] == ["Flink SQL, ckpt", "Flink ckpt/none", "ckpt bf/Flink |"]
    assert lines[2] == "| q16 | 50,000 | 40,000 | 0.80x | 20,000 | 2.50x | 14,000 | 0.70x | 2.86x |"
    # the geometric mean against a checkpointed peer takes our checkpointed run
    mean = bench.geometric_mean_ratio(cells, "flink-sql-ckpt", ["q16"])
    assert mean == pytest.approx(40_000 / 14_000)
    line = bench.command(
        "flink-sql-ckpt", "q16", "events.json", 1000, 2, 500, Path("/peers")
    )  # fmt: skip
    assert line[1].endswith("flink_nexmark.py") and line[-2:] == ["--ckpt", "500"]
    assert "--ckpt" not in bench.command(
        "flink-sql", "q16", "events.json", 1000, 2, 500, Path("/p")
    )


def test_the_chart_is_a_png_and_nothing_is_drawn_without_figures(tmp_path):
    cells = {
        "q0": {"barrierflow": Cell(200_000), "flink-sql": Cell(1_000_000)},
        "q5": {"barrierflow": Cell(20_000), "flink-sql": Cell(150_000)},
        "count": {"flink-ds": Cell(8_000)},
    }
    png = tmp_path / "images" / "nexmark.png"
    systems = ["barrierflow", "flink-sql", "flink-ds"]
    assert bench.plot(cells, ["q0", "q5", "count"], systems, png, "Nexmark")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5_000
    empty = tmp_path / "empty.png"
    assert not bench.plot({"q0": {"spark-ss": Cell(note="failed")}}, ["q0"], systems, empty, "x")
    assert not empty.exists()


def test_the_query_lists_are_the_peer_scripts_own():
    sys.path.insert(0, str(PEERS))
    try:
        flink_sql = load(PEERS / "flink_nexmark.py")
        flink_ds = load(PEERS / "flink_datastream.py")
        spark = load(PEERS / "spark_nexmark.py")
    finally:
        sys.path.remove(str(PEERS))
    assert bench.BARRIERFLOW_QUERIES == QUERY_NAMES
    assert set(flink_sql.QUERIES) == set(QUERY_NAMES)
    assert tuple(flink_ds.QUERIES) == bench.FLINK_DS_QUERIES
    assert tuple(spark.QUERIES) == bench.SPARK_QUERIES
    assert set(spark.QUERIES) | set(spark.NOT_EXPRESSIBLE) == set(QUERY_NAMES)
    assert not set(spark.QUERIES) & set(spark.NOT_EXPRESSIBLE)


def test_a_failed_run_keeps_the_last_line_of_its_error_output():
    line = [sys.executable, "-c", "import sys; print('noise'); sys.exit('ValueError: bad input')"]
    run = bench.run_one(line, "spark-ss", "q0", timeout=60)
    assert run.figures is None and run.error == "exit 1: ValueError: bad input"
    printed = [sys.executable, "-c", 'print(\'RESULT {"events": 10, "events_per_second": 5}\')']
    run = bench.run_one(printed, "flink-sql", "q0", timeout=60)
    assert run.figures == {"events": 10, "events_per_second": 5, "events_per_second_wall": None}


@pytest.fixture
def empty_peers(tmp_path, monkeypatch):
    root = tmp_path / "peers"
    root.mkdir()
    monkeypatch.setenv("PEERS_ROOT", str(root))
    return root


def test_a_missing_peer_is_reported_in_one_line(empty_peers, capsys):
    assert bench.main(["--check-peers", "--peers", "flink-sql,flink-ds"]) == 0
    lines = capsys.readouterr().out.splitlines()
    venv = empty_peers / "flink" / "venv"
    assert lines == [
        f"flink-sql: not run: no PyFlink venv at {venv} (--install-peers creates it)",
        f"flink-ds: not run: no PyFlink venv at {venv} (--install-peers creates it)",
    ]


def test_a_run_without_its_peers_still_reports_and_records_why(empty_peers, tmp_path, capsys):
    events = tmp_path / "events.json"
    events.write_text('{"event_type": 0}\n' * 3)
    out = tmp_path / "figures.json"
    # The peers alone: with PyFlink missing nothing runs, no Spark
    code = bench.main(
        ["--input", str(events), "--queries", "count", "--peers", "flink-ds", "--peers-only",
         "--json-out", str(out), "--plot", str(tmp_path / "chart.png")]
    )  # fmt: skip
    assert code == 0
    printed = capsys.readouterr().out
    assert [line for line in printed.splitlines() if "flink-ds" in line] == [
        f"flink-ds: not run: no PyFlink venv at {empty_peers / 'flink' / 'venv'} "
        "(--install-peers creates it)"
    ]
    assert "| count |" in printed.splitlines()  # a row, with no figures
    report = json.loads(out.read_text())
    assert report["events"] == 3 and report["runs"] == []
    assert set(report["peers_not_run"]) == {"flink-ds"}
    assert not (tmp_path / "chart.png").exists()


def test_without_json_out_the_figures_go_to_the_work_folder_not_the_docs(empty_peers, tmp_path):
    events = tmp_path / "events.json"
    events.write_text('{"event_type": 0}\n' * 3)
    docs_figures = bench.REPO / "docs" / "images" / "nexmark.json"
    before = docs_figures.stat().st_mtime_ns
    work = tmp_path / "work"
    code = bench.main(
        ["--input", str(events), "--queries", "count", "--peers", "flink-ds", "--peers-only",
         "--workdir", str(work)]
    )  # fmt: skip
    assert code == 0
    assert json.loads((work / "nexmark.json").read_text())["events"] == 3
    assert docs_figures.stat().st_mtime_ns == before

"""`barrierflow chaos` on the suite's jobs: keyed state, windows and a join take 41 failures
of mixed kinds in total (every kind three times or more per job) with no record lost or
duplicated, failures while restoring and storage faults included, and a sink that writes
outside checkpoints is caught duplicating (killed drivers: test_chaos_drivers.py). Run in
this process (the suite's Spark session); skip them locally with `-m "not chaos"`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from barrierflow.cli import main

pytestmark = [pytest.mark.spark, pytest.mark.chaos]

JOBS = Path(__file__).resolve().parent / "chaos_jobs"
FAILURE_LINE = re.compile(
    r"^failure (\d+)/(\d+) at [\d.]+ s: (exception|kill|executor|restore|storage|driver) of "
    r"(?:'.+' \(\d/\d\)|the driver \(pid \d+\)) in attempt \d+, recovered in \d+ ms$",
    re.MULTILINE,
)


def chaos(
    tmp_path: Path,
    job: str,
    failures: int,
    kinds: str,
    records: int,
    rate: int,
    outputs: tuple[str, ...] | None = None,
):
    """`barrierflow chaos` on `job` with the arguments OUTPUTS... RECORDS RATE (OUTPUTS: the
    folder `tmp_path/out` unless given)."""
    outputs = outputs if outputs is not None else (str(tmp_path / "out"),)
    result = CliRunner().invoke(
        main,
        [
            "chaos",
            str(JOBS / job),
            "--failures",
            str(failures),
            "--kinds",
            kinds,
            "--seed",
            "10",
            "--max-gap",
            "0.2",
            "--workdir",
            str(tmp_path / "work"),
            "--",
            *outputs,
            str(records),
            str(rate),
        ],
        catch_exceptions=False,
    )
    print(result.output)
    return result


# RECORDS / RATE is a run's time budget: a failure waits for a checkpoint after the previous
# recovery plus a gap (up to 0.2 s), and that much input goes by before it; a restore starts
# the pace again, so recoveries do not count. The budgets give every failure 1.5 s or more
# (the sizes that passed busy CI runs gave 1.2-2.5 s), and every kind comes 3 to 6 times
# per job. More chaos elsewhere: test_flagship.py (exception, kill, executor on its own job),
# test_chaos_drivers.py (driver), test_local_cluster.py (jvm).
@pytest.mark.parametrize(
    ("job", "failures", "kinds", "records", "rate"),
    [
        ("keyed_count.py", 15, "exception,kill,executor", 48_000, 2_000),
        ("windows.py", 12, "exception,kill", 36_000, 2_000),
        ("join.py", 8, "exception,executor", 18_000, 1_000),
        ("keyed_count.py", 6, "restore,storage", 30_000, 2_000),
    ],
)
def test_chaos_finds_every_record_exactly_once_after_every_failure(
    spark, tmp_path, job, failures, kinds, records, rate
):
    result = chaos(tmp_path, job, failures, kinds, records, rate)

    assert result.exit_code == 0, result.output[-3000:]
    lines = FAILURE_LINE.findall(result.output)
    assert [int(n) for n, _, _ in lines] == list(range(1, failures + 1)), result.output[-3000:]
    assert {kind for _, _, kind in lines} == set(kinds.split(","))
    assert " 0 lost, 0 duplicated" in result.output
    assert result.output.rstrip().endswith("exactly-once: OK")
    # The user's own output path stays untouched: each run wrote into its own folder.
    assert not (tmp_path / "out").exists()


def test_chaos_reports_the_duplicates_of_a_sink_that_writes_outside_checkpoints(spark, tmp_path):
    result = chaos(tmp_path, "appending_sink.py", 3, "exception,kill", 12_000, 2_000)

    assert result.exit_code == 1, result.output[-3000:]
    assert re.search(r"; 0 lost, [1-9]\d* duplicated", result.output), result.output[-3000:]
    assert "  duplicated (first 5): " in result.output
    assert re.search(
        r"exactly-once: FAILED \(0 records lost, [1-9]\d* duplicated\)$", result.output.rstrip()
    )


def test_chaos_checks_a_job_writing_to_postgresql_in_a_table_per_run(
    spark, tmp_path, postgres_server
):
    psycopg = pytest.importorskip("psycopg")
    with psycopg.connect(postgres_server, autocommit=True) as pg:
        pg.execute("CREATE TABLE chaos_counts (word text NOT NULL, n bigint NOT NULL)")
        result = chaos(
            tmp_path,
            "postgres_count.py",
            4,
            "exception,kill",
            6_000,
            1_000,
            outputs=(postgres_server, "chaos_counts"),
        )
        assert result.exit_code == 0, result.output[-3000:]
        assert "6000 records without failures, 6000 with; 0 lost, 0 duplicated" in result.output
        assert result.output.rstrip().endswith("exactly-once: OK")
        count = "SELECT count(*) FROM {}"
        assert pg.execute(count.format("chaos_counts")).fetchone() == (0,)  # the job's own table
        assert pg.execute(count.format("chaos_counts__chaos")).fetchone() == (6000,)
        assert pg.execute("SELECT count(*) FROM pg_prepared_xacts").fetchone() == (0,)

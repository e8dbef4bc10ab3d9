"""`barrierflow chaos` with the kind driver: the whole driver killed, a new driver resumes
exactly once (a file of its own so the suite's two workers can run it beside the other
chaos runs). Skip it locally with `-m "not chaos"`."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from .test_chaos import FAILURE_LINE, chaos

pytestmark = [pytest.mark.spark, pytest.mark.chaos]

DRIVER_RUNS = pytest.mark.timeout(1200)
"""Each killed driver costs a new driver's Spark start-up (seconds, minutes on a busy box)."""


@DRIVER_RUNS
def test_chaos_kills_the_whole_driver_of_a_postgresql_job_and_a_new_driver_resumes_exactly_once(
    spark, tmp_path, postgres_server
):
    # A driver killed between checkpoints leaves prepared transactions that the next driver
    # resolves; the file sink's side of a killed driver: test_driver_stop_cleanup.py.
    psycopg = pytest.importorskip("psycopg")
    with psycopg.connect(postgres_server, autocommit=True) as pg:
        pg.execute("CREATE TABLE chaos_driver_counts (word text NOT NULL, n bigint NOT NULL)")
        # 10 s of input: each failure needs a checkpoint (100 ms apart) and a gap of up to
        # 0.2 s after the previous recovery; a rerun paces afresh, so a driver's start costs
        # no input
        result = chaos(
            tmp_path,
            "postgres_count.py",
            2,
            "driver,exception",
            5_000,
            500,
            outputs=(postgres_server, "chaos_driver_counts"),
        )
        assert result.exit_code == 0, result.output[-3000:]
        lines = FAILURE_LINE.findall(result.output)
        assert [int(n) for n, _, _ in lines] == [1, 2], result.output[-3000:]
        assert sorted(kind for _, _, kind in lines) == ["driver", "exception"]
        assert "5000 records without failures, 5000 with; 0 lost, 0 duplicated" in result.output
        assert result.output.rstrip().endswith("exactly-once: OK")
        assert "restored no checkpoint" not in result.output
        assert pg.execute("SELECT count(*) FROM pg_prepared_xacts").fetchone() == (0,)
    for driver in re.findall(r"driver of the driver \(pid (\d+)\)", result.output):
        assert not Path(f"/proc/{driver}").exists()  # killed, and reaped

"""`barrierflow nexmark generate`: real events files, one line of output, errors in one line."""

from __future__ import annotations

import json
import re

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from barrierflow.cli import main
from barrierflow.nexmark.events_file import events_from_record_batch
from barrierflow.nexmark.generator import GeneratorConfig, generate_events
from barrierflow.nexmark.model import from_table_row


def generate(*arguments: str):
    return CliRunner().invoke(main, ["nexmark", "generate", *arguments])


def test_generate_writes_json_lines_and_prints_one_line(tmp_path):
    out = tmp_path / "events.jsonl"
    result = generate("--events", "2500", "--out", str(out))
    assert result.exit_code == 0, result.output
    (line,) = result.output.splitlines()
    assert re.fullmatch(
        rf"wrote 2,500 events to {re.escape(str(out))} \(\d+\.\d \w+\) in \d+\.\d s", line
    )
    events = [from_table_row(json.loads(text)) for text in out.read_text().splitlines()]
    assert events == generate_events(GeneratorConfig(), 2_500)


def test_generate_honours_seed_rate_and_out_of_order_groups_and_writes_parquet(tmp_path):
    out = tmp_path / "deep" / "folder" / "events.parquet"
    result = generate(
        "--events", "600", "--out", str(out), "--seed", "9", "--rate", "500",
        "--out-of-order-group-size", "25",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    config = GeneratorConfig(seed=9, first_event_rate=500, out_of_order_group_size=25)
    assert events_from_record_batch(pq.read_table(out)) == generate_events(config, 600)
    assert f"wrote 600 events to {out} (" in result.output


def test_bad_options_and_unwritable_paths_fail_in_one_line(tmp_path):
    missing = generate("--out", str(tmp_path / "x.jsonl"))
    assert missing.exit_code == 2 and "Missing option '--events'" in missing.output
    negative = generate("--events", "-5", "--out", str(tmp_path / "x.jsonl"))
    assert negative.exit_code == 2 and "-5 is not in the range x>=0" in negative.output
    blocked = tmp_path / "a-file"
    blocked.write_text("")
    result = generate("--events", "10", "--out", str(blocked / "events.jsonl"))
    assert result.exit_code == 1
    assert len(result.output.splitlines()) == 1 and result.output.startswith("error: ")
    shuffle = generate("--events", "10", "--out", str(tmp_path / "y.jsonl"),
                       "--out-of-order-group-size", "953")  # fmt: skip
    assert shuffle.exit_code == 1
    assert "out_of_order_group_size must not be a multiple of 953" in shuffle.output


def test_the_nexmark_group_is_listed_in_the_help():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0
    assert re.search(r"^\s+nexmark\s+The Nexmark benchmark", result.output, re.MULTILINE)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--query", "q0"], "error: give either a number of events to generate or an input file"),
        (["--query", "q0", "--input", "/nonexistent/events.json"], "error: no events file at"),
        (
            ["--query", "q0", "--input", __file__, "--rate", "1000"],
            "error: a rate paces the generator; it cannot pace an input file",
        ),
    ],
)
def test_run_refuses_bad_settings_in_one_line_before_starting_spark(arguments, message):
    result = CliRunner().invoke(main, ["nexmark", "run", *arguments])
    assert result.exit_code == 1
    assert result.output.strip().startswith(message), result.output
    assert len(result.output.strip().splitlines()) == 1

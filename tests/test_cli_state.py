"""`barrierflow state show`: what a checkpoint holds, read without Spark; errors in one line."""

from __future__ import annotations

import sys
from pathlib import Path

from click.testing import CliRunner

from barrierflow.cli import main

sys.path.insert(0, str(Path(__file__).parent / "state_processor"))
from test_reading import WORDS, word_count_checkpoint


def test_show_lists_operators_states_kinds_key_counts_and_a_sample(tmp_path):
    folder = word_count_checkpoint(tmp_path / "chk-7", parallelism=2)
    result = CliRunner().invoke(main, ["state", "show", str(folder), "--sample", "2"])

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0] == f"checkpoint 7 of job 'job' at file://{folder}"
    assert "operator count (Op count), parallelism 2" in lines
    assert f"  keyed state 'count' (value): {len(set(WORDS))} key(s)" in lines
    samples = [line for line in lines if line.startswith("    '")]
    assert len(samples) == 2
    assert f"    ... {len(set(WORDS)) - 2} more" in lines


def test_show_with_a_key_prints_its_value_in_every_state(tmp_path):
    folder = word_count_checkpoint(tmp_path / "chk-7")
    result = CliRunner().invoke(main, ["state", "show", str(folder / "_metadata"), "--key", "the"])

    assert result.exit_code == 0, result.output
    assert "  'count' ['the'] = 3" in result.output.splitlines()


def test_a_damaged_file_is_one_line_naming_it_and_exit_status_1(tmp_path):
    folder = word_count_checkpoint(tmp_path / "chk-7")
    state_file = next(p for p in folder.iterdir() if p.suffix == ".state")
    state_file.write_bytes(state_file.read_bytes()[:-10])
    result = CliRunner().invoke(main, ["state", "show", str(folder)])

    assert result.exit_code == 1
    [line] = result.output.splitlines()
    assert line.startswith("error: ") and str(state_file) in line and "truncated" in line


def test_a_missing_path_or_uid_is_one_line_and_exit_status_1(tmp_path):
    missing = CliRunner().invoke(main, ["state", "show", str(tmp_path / "nothing")])
    assert missing.exit_code == 1
    assert missing.output.startswith(
        f"error: cannot read the 'checkpoint-metadata' file file://{tmp_path}/nothing/_metadata"
    )
    folder = word_count_checkpoint(tmp_path / "chk-7")
    unknown = CliRunner().invoke(main, ["state", "show", str(folder), "--uid", "nope"])
    assert unknown.exit_code == 1
    assert unknown.output.splitlines() == [
        f"error: file://{folder} holds no state of operator 'nope'; it holds count"
    ]

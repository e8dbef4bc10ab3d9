"""FileSource reads every line exactly once and resumes from a byte offset without loss."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from barrierflow.connectors.files import FileSource
from barrierflow.errors import SourceError


def read_all(source: FileSource, max_records: int = 1000, positions=None) -> list:
    reader = source.create_reader(source.create_splits())
    reader.restore(positions or {})
    records = []
    while (batch := reader.poll_batch(max_records)) is not None:
        assert len(batch) <= max_records
        records.extend(batch)
    reader.close()
    return records


def test_lines_lose_their_newline_and_a_last_line_without_one_is_kept(tmp_path):
    file = tmp_path / "a.txt"
    file.write_bytes(b"one\ntwo\n\nthree")
    assert read_all(FileSource.for_lines(str(file))) == ["one", "two", "", "three"]


def test_a_file_ending_with_a_newline_has_no_extra_empty_line(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"one\ntwo\n")
    assert read_all(FileSource.for_lines(str(tmp_path / "a.txt"))) == ["one", "two"]


def test_windows_line_endings_are_removed_but_other_carriage_returns_stay(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"one\r\ntw\ro\r\nthree")
    assert read_all(FileSource.for_lines(str(tmp_path / "a.txt"))) == ["one", "tw\ro", "three"]


def test_lines_are_decoded_as_utf8(tmp_path):
    (tmp_path / "a.txt").write_text("grüße\n日本\n", encoding="utf-8")
    assert read_all(FileSource.for_lines(str(tmp_path / "a.txt"))) == ["grüße", "日本"]


def test_a_folder_is_read_recursively_in_sorted_order_skipping_hidden_names(tmp_path):
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "x.txt").write_text("b/x\n")
    (tmp_path / "a.txt").write_text("a\n")
    (tmp_path / "c.txt").write_text("c\n")
    (tmp_path / ".hidden.txt").write_text("hidden\n")
    (tmp_path / "_SUCCESS").write_text("")
    (tmp_path / "_tmp").mkdir()
    (tmp_path / "_tmp" / "y.txt").write_text("hidden folder\n")
    (tmp_path / "b" / ".crc").write_text("hidden in a subfolder\n")
    source = FileSource.for_lines(str(tmp_path))

    assert [s.split_id for s in source.create_splits()] == ["a.txt", "b/x.txt", "c.txt"]
    assert read_all(source) == ["a", "b/x", "c"]


def test_the_split_of_a_single_file_is_named_after_the_file(tmp_path):
    (tmp_path / "data.txt").write_text("x\n")
    assert [s.split_id for s in FileSource.for_lines(tmp_path / "data.txt").create_splits()] == [
        "data.txt"
    ]


def test_a_file_uri_is_read_like_a_path(tmp_path):
    (tmp_path / "a.txt").write_text("x\ny\n")
    assert read_all(FileSource.for_lines(f"file://{tmp_path}")) == ["x", "y"]


def test_json_lines_are_parsed_and_blank_lines_skipped(tmp_path):
    (tmp_path / "e.jsonl").write_text('{"a": 1}\n[1, "x"]\n\n  \n"s"\n3.5\nnull\n')
    records = read_all(FileSource.for_json_lines(str(tmp_path)))
    assert records == [{"a": 1}, [1, "x"], "s", 3.5, None]


def test_a_missing_path_is_a_source_error_naming_it(tmp_path):
    source = FileSource.for_lines(str(tmp_path / "no-such-folder"))
    with pytest.raises(SourceError, match=r"no-such-folder.*does not exist"):
        source.create_splits()


def test_an_empty_folder_gives_no_splits_and_its_reader_is_at_the_end_at_once(tmp_path):
    source = FileSource.for_lines(str(tmp_path))
    assert source.create_splits() == []
    reader = source.create_reader([])
    reader.restore({})
    assert reader.poll_batch(10) is None
    assert reader.snapshot() == {}


def test_an_empty_file_is_a_split_with_no_lines(tmp_path):
    (tmp_path / "empty.txt").write_bytes(b"")
    source = FileSource.for_lines(str(tmp_path))
    reader = source.create_reader(source.create_splits())
    assert reader.poll_batch(10) is None
    assert reader.snapshot() == {"empty.txt": 0}


def test_a_malformed_json_line_is_a_source_error_naming_file_line_and_byte_offset(tmp_path):
    (tmp_path / "e.jsonl").write_text('{"a": 1}\n[2]\n{"broken": \n[4]\n')
    with pytest.raises(SourceError, match=r"e\.jsonl: line 3 \(byte offset 13\) is not valid JSON"):
        read_all(FileSource.for_json_lines(str(tmp_path)))


def test_a_malformed_json_line_after_a_restore_still_has_its_true_line_number(tmp_path):
    (tmp_path / "e.jsonl").write_text("1\n2\n3\nnope\n")
    with pytest.raises(SourceError, match=r"line 4 \(byte offset 6\)"):
        read_all(FileSource.for_json_lines(str(tmp_path)), positions={"e.jsonl": 4})


def test_invalid_utf8_is_a_source_error_naming_the_line(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"ok\nbad \xff here\n")
    with pytest.raises(SourceError, match=r"a\.txt: line 2 \(byte offset 3\) is not valid UTF-8"):
        read_all(FileSource.for_lines(str(tmp_path)))


def test_the_snapshot_is_the_byte_offset_of_the_next_unread_line_of_every_file(tmp_path):
    (tmp_path / "a.txt").write_bytes(b"11\n22\n33\n")
    (tmp_path / "b.txt").write_bytes(b"44\n55")
    source = FileSource.for_lines(str(tmp_path))
    reader = source.create_reader(source.create_splits())
    reader.restore({})

    assert reader.snapshot() == {"a.txt": 0, "b.txt": 0}
    assert reader.poll_batch(2) == ["11", "22"]
    assert reader.snapshot() == {"a.txt": 6, "b.txt": 0}
    assert reader.poll_batch(2) == ["33"]
    assert reader.poll_batch(2) == ["44", "55"]
    assert reader.snapshot() == {"a.txt": 9, "b.txt": 5}
    assert reader.poll_batch(2) is None


def test_finished_files_are_not_read_again_after_a_restore(tmp_path):
    (tmp_path / "a.txt").write_text("a1\na2\n")
    (tmp_path / "b.txt").write_text("b1\nb2\n")
    source = FileSource.for_lines(str(tmp_path))
    assert read_all(source, positions={"a.txt": 6, "b.txt": 3}) == ["b2"]


def test_positions_of_files_this_reader_was_not_given_are_ignored(tmp_path):
    (tmp_path / "a.txt").write_text("a1\n")
    (tmp_path / "b.txt").write_text("b1\n")
    source = FileSource.for_lines(str(tmp_path))
    splits = source.create_splits()
    reader = source.create_reader(splits[:1])
    reader.restore({"b.txt": 3, "gone.txt": 100})
    assert reader.poll_batch(10) == ["a1"]
    assert reader.poll_batch(10) is None
    assert reader.snapshot() == {"a.txt": 3}


def test_a_position_past_the_end_of_a_file_that_shrank_is_a_source_error(tmp_path):
    (tmp_path / "a.txt").write_text("short\n")
    with pytest.raises(SourceError, match=r"a\.txt at byte 100: the file has only 6 bytes"):
        read_all(FileSource.for_lines(str(tmp_path)), positions={"a.txt": 100})


def test_a_file_deleted_after_the_splits_were_made_is_a_source_error_naming_it(tmp_path):
    (tmp_path / "a.txt").write_text("x\n")
    source = FileSource.for_lines(str(tmp_path))
    reader = source.create_reader(source.create_splits())
    (tmp_path / "a.txt").unlink()
    with pytest.raises(SourceError, match=r"a\.txt"):
        reader.poll_batch(10)


def test_a_line_longer_than_many_chunks_is_read_whole(tmp_path):
    long_line = "x" * 10_000
    (tmp_path / "a.txt").write_text(f"short\n{long_line}\nend")
    source = FileSource.for_lines(str(tmp_path), chunk_size=7)
    assert read_all(source, max_records=2) == ["short", long_line, "end"]


def test_the_source_survives_pickling_with_its_settings(tmp_path):
    import pickle

    (tmp_path / "a.jsonl").write_text("[1]\n")
    source = pickle.loads(pickle.dumps(FileSource.for_json_lines(str(tmp_path), chunk_size=3)))
    assert read_all(source) == [[1]]


# ---- any cut point: snapshot, restore in a new reader, nothing lost or repeated ---------------

line_text = st.text(st.characters(blacklist_characters="\n\r", codec="utf-8"), max_size=12)
file_lines = st.lists(line_text, max_size=25)


@settings(max_examples=150, deadline=None)
@given(
    files=st.lists(st.tuples(file_lines, st.booleans()), min_size=1, max_size=4),
    chunk_size=st.integers(1, 64),
    max_records=st.integers(1, 7),
    polls_before_cut=st.integers(0, 40),
    json_lines=st.booleans(),
)
def test_a_restore_from_any_cut_point_reads_exactly_the_remaining_lines(
    files, chunk_size, max_records, polls_before_cut, json_lines
):
    with tempfile.TemporaryDirectory() as folder:
        expected = []
        for number, (lines, trailing_newline) in enumerate(files):
            if json_lines:
                lines = [json.dumps(line, ensure_ascii=False) for line in lines]
            # A last empty line exists only if a newline ends the file.
            trailing_newline = trailing_newline or lines[-1:] == [""]
            content = "\n".join(lines) + ("\n" if trailing_newline and lines else "")
            Path(folder, f"f{number:02d}.txt").write_text(content, encoding="utf-8")
            expected.extend([json.loads(line) for line in lines] if json_lines else lines)
        make = FileSource.for_json_lines if json_lines else FileSource.for_lines
        source = make(folder, chunk_size=chunk_size)
        splits = source.create_splits()

        first = source.create_reader(splits)
        first.restore({})
        before: list = []
        for _ in range(polls_before_cut):
            batch = first.poll_batch(max_records)
            if batch is None:
                break
            before.extend(batch)
        positions = first.snapshot()
        first.close()

        after = read_all(source, max_records=max_records, positions=positions)
        assert before + after == expected

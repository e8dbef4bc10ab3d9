"""Readers say which split each batch came from (`poll_split_batch`), for per-split watermarks."""

from __future__ import annotations

from barrierflow.connectors.base import WHOLE_READER_SPLIT, SourceReader, SplitBatch
from barrierflow.connectors.collection import CollectionSource
from barrierflow.connectors.datagen import DataGeneratorSource
from barrierflow.connectors.files import FileSource


def drain(reader, max_records=10):
    batches = []
    while (batch := reader.poll_split_batch(max_records)) is not None:
        batches.append(batch)
    return batches


def test_a_reader_with_only_poll_batch_is_one_pseudo_split():
    class Plain(SourceReader):
        def __init__(self):
            self.batches = [[1, 2], [3]]

        def restore(self, positions):
            pass

        def poll_batch(self, max_records):
            return self.batches.pop(0) if self.batches else None

        def snapshot(self):
            return {}

    reader = Plain()
    assert reader.split_ids() == [WHOLE_READER_SPLIT]
    assert drain(reader) == [
        SplitBatch(WHOLE_READER_SPLIT, [1, 2]),
        SplitBatch(WHOLE_READER_SPLIT, [3]),
    ]


def test_the_collection_reader_finishes_its_split_with_the_last_batch():
    source = CollectionSource([1, 2, 3])
    reader = source.create_reader(source.create_splits())
    assert reader.split_ids() == ["collection"]
    assert drain(reader, 2) == [
        SplitBatch("collection", [1, 2]),
        SplitBatch("collection", [3], finished=True),
    ]
    other = source.create_reader([])
    assert other.split_ids() == [] and other.poll_split_batch(10) is None


def test_the_file_reader_reports_each_file_and_its_end(tmp_path):
    (tmp_path / "a.txt").write_text("1\n2\n3\n")
    (tmp_path / "b.txt").write_text("4\n")
    source = FileSource.for_lines(str(tmp_path))
    reader = source.create_reader(source.create_splits())
    reader.restore({})
    assert reader.split_ids() == ["a.txt", "b.txt"]
    assert drain(reader, 2) == [
        SplitBatch("a.txt", ["1", "2"]),
        SplitBatch("a.txt", ["3"]),
        SplitBatch("a.txt", [], finished=True),
        SplitBatch("b.txt", ["4"]),
        SplitBatch("b.txt", [], finished=True),
    ]
    assert reader.snapshot() == {"a.txt": 6, "b.txt": 2}


def test_the_generator_reader_serves_the_split_furthest_behind_and_finishes_each():
    source = DataGeneratorSource(lambda i: i, 7, num_splits=2)
    reader = source.create_reader(source.create_splits())
    reader.restore({})
    assert reader.split_ids() == ["0-of-2", "1-of-2"]
    assert drain(reader, 3) == [
        SplitBatch("0-of-2", [0, 2, 4]),
        SplitBatch("1-of-2", [1, 3, 5], finished=True),
        SplitBatch("0-of-2", [6], finished=True),
    ]
    assert reader.snapshot() == {"0-of-2": 8, "1-of-2": 7}

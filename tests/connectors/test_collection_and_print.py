"""CollectionSource replays a list from its index; PrintSink prints as PyFlink does."""

from __future__ import annotations

import io

import pytest

from barrierflow.connectors.base import SinkContext
from barrierflow.connectors.collection import CollectionSource
from barrierflow.connectors.print_sink import PrintSink


def reader_of(source, parallelism: int = 1, subtask: int = 0, positions=None):
    splits = source.create_splits()
    reader = source.create_reader(splits[subtask::parallelism])
    reader.restore(positions or {})
    return reader


def test_a_collection_is_read_in_order_in_batches_then_ends():
    reader = reader_of(CollectionSource([1, 2, 3, 4, 5]))
    assert reader.poll_batch(2) == [1, 2]
    assert reader.snapshot() == {"collection": 2}
    assert reader.poll_batch(2) == [3, 4]
    assert reader.poll_batch(2) == [5]
    assert reader.poll_batch(2) is None
    assert reader.snapshot() == {"collection": 5}


def test_a_collection_resumes_from_its_index():
    reader = reader_of(CollectionSource(["a", "b", "c"]), positions={"collection": 2})
    assert reader.poll_batch(10) == ["c"]
    assert reader.poll_batch(10) is None


def test_a_collection_is_one_split_so_other_subtasks_end_at_once():
    source = CollectionSource([1, 2])
    assert len(source.create_splits()) == 1
    other = reader_of(source, parallelism=2, subtask=1, positions={"collection": 1})
    assert other.poll_batch(10) is None
    assert other.snapshot() == {}


def test_an_empty_collection_ends_at_once():
    assert reader_of(CollectionSource([])).poll_batch(10) is None


def test_a_collection_is_copied_so_later_changes_to_the_list_do_not_leak_in():
    values = [1, 2]
    source = CollectionSource(values)
    values.append(3)
    assert reader_of(source).poll_batch(10) == [1, 2]


def printed(sink: PrintSink, subtask: int, parallelism: int, records, capsys) -> str:
    writer = sink.create_writer(SinkContext("print", subtask, parallelism, 0, "run1-0"))
    writer.restore([])
    writer.write_batch(records)
    return capsys.readouterr().out


@pytest.mark.parametrize(
    ("identifier", "subtask", "parallelism", "expected"),
    [
        pytest.param("out", 1, 3, "out:2> ('a', 1)\nout:2> x\n", id="identifier and subtask"),
        pytest.param(None, 2, 3, "3> ('a', 1)\n3> x\n", id="subtask only"),
        pytest.param("out", 0, 1, "out> ('a', 1)\nout> x\n", id="identifier only"),
        pytest.param(None, 0, 1, "('a', 1)\nx\n", id="no prefix"),
    ],
)
def test_print_prefixes_records_as_pyflink_does(identifier, subtask, parallelism, expected, capsys):
    assert printed(PrintSink(identifier), subtask, parallelism, [("a", 1), "x"], capsys) == expected


def test_print_has_no_transactions_and_flushes_at_the_barrier(monkeypatch):
    class CountingStdout(io.StringIO):
        flushes = 0

        def flush(self) -> None:
            self.flushes += 1

    out = CountingStdout()
    monkeypatch.setattr("sys.stdout", out)
    writer = PrintSink().create_writer(SinkContext("print", 0, 1, 0, "run1-0"))
    writer.restore([])
    writer.write_batch([1])
    assert out.flushes == 0
    writer.pre_commit(1)
    assert out.flushes == 1
    assert writer.snapshot_state() is None
    writer.commit(1)
    assert out.getvalue() == "1\n"

"""The end-to-end tests' gated input (`jobs.GatedGeneratorSource`), record by record: while
its gate file is missing no record at or past the gate index comes out, however large the
batch asked for; once it exists, every record comes out exactly once."""

from __future__ import annotations

from .jobs import GatedGeneratorSource


def drain(reader) -> list[int]:
    records: list[int] = []
    while (batch := reader.poll_split_batch(1000)) is not None and batch.records:
        records += batch.records
    return records


def test_a_closed_gate_holds_every_split_at_the_gate_and_an_open_one_lets_the_rest_through(
    tmp_path,
):
    gate = tmp_path / "gate"
    source = GatedGeneratorSource(lambda i: i, 1000, None, gate, 500)
    reader = source.create_reader(source.create_splits())

    assert sorted(drain(reader)) == list(range(500))
    assert reader.poll_split_batch(1000).records == []  # held, not finished

    gate.touch()
    assert sorted(drain(reader)) == list(range(500, 1000))
    assert reader.poll_split_batch(1000) is None

"""A heap snapshot's key-group sections: marshalled in checkpoints when every object is a
plain builtin, pickled otherwise and always in savepoints; both read back by every
reader (heap and RocksDB restore), damage named as the key group's."""

from __future__ import annotations

import pickle
from collections import namedtuple
from typing import Any

import pytest

from barrierflow import _envelope, _fs
from barrierflow.core.state_backends import EmbeddedRocksDBStateBackend
from barrierflow.errors import ConfigurationError, StateRestoreError
from barrierflow.state import (
    ListStateDescriptor,
    MapStateDescriptor,
    ValueStateDescriptor,
    heap_sections,
)
from barrierflow.state.backends import create_keyed_backend
from barrierflow.state.heap_backend import KEYED_STATE, HeapKeyedStateBackend
from barrierflow.state.heap_sections import (
    MARSHAL_TAG,
    MARSHAL_WHOLE_TAG,
    decode_section,
    encode_section,
    encode_whole,
)
from barrierflow.state.key_groups import KeyGroupRange

MAX_P = 128
SIDE_FILES = _fs.Location("/no/side/files")  # a checkpoint's folder: the heap writes none there
Pair = namedtuple("Pair", "a b")


class Word(str):
    pass


class Plain:
    def __init__(self, n: int) -> None:
        self.n = n

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Plain) and other.n == self.n


def sections(data: bytes) -> list[bytes]:
    """The key-group sections of a "keyed-state" envelope, in key-group order."""
    header, body = _envelope.decode(data, KEYED_STATE)
    return [bytes(body[o : o + n]) for _, (o, n) in sorted(header["key_groups"].items())]


def backend_with(values: dict[Any, Any]) -> HeapKeyedStateBackend:
    backend = HeapKeyedStateBackend(KeyGroupRange(0, MAX_P - 1), MAX_P)
    state = backend.get_value_state(ValueStateDescriptor("v"))
    for key, value in values.items():
        backend.set_current_key(key)
        state.update(value)
    return backend


def restored_values(data: bytes, keys: list[Any]) -> dict[Any, Any]:
    restored = HeapKeyedStateBackend(KeyGroupRange(0, MAX_P - 1), MAX_P)
    restored.restore([data])
    state = restored.get_value_state(ValueStateDescriptor("v"))
    found = {}
    for key in keys:
        restored.set_current_key(key)
        found[key] = state.value()
    return found


PLAIN = {
    "a": 1,
    True: False,
    2.5: -0.0,
    2: "two",
    ("t", 3): (1.5, None, b"x"),
    "l": [1, [2]],
    "d": {"k": {1, 2}},
}


def test_a_checkpoint_marshals_plain_builtins_and_a_savepoint_stays_pickled():
    backend = backend_with(PLAIN)
    checkpoint = backend.snapshot(1).write(SIDE_FILES)
    savepoint = backend.snapshot().write(None)
    assert {s[0] for s in sections(checkpoint)} == {MARSHAL_TAG}
    assert {s[0] for s in sections(savepoint)} == {0x80}  # pickle's PROTO opcode
    assert restored_values(checkpoint, list(PLAIN)) == PLAIN
    assert restored_values(savepoint, list(PLAIN)) == PLAIN


@pytest.mark.parametrize(
    "odd",
    [Pair(1, 2), Plain(3), Word("sub"), (1, Pair(2, 3))],
    ids=["named tuple", "class", "str subclass", "inside a tuple"],
)
def test_a_key_group_with_any_other_object_falls_back_to_pickle_and_keeps_its_type(odd):
    values = {"plain": 1, "odd": odd}
    backend = backend_with(values)
    data = backend.snapshot(1).write(SIDE_FILES)
    assert {s[0] for s in sections(data)} <= {0x80, MARSHAL_TAG} and 0x80 in {
        s[0] for s in sections(data)
    }
    back = restored_values(data, ["plain", "odd"])
    assert back == values and type(back["odd"]) is type(odd)


def test_a_key_group_or_delta_holding_set_values_is_pickled_not_marshalled():
    # marshal sorts a set's items (25x pickle's time here): a set value means pickle
    per_state = [{"ids": {3, 1, 2}, "n": 4}, {"x": frozenset({"a"})}]
    section = encode_section(["seen", "tags"], per_state, fast=True)
    assert section[0] == 0x80 and decode_section(section, 2) == per_state
    assert encode_section(["seen"], [{"ids": [3, 1], "n": 4}], fast=True)[0] == MARSHAL_TAG
    delta = [[["ids"], [{5, 6}]]]
    assert encode_whole(["seen"], delta, fast=True)[0] == 0x80
    assert decode_section(encode_whole(["seen"], delta, fast=True), 1) == delta


def test_a_large_state_is_marshalled_in_chunks_each_read_back(monkeypatch):
    monkeypatch.setattr(heap_sections, "MARSHAL_CHUNK", 3)
    per_state = [{i: i * i for i in range(10)}, {}, {"x": [1]}]
    section = encode_section(["a", "b", "c"], per_state, fast=True)
    # 4 chunks of state 0 (3+3+3+1 entries) and 1 of state 2, each behind its length
    assert section[0] == MARSHAL_TAG
    position, chunks = 1, []
    while position < len(section):
        length = int.from_bytes(section[position : position + 4], "big")
        chunks.append(
            len(decode_section(b"\x01" + section[position : position + 4 + length], 3)[0])
        )
        position += 4 + length
    assert chunks == [3, 3, 3, 1, 0]
    assert decode_section(section, 3) == per_state


def test_a_changelog_delta_group_is_marshalled_whole_or_pickled():
    plain = [[{"a": 1}, ["gone"]]]
    assert encode_whole(["v"], plain, fast=True)[0] == MARSHAL_WHOLE_TAG
    assert decode_section(encode_whole(["v"], plain, fast=True), 1) == plain
    odd = [[{"a": Plain(1)}, []]]
    assert encode_whole(["v"], odd, fast=True)[0] == 0x80
    assert decode_section(encode_whole(["v"], odd, fast=True), 1) == odd
    assert encode_whole(["v"], plain, fast=False) == pickle.dumps(plain, protocol=5)


def test_a_value_that_cannot_be_pickled_still_names_its_state_and_key():
    backend = backend_with({"k": (lambda: 1)})
    with pytest.raises(ConfigurationError, match="value of state 'v' for key 'k'"):
        backend.snapshot(1).write(SIDE_FILES)


@pytest.mark.parametrize(
    ("damage", "says"),
    [
        (lambda s: s[:-3], "runs past"),
        (lambda s: s[:5] + b"\x00" * (len(s) - 5), "cannot be unpickled"),
    ],
    ids=["truncated", "garbled"],
)
def test_a_damaged_marshalled_section_is_a_state_restore_error_naming_the_key_group(damage, says):
    backend = backend_with({"a": 1})
    data = backend.snapshot(1).write(SIDE_FILES)
    header, body = _envelope.decode(data, KEYED_STATE)
    ((group, (offset, length)),) = header["key_groups"].items()
    bad = bytes(body[:offset]) + damage(bytes(body[offset : offset + length]))
    header["key_groups"] = {group: [offset, len(bad) - offset]}
    with pytest.raises(StateRestoreError, match=f"key group {group} .*{says}"):
        HeapKeyedStateBackend(KeyGroupRange(0, MAX_P - 1), MAX_P).restore(
            [_envelope.encode(KEYED_STATE, header, bad)]
        )


def test_a_marshalled_chunk_naming_a_state_the_header_lacks_is_refused():
    section = encode_section(["a", "b"], [{}, {"x": 1}], fast=True)
    with pytest.raises(ValueError, match="state 1 of 1"):
        decode_section(section, 1)


def test_the_rocksdb_backend_restores_a_marshalled_heap_checkpoint(tmp_path):
    pytest.importorskip("rocksdict")
    heap = HeapKeyedStateBackend(KeyGroupRange(0, MAX_P - 1), MAX_P)
    values = heap.get_value_state(ValueStateDescriptor("v"))
    lists = heap.get_list_state(ListStateDescriptor("l"))
    maps = heap.get_map_state(MapStateDescriptor("m"))
    for key in range(50):
        heap.set_current_key(key)
        values.update((key, "x"))
        lists.add(key)
        maps.put("k", [key])
    data = heap.snapshot(1).write(SIDE_FILES)
    assert {s[0] for s in sections(data)} == {MARSHAL_TAG}
    rocks = create_keyed_backend(
        EmbeddedRocksDBStateBackend(), KeyGroupRange(0, MAX_P - 1), MAX_P, tmp_path
    )
    try:
        rocks.restore([data])
        v = rocks.get_value_state(ValueStateDescriptor("v"))
        lst = rocks.get_list_state(ListStateDescriptor("l"))
        m = rocks.get_map_state(MapStateDescriptor("m"))
        for key in range(50):
            rocks.set_current_key(key)
            assert (v.value(), list(lst.get()), m.get("k")) == ((key, "x"), [key], [key])
    finally:
        rocks.dispose()

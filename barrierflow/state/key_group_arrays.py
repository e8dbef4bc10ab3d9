"""Key groups of a whole Arrow column at once, equal to what each Python value gets.

`key_groups_of_array(keys, max_parallelism)[i] == assign_to_key_group(keys[i].as_py(),
max_parallelism)` for every row: the savepoint format fixes `stable_hash`, so this only
computes it faster. Integer columns are mixed with numpy (an int in [0, 2**32) is
Fibonacci-hashed: the high half of its product with 2**64/phi, which wraps exactly in
uint64; the other ints take the Python path once per distinct value); string and binary
columns are dictionary-encoded so crc32 runs once per distinct value; booleans are 0 and
1; nulls hash as None. Any other type takes the Python path per row.

>>> import pyarrow as pa
>>> from barrierflow.state.key_groups import assign_to_key_group
>>> keys = ["alice", "bob", "alice", None]
>>> key_groups_of_array(pa.array(keys), 128).tolist() == [
...     assign_to_key_group(k, 128) for k in keys
... ]
True
"""

from __future__ import annotations

from typing import Any
from zlib import crc32

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from barrierflow.state.key_groups import _BYTES_SEED, _GOLDEN, _M32, _NONE_HASH, stable_hash

__all__ = ["key_groups_of_array", "stable_hashes"]

_GOLDEN64 = np.uint64(_GOLDEN)
_SHIFT = np.uint64(32)


def key_groups_of_array(keys: pa.Array | pa.ChunkedArray, max_parallelism: int) -> np.ndarray:
    """The key group (int64) of every value of `keys`."""
    return (stable_hashes(keys) % np.uint64(max_parallelism)).astype(np.int64)


def stable_hashes(keys: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """`stable_hash` of every value of `keys`, as uint64."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks()
    kind = keys.type
    if pa.types.is_dictionary(kind):
        hashes = stable_hashes(keys.dictionary)
        if not len(hashes):  # only nulls
            return np.full(len(keys), _NONE_HASH, np.uint64)
        indices = keys.indices.fill_null(0).to_numpy(zero_copy_only=False)
        return _with_nulls(keys, hashes[indices])
    if pa.types.is_boolean(kind):
        keys = keys.cast(pa.uint8())
        kind = keys.type
    if pa.types.is_integer(kind):
        values = keys.fill_null(0).to_numpy(zero_copy_only=False)
        return _with_nulls(keys, _int_hashes(values))
    if pa.types.is_string(kind) or pa.types.is_large_string(kind):
        return _with_nulls(keys, _per_distinct(keys, _str_hash))
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind):
        return _with_nulls(keys, _per_distinct(keys, _bytes_hash))
    return np.fromiter(map(stable_hash, keys.to_pylist()), dtype=np.uint64, count=len(keys))


def _int_hashes(values: np.ndarray) -> np.ndarray:
    small = values <= _M32
    if values.dtype.kind == "i":
        small &= values >= 0
    hashes = _mix(values.astype(np.uint64))
    if not small.all():
        large = np.flatnonzero(~small)
        distinct, where = np.unique(values[large], return_inverse=True)
        slow = np.array([stable_hash(int(v)) for v in distinct.tolist()], dtype=np.uint64)
        hashes[large] = slow[where]
    return hashes


def _mix(values: np.ndarray) -> np.ndarray:
    """`key_groups._mix` for values below 2**32, in uint64 (bits 32..63 of the product)."""
    return (values * _GOLDEN64) >> _SHIFT


def _str_hash(text: str) -> int:
    return crc32(text.encode())


def _bytes_hash(data: bytes) -> int:
    return crc32(data, _BYTES_SEED)


def _per_distinct(keys: pa.Array, crc: Any) -> np.ndarray:
    encoded = pc.dictionary_encode(keys)
    distinct = encoded.dictionary.to_pylist()
    crcs = np.fromiter(map(crc, distinct), dtype=np.uint64, count=len(distinct))
    indices = encoded.indices.fill_null(0).to_numpy(zero_copy_only=False)
    return _mix(crcs)[indices] if len(distinct) else np.zeros(len(keys), np.uint64)


def _with_nulls(keys: pa.Array, hashes: np.ndarray) -> np.ndarray:
    if keys.null_count:
        hashes = hashes.copy()
        hashes[keys.is_null().to_numpy(zero_copy_only=False)] = _NONE_HASH
    return hashes

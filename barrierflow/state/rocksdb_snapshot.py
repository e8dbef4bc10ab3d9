"""A RocksDB backend's native checkpoint section: the local checkpoint until it is uploaded,
its envelope, downloading its files for a restore, and its canonical form (savepoints, the
state processor). The format is in `rocksdb_backend.py`'s docstring.
"""

from __future__ import annotations

import os
import pickle
import shutil
import struct
import tempfile
from collections.abc import Callable
from typing import Any

from rocksdict import (
    Rdict,
)

from barrierflow import _envelope, _fs
from barrierflow.core.state_backends import EmbeddedRocksDBStateBackend
from barrierflow.core.state_descriptors import (
    StateKind,
)
from barrierflow.errors import ConfigurationError, StateRestoreError
from barrierflow.state.heap_backend import KEYED_STATE, filtered
from barrierflow.state.key_groups import KeyGroupRange
from barrierflow.state.key_scope import (
    KEYED_STATE_VERSION,
    check_keyed_header_version,
)
from barrierflow.state.rocksdb_db import open_read_only
from barrierflow.state.rocksdb_encoding import (
    NATIVE_KIND,
    decode_key,
    decode_list,
    decode_value,
    section_kind,
    split_key_part,
    split_prefix,
)
from barrierflow.state.rocksdb_uploads import (
    SharedUploads,
    shared_sources,
    upload_incremental,
)

NATIVE_VERSION = 1
"""Schema of the native header. Readers take 1 up to this."""


def range_of(header: dict[str, Any]) -> KeyGroupRange:
    try:
        start, end = header["key_group_range"]
        return KeyGroupRange(int(start), int(end))
    except Exception as error:
        raise StateRestoreError(f"malformed keyed-state header: {error!r}") from error


def native_header(
    max_parallelism: int, key_group_range: KeyGroupRange, states: list[tuple[str, StateKind]]
) -> dict[str, Any]:
    return {
        "version": NATIVE_VERSION,
        "max_parallelism": max_parallelism,
        "key_group_range": [key_group_range.start, key_group_range.end],
        "states": [[name, kind.value] for name, kind in states],
    }


class RocksDBSnapshot:
    """A native RocksDB checkpoint in a local folder (hard links), until `release()`."""

    def __init__(
        self,
        path: str,
        settings: EmbeddedRocksDBStateBackend,
        header: dict[str, Any],
        filters: list[Callable[[Any], Any] | None],
        uploads: SharedUploads | None = None,
        checkpoint_id: int | None = None,
    ) -> None:
        self._path = path
        self._settings = settings
        self._header = header
        self._filters = filters
        self._uploads = uploads
        self._checkpoint_id = checkpoint_id
        self._shared: list[tuple[str, int, bool]] = []
        self._side_file_bytes = 0

    def write(
        self,
        side_files: _fs.Location | None,
        shared: _fs.Location | None = None,
        final: bool = False,
    ) -> bytes:
        """Upload the checkpoint's files into `side_files` and return the native envelope
        naming them; `side_files` None: the canonical "keyed-state" envelope. (`final`
        changes nothing: the files are the store's.)"""
        if side_files is None:
            db = open_read_only(self._path, self._settings)
            try:
                return canonical_envelope(db, self._header, self._filters)
            finally:
                db.close()
        _fs.make_dirs(side_files)
        # LOG*: RocksDB's info log, not state
        names = [name for name in sorted(os.listdir(self._path)) if not name.startswith("LOG")]
        header = dict(self._header)
        if self._uploads is not None and shared is not None:
            header["shared"], self._shared, names = upload_incremental(
                self._path, names, shared, self._uploads, self._checkpoint_id
            )
        files = []
        for name in names:
            size, checksum = _fs.upload_file(os.path.join(self._path, name), side_files.child(name))
            files.append([f"{side_files.name}/{name}", size, checksum])
        self._side_file_bytes = sum(size for _, size, _ in files)
        return _envelope.encode(NATIVE_KIND, {**header, "files": files})

    def shared_files(self) -> list[tuple[str, int, bool]]:
        """After `write`: the files it referenced in the job's shared folder, as (name
        relative to the job folder, size, uploaded by this write); a full upload: none."""
        return list(self._shared)

    def side_file_bytes(self) -> int:
        """After `write`: the bytes of the checkpoint's own files (MANIFEST, OPTIONS and,
        without incremental checkpoints, every SST file) uploaded into `side_files`."""
        return self._side_file_bytes

    def release(self) -> None:
        """Delete the local checkpoint (its hard links)."""
        shutil.rmtree(self._path, ignore_errors=True)


def changelog_as_canonical(data: bytes, base: _fs.Location | None) -> bytes:
    """A heap backend's changelog manifest as the canonical section (its chain applied,
    `heap_changelog.changelog_to_canonical`); any other section as it is."""
    if section_kind(data) != "heap-changelog":
        return data
    from barrierflow.state.heap_changelog import changelog_to_canonical

    return changelog_to_canonical(data, base)


def parse_section(data: bytes) -> tuple[str, dict[str, Any], memoryview]:
    """(kind, header, body) of a canonical or native keyed section."""
    view = memoryview(data).cast("B")
    kind = NATIVE_KIND if section_kind(view) == NATIVE_KIND else KEYED_STATE
    header, body = _envelope.decode(view, kind)
    if not isinstance(header, dict):
        raise StateRestoreError(f"a {kind!r} header must be a dict, found {header!r:.200}")
    return kind, header, body


def download(header: dict[str, Any], base: _fs.Location | None, folder: str) -> None:
    """Download a native section's files from the checkpoint folder `base` into `folder`,
    checking each one's size and CRC-32."""
    if base is None:
        raise StateRestoreError(
            "a native RocksDB checkpoint section was given without the checkpoint folder "
            "its files are in"
        )
    try:
        files = [(str(name), int(size), int(crc)) for name, size, crc in header["files"]]
    except (KeyError, TypeError, ValueError) as error:
        raise StateRestoreError(f"malformed RocksDB checkpoint header: {error!r}") from error
    sources = []
    for name, size, crc in files:
        local_name = name.rsplit("/", 1)[-1]
        if local_name in ("", ".", "..") or name.startswith("/") or ".." in name.split("/"):
            raise StateRestoreError(f"a RocksDB checkpoint names the file {name!r}")
        sources.append((base.child(*name.split("/")), local_name, size, crc))
    sources += shared_sources(header, base)  # incremental: in the job folder's shared/
    os.makedirs(folder)
    for source, local_name, size, crc in sources:
        try:
            found_size, found_crc = _fs.download_file(source, os.path.join(folder, local_name))
        except FileNotFoundError as error:
            raise StateRestoreError(f"the RocksDB checkpoint file {source} is missing") from error
        if (found_size, found_crc) != (size, crc):
            raise StateRestoreError(
                f"damaged RocksDB checkpoint file {source}: {found_size} bytes with CRC-32 "
                f"{found_crc:#010x}, expected {size} bytes with {crc:#010x}"
            )


def canonical_envelope(
    db: Rdict,
    header: dict[str, Any],
    filters: list[Callable[[Any], Any] | None] | None = None,
) -> bytes:
    """The canonical "keyed-state" envelope of a native database (`heap_backend.py`'s
    format, with the content the heap backend writes), each state's values through its
    snapshot filter if it has one."""
    states = [(name, StateKind(kind)) for name, kind in header["states"]]
    names = [name for name, _ in states]
    sections: list[bytes] = []
    index: dict[int, list[int]] = {}
    offset = 0
    current_group = -1
    per_state: list[dict[Any, Any]] = []

    def close_group() -> None:
        nonlocal offset, per_state
        if current_group < 0:
            return
        if filters:
            per_state = [
                filtered(entries, transform)
                for entries, transform in zip(per_state, filters, strict=True)
            ]
        if not any(per_state):
            return
        try:
            section = pickle.dumps(per_state, protocol=5)
        except Exception as error:
            raise ConfigurationError(f"keyed state cannot be pickled: {error}") from error
        index[current_group] = [offset, len(section)]
        sections.append(section)
        offset += len(section)

    try:
        for db_key, value in db.items():
            key_group, state_id = split_prefix(db_key)
            if key_group != current_group:
                close_group()
                current_group = key_group
                per_state = [{} for _ in states]
            kind = states[state_id][1]
            encoded, end = split_key_part(db_key)
            key = decode_key(encoded)
            if kind is StateKind.VALUE:
                per_state[state_id][key] = decode_value(value)
            elif kind is StateKind.LIST:
                per_state[state_id][key] = decode_list(value)
            else:
                per_state[state_id].setdefault(key, {})[decode_key(db_key[end:])] = decode_value(
                    value
                )
    except (IndexError, struct.error, pickle.UnpicklingError, UnicodeDecodeError) as error:
        raise StateRestoreError(
            f"RocksDB state ({', '.join(names)}) is damaged: {error!r}"
        ) from error
    close_group()
    canonical = {
        "version": KEYED_STATE_VERSION,
        "max_parallelism": header["max_parallelism"],
        "key_group_range": list(header["key_group_range"]),
        "states": [[name, kind.value] for name, kind in states],
        "key_groups": index,
    }
    return _envelope.encode(KEYED_STATE, canonical, b"".join(sections))


def native_to_canonical(
    section: bytes | memoryview,
    base: _fs.Location | None,
    settings: EmbeddedRocksDBStateBackend | None = None,
) -> bytes:
    """The canonical "keyed-state" envelope of a keyed section: a native one's files are
    downloaded from the checkpoint folder `base` into a temporary folder and read; a
    canonical one is returned as it is. StateRestoreError for damage."""
    kind, header, _ = parse_section(bytes(section))
    if kind == KEYED_STATE:
        return bytes(section)
    check_keyed_header_version(header)
    settings = settings or EmbeddedRocksDBStateBackend()
    folder = tempfile.mkdtemp(prefix="barrierflow-rocksdb-read-")
    try:
        download(header, base, os.path.join(folder, "db"))
        db = open_read_only(os.path.join(folder, "db"), settings)
        try:
            return canonical_envelope(db, header)
        finally:
            db.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)

"""A thin layer over pyarrow filesystems: the one place barrierflow touches files.

Paths are given as URIs (`file:///data/x`, `s3://bucket/x`, `hdfs://...`) or as
plain local paths. Atomic writes go to a temporary name and are moved into
place, which is atomic on local and HDFS filesystems.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from dataclasses import dataclass

from pyarrow import fs as pafs


@dataclass(frozen=True)
class Location:
    """A filesystem plus a path on it; cheap to pickle and ship to tasks."""

    uri: str

    @property
    def filesystem(self) -> pafs.FileSystem:
        return _resolve(self.uri)[0]

    @property
    def path(self) -> str:
        return _resolve(self.uri)[1]

    def child(self, *names: str) -> Location:
        return Location(self.uri.rstrip("/") + "/" + "/".join(names))

    def __str__(self) -> str:
        return self.uri


def location(uri_or_path: str | os.PathLike[str]) -> Location:
    """Normalise a URI or a local path (relative paths become absolute)."""
    text = os.fspath(uri_or_path)
    if "://" not in text:
        text = "file://" + os.path.abspath(os.path.expanduser(text))
    return Location(text)


def _resolve(uri: str) -> tuple[pafs.FileSystem, str]:
    if uri.startswith("file://"):
        return pafs.LocalFileSystem(), uri[len("file://") :] or "/"
    return pafs.FileSystem.from_uri(uri)


def exists(loc: Location) -> bool:
    return loc.filesystem.get_file_info(loc.path).type != pafs.FileType.NotFound


def is_dir(loc: Location) -> bool:
    return loc.filesystem.get_file_info(loc.path).type == pafs.FileType.Directory


def make_dirs(loc: Location) -> None:
    loc.filesystem.create_dir(loc.path, recursive=True)


def list_dir(loc: Location) -> list[str]:
    """Names (not paths) of the entries directly in `loc`, sorted; empty if it is missing."""
    fs = loc.filesystem
    if fs.get_file_info(loc.path).type != pafs.FileType.Directory:
        return []
    infos = fs.get_file_info(pafs.FileSelector(loc.path, recursive=False))
    return sorted(info.base_name for info in infos)


def read_bytes(loc: Location) -> bytes:
    with loc.filesystem.open_input_stream(loc.path) as stream:
        return stream.read()


def write_bytes(loc: Location, data: bytes) -> None:
    with loc.filesystem.open_output_stream(loc.path) as stream:
        stream.write(data)


def write_atomic(loc: Location, data: bytes) -> None:
    """Write `data` so readers see either nothing or the whole file."""
    parent, name = loc.path.rsplit("/", 1)
    tmp = f"{parent}/.{name}.{uuid.uuid4().hex}.tmp"
    fs = loc.filesystem
    with fs.open_output_stream(tmp) as stream:
        stream.write(data)
    fs.move(tmp, loc.path)


def move(src: Location, dst: Location) -> None:
    src.filesystem.move(src.path, dst.path)


def delete_file(loc: Location) -> None:
    """Delete a file; a missing file is not an error."""
    with contextlib.suppress(FileNotFoundError):
        loc.filesystem.delete_file(loc.path)


def delete_dir(loc: Location) -> None:
    """Delete a folder and everything in it; a missing folder is not an error."""
    with contextlib.suppress(FileNotFoundError):
        loc.filesystem.delete_dir(loc.path)


# ---- used by the file connectors ------------------------------------------------------------


def is_file(loc: Location) -> bool:
    return loc.filesystem.get_file_info(loc.path).type == pafs.FileType.File


def file_size(loc: Location) -> int:
    """Size in bytes of a file; `FileNotFoundError` if it is missing."""
    info = loc.filesystem.get_file_info(loc.path)
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(f"no such file: {loc}")
    return info.size


def list_files_recursive(loc: Location) -> list[str]:
    """Paths, relative to the folder `loc` and `/`-separated, of every regular file under it.

    Sorted. Names starting with `.` or `_` are hidden, as Spark and Hadoop treat them:
    such files are skipped and so is everything under such folders.
    """
    fs = loc.filesystem
    root = loc.path.rstrip("/")
    infos = fs.get_file_info(pafs.FileSelector(root, recursive=True))
    relative = []
    for info in infos:
        if info.type != pafs.FileType.File:
            continue
        rel = info.path[len(root) :].lstrip("/")
        if any(part.startswith((".", "_")) for part in rel.split("/")):
            continue
        relative.append(rel)
    return sorted(relative)


def open_input_file(loc: Location):
    """A seekable reader (`seek`, `read`, `size`) of a file; close it when done."""
    return loc.filesystem.open_input_file(loc.path)


def open_output_stream(loc: Location, buffer_size: int | None = None):
    """A new file for writing (replacing any file of that name), never compressed by its name."""
    return loc.filesystem.open_output_stream(loc.path, compression=None, buffer_size=buffer_size)

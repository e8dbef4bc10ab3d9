"""A thin layer over pyarrow filesystems: the one place barrierflow touches files.

Paths are given as URIs (`file:///data/x`, `s3://bucket/x`, `hdfs://...`) or as
plain local paths. A URI may carry filesystem options as a query string
(`s3://bucket/x?endpoint_override=host:9000&scheme=http`); every path derived from it
keeps them.

Filesystems differ in one way that matters for a commit, and only this module knows it:

- local, HDFS and shared mounts (NFS) rename atomically: a file is written under a
  temporary name and renamed into place;
- object stores (S3 and S3-compatible servers, GCS, Azure) have no rename (a "move" is a
  copy and a delete), but one upload is atomic: an object appears whole or not at all. So
  a commit object is uploaded once under its final name, after everything it refers to,
  and a name is never overwritten by a different commit (checkpoint ids never repeat),
  which also keeps readers of stores without read-after-overwrite consistency correct.

Durability differs too. On local disks and network mounts a closed file may still sit in
the page cache: a power loss can leave a committed file empty. What a checkpoint or a
commit relies on is therefore fsynced, with its folder (`sync_file`, `sync_dir`), before
the commit that names it; `write_atomic` and `commit_file` do it themselves. Object stores
need nothing (an upload is durable once acknowledged). HDFS has no fsync in pyarrow: a
closed HDFS file is on its datanodes (replicated), not necessarily on their disks.

A storage hook (`add_hook`) sees every operation before it runs and may raise: tests
observe the syncs with it, and `BARRIERFLOW_STORAGE_FAULTS` injects transient faults
into any process (`FaultInjector`), for tests and `barrierflow chaos`.
"""

from __future__ import annotations

import contextlib
import errno
import fnmatch
import os
import threading
import uuid
import zlib
from collections.abc import Callable, Iterable
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
        """The location `names` below this one (a query string stays at the end).

        >>> Location("s3://b/chk?scheme=http").child("chk-1", "_metadata").uri
        's3://b/chk/chk-1/_metadata?scheme=http'
        """
        base, query = _split_query(self.uri)
        return Location(base.rstrip("/") + "/" + "/".join(names) + query)

    @property
    def name(self) -> str:
        """The last path component.

        >>> Location("s3://b/chk/chk-1/_metadata?scheme=http").name
        '_metadata'
        """
        return _split_query(self.uri)[0].rstrip("/").rsplit("/", 1)[-1]

    @property
    def parent(self) -> Location:
        """The folder holding this location (a query string stays).

        >>> Location("s3://b/chk/chk-1/?scheme=http").parent.uri
        's3://b/chk?scheme=http'
        >>> Location("file:///data/x").parent.uri
        'file:///data'
        """
        base, query = _split_query(self.uri)
        return Location(base.rstrip("/").rsplit("/", 1)[0] + query)

    def without_trailing_slash(self) -> Location:
        """The same folder spelled without a trailing `/` (a root keeps its `/`).

        >>> Location("s3://b/chk/?scheme=http").without_trailing_slash().uri
        's3://b/chk?scheme=http'
        >>> Location("file:///").without_trailing_slash().uri
        'file:///'
        """
        base, query = _split_query(self.uri)
        stripped = base.rstrip("/")
        return Location((base if stripped.endswith(":") else stripped) + query)

    def holds(self, uri: str) -> bool:
        """Whether the URI `uri` names something below this folder.

        >>> Location("s3://b/chk-7?scheme=http").holds("s3://b/chk-7/1-0-a.state?scheme=http")
        True
        >>> Location("file:///chk-7").holds("file:///chk-70/x")
        False
        """
        base, query = _split_query(self.without_trailing_slash().uri)
        inner, inner_query = _split_query(uri)
        return inner.startswith(base + "/") and inner_query == query

    def __str__(self) -> str:
        return self.uri


def location(uri_or_path: str | os.PathLike[str]) -> Location:
    """Normalise a URI or a local path (relative paths become absolute)."""
    text = os.fspath(uri_or_path)
    if "://" not in text:
        text = "file://" + os.path.abspath(os.path.expanduser(text))
    return Location(text)


def _split_query(uri: str) -> tuple[str, str]:
    """(`uri` without its query string, the query string with its `?` or ""). A local path
    has no query: `?` is an ordinary character in a file name."""
    if uri.startswith("file://") or "?" not in uri:
        return uri, ""
    base, query = uri.split("?", 1)
    return base, "?" + query


def _resolve(uri: str) -> tuple[pafs.FileSystem, str]:
    if uri.startswith("file://"):
        return pafs.LocalFileSystem(), uri[len("file://") :] or "/"
    return pafs.FileSystem.from_uri(uri)


_NO_RENAME = frozenset({"S3FileSystem", "GcsFileSystem", "AzureFileSystem"})
"""pyarrow filesystems without an atomic rename: object stores."""


def supports_atomic_rename(loc: Location) -> bool:
    """Whether a rename on `loc`'s filesystem is atomic (local, HDFS, mounts), as opposed
    to an object store's copy-and-delete.

    >>> supports_atomic_rename(location("/tmp/x"))
    True
    """
    return type(loc.filesystem).__name__ not in _NO_RENAME


def exists(loc: Location) -> bool:
    _before("stat", loc)
    return loc.filesystem.get_file_info(loc.path).type != pafs.FileType.NotFound


def is_dir(loc: Location) -> bool:
    return loc.filesystem.get_file_info(loc.path).type == pafs.FileType.Directory


def make_dirs(loc: Location) -> None:
    loc.filesystem.create_dir(loc.path, recursive=True)


def list_dir(loc: Location) -> list[str]:
    """Names (not paths) of the entries directly in `loc`, sorted; empty if it is missing."""
    _before("list", loc)
    fs = loc.filesystem
    if fs.get_file_info(loc.path).type != pafs.FileType.Directory:
        return []
    infos = fs.get_file_info(pafs.FileSelector(loc.path, recursive=False))
    return sorted(info.base_name for info in infos)


def read_bytes(loc: Location) -> bytes:
    _before("read", loc)
    with loc.filesystem.open_input_stream(loc.path) as stream:
        return stream.read()


def write_bytes(loc: Location, data: bytes) -> None:
    _before("write", loc)
    with loc.filesystem.open_output_stream(loc.path) as stream:
        stream.write(data)


def write_parts(loc: Location, parts: Iterable[bytes]) -> None:
    """`write_bytes` of the concatenation of `parts`, without joining them first."""
    _before("write", loc)
    with loc.filesystem.open_output_stream(loc.path) as stream:
        for part in parts:
            stream.write(part)


def write_atomic(loc: Location, data: bytes) -> None:
    """Write `data` so readers see either nothing or the whole file: the commit of a
    checkpoint, savepoint or history.

    Where renames are atomic, into a hidden temporary name renamed into place; on an
    object store, one upload under the final name (atomic there; no temporary object
    would help, as a "rename" is a copy). Callers write a commit object after everything
    it names, and under a name no earlier commit used. Durable when it returns: the
    temporary file is fsynced before the rename, and the folder after it.
    """
    _before("write", loc)
    fs, path = loc.filesystem, loc.path
    if not supports_atomic_rename(loc):
        with fs.open_output_stream(path) as stream:
            stream.write(data)
        return
    parent, name = path.rsplit("/", 1)
    tmp = f"{parent}/.{name}.{uuid.uuid4().hex}.tmp"
    with fs.open_output_stream(tmp) as stream:
        stream.write(data)
    _sync_path(fs, tmp, directory=False)
    fs.move(tmp, path)
    sync_dir(loc.parent)


def commit_file(staged: Location, final: Location) -> None:
    """Publish the closed file `staged` as `final`, idempotently: a repeated commit (after a
    crash part-way through an earlier one) finds `final` whole and ends like the first.

    Where renames are atomic, a rename. On an object store, a server-side copy (`final`
    appears whole or not at all) and then the deletion of `staged`; a crash between the
    two leaves both, and the repeated commit copies again (same bytes) and deletes.
    Raises FileNotFoundError when `staged` is missing and `final` does not exist either.
    Durable when it returns where renames are atomic: the folder of `final` is fsynced
    (the caller fsynced `staged` when it closed it, `sync_file`).
    """
    _before("commit", final)
    fs = staged.filesystem
    if exists(staged):
        if supports_atomic_rename(staged):
            fs.move(staged.path, final.path)
        else:
            fs.copy_file(staged.path, final.path)
            delete_file(staged)
    elif not exists(final):
        raise FileNotFoundError(f"neither {staged} nor {final} exists")
    sync_dir(final.parent)  # also on a repeat: the crash may have come before this


def delete_file(loc: Location) -> None:
    """Delete a file; a missing file is not an error."""
    _before("delete", loc)
    with contextlib.suppress(FileNotFoundError):
        loc.filesystem.delete_file(loc.path)


def delete_dir(loc: Location) -> None:
    """Delete a folder and everything in it; a missing folder is not an error."""
    _before("delete", loc)
    with contextlib.suppress(FileNotFoundError):
        loc.filesystem.delete_dir(loc.path)


# ---- durability -----------------------------------------------------------------------------


def sync_file(loc: Location) -> None:
    """Make the closed file `loc` durable: its bytes, and its name in its folder (an fsync
    of each), where files can sit in a page cache (local disks, network mounts). Nothing
    on object stores (an upload is durable once acknowledged) or HDFS (no fsync in
    pyarrow). Raises OSError."""
    if isinstance(loc.filesystem, pafs.LocalFileSystem):
        _sync_path(loc.filesystem, loc.path, directory=False)
        sync_dir(loc.parent)


def sync_dir(loc: Location) -> None:
    """Make the entries of the folder `loc` durable (after a file was created or renamed
    into it); as `sync_file`, only where that means something. Raises OSError."""
    _sync_path(loc.filesystem, loc.path, directory=True)


def _sync_path(fs: pafs.FileSystem, path: str, directory: bool) -> None:
    if not isinstance(fs, pafs.LocalFileSystem):
        return
    _before("sync", Location("file://" + path))
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if directory else 0)
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    except OSError as error:  # some mounts (FUSE, CIFS) cannot fsync a folder: nothing to do
        if not directory or error.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


# ---- the storage hook: observing and injecting faults ------------------------------------------

StorageHook = Callable[[str, Location], None]
"""Called before each storage operation with its kind (`read`, `stat`, `list`, `write`,
`delete`, `commit`, `sync`) and location; it may raise an OSError, as the storage would."""

_hooks: list[StorageHook] = []


def add_hook(hook: StorageHook) -> Callable[[], None]:
    """Call `hook` before every storage operation of this process from now on; returns the
    function that removes it."""
    _hooks.append(hook)
    return lambda: _hooks.remove(hook)


def _before(kind: str, loc: Location) -> None:
    for hook in list(_hooks):
        hook(kind, loc)


FAULTS_ENV = "BARRIERFLOW_STORAGE_FAULTS"
"""`kind:pattern:n[:count]`, comma-separated: the n-th operation (1-based, counted in
each process) of `kind` whose URI matches the glob `pattern`, and the `count - 1` (default
0) matching ones after it, raise a transient OSError (EIO). E.g. `read:*/_metadata:1:3`."""


class FaultInjector:
    """Raises a transient OSError at chosen storage operations (`FAULTS_ENV`). Thread-safe.

    >>> inject = FaultInjector.parse("read:*/_metadata:2")
    >>> inject("read", Location("file:///c/chk-1/_metadata"))  # the first: passes
    >>> inject("read", Location("file:///c/chk-1/_metadata"))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    OSError: [Errno 5] injected storage fault: read file:///c/chk-1/_metadata (2nd of ...)
    """

    def __init__(self, rules: list[tuple[str, str, int, int]]) -> None:
        self._rules = rules
        self._seen = [0] * len(rules)
        self._lock = threading.Lock()

    @classmethod
    def parse(cls, spec: str) -> FaultInjector:
        """The rules of `FAULTS_ENV`'s syntax; the pattern may hold colons (URIs)."""
        rules = []
        for item in filter(None, (part.strip() for part in spec.split(","))):
            kind, _, rest = item.partition(":")
            parts = rest.rsplit(":", 2)
            if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
                pattern, nth, count = parts[0], int(parts[1]), int(parts[2])
            elif len(parts) >= 2 and parts[-1].isdigit():
                pattern, nth, count = rest.rsplit(":", 1)[0], int(parts[-1]), 1
            else:
                raise ValueError(f"{FAULTS_ENV}: {item!r} is not kind:pattern:n[:count]")
            rules.append((kind, pattern, nth, count))
        return cls(rules)

    def __call__(self, kind: str, loc: Location) -> None:
        for i, (rule_kind, pattern, nth, count) in enumerate(self._rules):
            if rule_kind != kind or not fnmatch.fnmatchcase(loc.uri, pattern):
                continue
            with self._lock:
                self._seen[i] += 1
                seen = self._seen[i]
            if nth <= seen < nth + count:
                suffix = (
                    "th"
                    if 10 <= seen % 100 < 20
                    else {1: "st", 2: "nd", 3: "rd"}.get(seen % 10, "th")
                )
                raise OSError(
                    errno.EIO,
                    f"injected storage fault: {kind} {loc} ({seen}{suffix} of {pattern})",
                )


if os.environ.get(FAULTS_ENV):
    add_hook(FaultInjector.parse(os.environ[FAULTS_ENV]))


# ---- used by the file connectors ------------------------------------------------------------


def is_file(loc: Location) -> bool:
    return loc.filesystem.get_file_info(loc.path).type == pafs.FileType.File


def file_size(loc: Location) -> int:
    """Size in bytes of a file; `FileNotFoundError` if it is missing."""
    _before("stat", loc)
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


# ---- where a location lives ------------------------------------------------------------------

_NETWORK_FILESYSTEMS = frozenset(
    {"nfs", "nfs4", "cifs", "smb3", "smbfs", "ceph", "glusterfs", "lustre", "gpfs", "beegfs"}
    | {"9p", "afs", "ocfs2", "gfs2", "fuse.sshfs", "fuse.glusterfs", "fuse.cephfs", "fuse.s3fs"}
    | {"fuse.gcsfuse", "fuse.juicefs", "fuse.mountpoint-s3", "fuse.alluxio-fuse"}
)
"""Mount types whose files other hosts see too (`/proc/mounts`)."""


def is_local(loc: Location) -> bool:
    """Whether `loc` is a path of this host's own filesystem (`file://`), which other hosts
    see only if it is a network mount (see `on_network_mount`)."""
    return loc.uri.startswith("file://")


def on_network_mount(loc: Location, mounts: str = "/proc/mounts") -> bool:
    """Whether the local path `loc` lies on a network filesystem (NFS, CIFS, CephFS, ...), as
    the innermost mount holding it says in `mounts`; False where that cannot be read."""
    path = os.path.realpath(loc.path)
    try:
        with open(mounts, encoding="utf-8") as table:
            entries = [line.split() for line in table]
    except OSError:
        return False
    best, best_type = "", ""
    for entry in entries:
        if len(entry) < 3:
            continue
        point = entry[1].replace("\\040", " ")
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) > len(best):
            best, best_type = point, entry[2]
    return best_type in _NETWORK_FILESYSTEMS


def keep_private(loc: Location) -> None:
    """Make the folder `loc` its owner's only (0700) where it is on this host's own disk:
    a job's checkpoint folder holds its state. Not on a network mount (executors running as
    another user write there) nor an object store (no modes)."""
    if is_local(loc) and not on_network_mount(loc):
        os.chmod(loc.path, 0o700)


# ---- copying whole files to and from this host (the on-disk state backend's files) ------------


def upload_file(local_path: str, loc: Location, chunk_size: int = 4 << 20) -> tuple[int, int]:
    """Copy the local file `local_path` to `loc` in chunks (never whole in memory), then make
    it durable (`sync_file`); returns (size, CRC-32 of its bytes). Raises OSError."""
    _before("write", loc)
    size, checksum = 0, 0
    with open(local_path, "rb") as source, open_output_stream(loc) as target:
        while chunk := source.read(chunk_size):
            target.write(chunk)
            size += len(chunk)
            checksum = zlib.crc32(chunk, checksum)
    sync_file(loc)
    return size, checksum


def download_file(loc: Location, local_path: str, chunk_size: int = 4 << 20) -> tuple[int, int]:
    """Copy the file `loc` to the local path `local_path` in chunks; returns (size, CRC-32
    of its bytes). Raises OSError (FileNotFoundError when `loc` is missing)."""
    _before("read", loc)
    size, checksum = 0, 0
    with loc.filesystem.open_input_stream(loc.path) as source, open(local_path, "wb") as target:
        while chunk := source.read(chunk_size):
            target.write(chunk)
            size += len(chunk)
            checksum = zlib.crc32(chunk, checksum)
    return size, checksum

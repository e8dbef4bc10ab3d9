"""FileSink: rows as JSON lines, made visible by two-phase commit once a checkpoint completes.

Layout of the output folder:

    <out>/part-<uid>-<subtask>-<deployment>-<seq>.jsonl      committed files
    <out>/.staging/<uid>/<subtask>/<deployment>/<same name>  in-progress and pending files

The staging folder is hidden (its name starts with `.`), so Spark, Hadoop and this
library's FileSource read only committed files. A file's final name is fixed when it is
opened, so committing it twice is harmless (`_fs.commit_file`), and names carry the
operator uid, the subtask and the deployment, so zombies and reruns never write to the
same name.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import uuid
from dataclasses import dataclass
from typing import Any

from barrierflow import _fs
from barrierflow.connectors.base import Sink, SinkContext, SinkWriter
from barrierflow.errors import SinkError, StateRestoreError

STAGING_FOLDER = ".staging"
"""Where in-progress and pending files live, inside the output folder."""

STATE_VERSION = 1
"""Format version of `FileSinkWriter.snapshot_state()`."""

DEFAULT_BUFFER_SIZE = 256 * 1024
"""Bytes buffered before a write reaches the filesystem."""


class FileSink(Sink):
    """Writes every record as one JSON value per line, exactly once.

    Exactly-once because each subtask's records between two checkpoint barriers go to one
    hidden file, which is published in the output folder only when that checkpoint is
    complete (and, after a failure, when the checkpoint it restores from had it pending).
    Publishing is a rename where renames are atomic (local, HDFS, NFS) and a copy, then a
    delete of the staged file, on object stores (S3): either way a committed file appears
    whole, and a commit repeated after a crash part-way ends like the first. Records must
    be JSON-encodable: tuples and lists become arrays, dicts objects, and `str`, `int`,
    `float`, `bool` and `None` the matching JSON values.

    >>> import pathlib, tempfile
    >>> from barrierflow.connectors.base import SinkContext
    >>> out = pathlib.Path(tempfile.mkdtemp()) / "out"
    >>> sink = FileSink.for_rows(str(out))
    >>> sink.prepare()
    >>> writer = sink.create_writer(SinkContext("sink", 0, 1, 0, "run1-0"))
    >>> writer.restore([])
    >>> writer.write_batch([("apple", 1), {"pear": 2}, "fig"])
    >>> writer.pre_commit(1)
    >>> sorted(p.name for p in out.glob("part-*"))      # pending: nothing visible yet
    []
    >>> writer.commit(1)
    >>> [p.name for p in out.glob("part-*")]
    ['part-sink-0-run1-0-00000000.jsonl']
    >>> print(next(out.glob("part-*")).read_text(), end="")
    ["apple",1]
    {"pear":2}
    "fig"
    """

    def __init__(
        self, path: str | os.PathLike[str], *, buffer_size: int = DEFAULT_BUFFER_SIZE
    ) -> None:
        self.output = _fs.location(Sink.output_location(path))
        self.buffer_size = buffer_size

    @classmethod
    def for_rows(cls, path: str | os.PathLike[str]) -> FileSink:
        """A sink writing each record as one JSON line into the folder `path`."""
        return cls(path)

    def prepare(self) -> None:
        """Create the output folder and prove it is writable, else `SinkError` naming it."""
        probe = self.output.child(STAGING_FOLDER, f".probe-{uuid.uuid4().hex}")
        try:
            _fs.make_dirs(self.output.child(STAGING_FOLDER))
            _fs.write_bytes(probe, b"")
            _fs.delete_file(probe)
        except OSError as error:
            raise SinkError(f"the output folder {self.output} is not writable: {error}") from None

    def storage_locations(self) -> list[str]:
        return [self.output.uri]

    def create_writer(self, context: SinkContext) -> FileSinkWriter:
        return FileSinkWriter(self.output, context, self.buffer_size)

    def committed_output(self) -> list[Any]:
        """Every record of every committed file (staged files are not output yet)."""
        records: list[Any] = []
        try:
            names = [n for n in _fs.list_dir(self.output) if n.startswith("part-")]
            for name in sorted(names):
                text = _fs.read_bytes(self.output.child(name)).decode("utf-8")
                records.extend(json.loads(line) for line in text.splitlines() if line)
        except (OSError, ValueError) as error:
            raise SinkError(f"cannot read the committed output in {self.output}: {error}") from None
        return records


@dataclass(frozen=True)
class PendingFile:
    """A pre-committed transaction: a closed staged file waiting for its checkpoint."""

    checkpoint_id: int
    staged: str
    """Path of the staged file, relative to the output folder."""
    final: str
    """Name of the committed file in the output folder."""

    def to_state(self) -> dict[str, Any]:
        return {"checkpoint_id": self.checkpoint_id, "staged": self.staged, "final": self.final}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> PendingFile:
        return cls(int(state["checkpoint_id"]), str(state["staged"]), str(state["final"]))


@dataclass
class _OpenFile:
    stream: Any
    staged: str
    final: str


class FileSinkWriter(SinkWriter):
    """One subtask's two-phase-commit writer. Mailbox thread only.

    Exactly-once with the checkpoint protocol: the open transaction is one staged file;
    `pre_commit` closes it as pending, `commit` publishes it under its final name. Assumes
    `deployment_id` is unique per deployment, so staged files of other deployments are
    never its own.
    """

    def __init__(
        self, output: _fs.Location, context: SinkContext, buffer_size: int = DEFAULT_BUFFER_SIZE
    ) -> None:
        self._output = output
        self._context = context
        self._buffer_size = buffer_size
        self._uid = _name_part(context.operator_uid)
        self._deployment = _name_part(context.deployment_id)
        self._staging = "/".join(
            (STAGING_FOLDER, self._uid, str(context.subtask_index), self._deployment)
        )
        """This writer's own staging folder, relative to the output folder."""
        self._staging_created = False
        self._sequence = 0
        self._open: _OpenFile | None = None
        self._pending: list[PendingFile] = []
        self._encode = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode

    def write_batch(self, records: list[Any]) -> None:
        if not records:
            return
        data = self._encoded(records)
        if self._open is None:
            self._open = self._open_file()
        try:
            self._open.stream.write(data)
        except OSError as error:
            raise SinkError(f"cannot write {self._here(self._open.staged)}: {error}") from None

    def pre_commit(self, checkpoint_id: int) -> None:
        """Close the open file as pending for `checkpoint_id` (no file for no records)."""
        if self._open is None:
            return
        open_file, self._open = self._open, None
        try:
            open_file.stream.close()
        except OSError as error:
            raise SinkError(f"cannot write {self._here(open_file.staged)}: {error}") from None
        self._pending.append(PendingFile(checkpoint_id, open_file.staged, open_file.final))

    def snapshot_state(self) -> dict[str, Any]:
        return {"version": STATE_VERSION, "pending": [p.to_state() for p in self._pending]}

    def commit(self, checkpoint_id: int) -> None:
        """Make visible every pending file of checkpoints up to `checkpoint_id`.

        1. Publish each such file in the output folder, oldest first (a file whose staged copy
           is gone and whose final name exists was committed before: nothing to do).
        2. Forget them.
        """
        ready = [p for p in self._pending if p.checkpoint_id <= checkpoint_id]
        # Step 1
        for pending in ready:
            self._commit_file(pending)
        # Step 2
        self._pending = [p for p in self._pending if p.checkpoint_id > checkpoint_id]

    def restore(self, states: list[Any]) -> None:
        """Finish what the restored checkpoint started, then clear out older deployments.

        1. Commit every pending file in `states`: they belong to the completed checkpoint
           being restored (idempotent, so a restore may be repeated).
        2. Delete the staging folders of earlier deployments of this operator for this
           subtask index: what is left there was never part of a completed checkpoint
           (in-progress files of failed or zombie attempts). After a change of parallelism a
           subtask also clears the old subtask indexes whose state it received
           (index mod parallelism), never those of other current subtasks.
        """
        # Step 1
        for state in states:
            for pending in _pending_of(state):
                self._commit_file(pending)
        # Step 2
        operator_folder = self._output.child(STAGING_FOLDER, self._uid)
        context = self._context
        try:
            for subtask in _fs.list_dir(operator_folder):
                if not subtask.isdigit() or int(subtask) % context.parallelism != (
                    context.subtask_index
                ):
                    continue
                for deployment in _fs.list_dir(operator_folder.child(subtask)):
                    if deployment != self._deployment:
                        _fs.delete_dir(operator_folder.child(subtask, deployment))
        except OSError as error:
            raise SinkError(f"cannot clean up {operator_folder}: {error}") from None

    def abort(self) -> None:
        """Close and delete the open file; pending files stay for a restore to decide."""
        if self._open is None:
            return
        open_file, self._open = self._open, None
        with contextlib.suppress(OSError):
            open_file.stream.close()
        with contextlib.suppress(OSError):
            _fs.delete_file(self._here(open_file.staged))

    def close(self) -> None:
        """The job ended after its final checkpoint committed: nothing may be left over."""
        leftover = (1 if self._open is not None else 0) + len(self._pending)
        self.abort()
        if leftover:
            raise SinkError(
                f"{leftover} file(s) of subtask {self._context.subtask_index} of "
                f"'{self._context.operator_uid}' were never committed: the job ended "
                "without a completed checkpoint covering them"
            )

    # ---- internals -----------------------------------------------------------------------------

    def _here(self, relative: str) -> _fs.Location:
        return self._output.child(relative)

    def _encoded(self, records: list[Any]) -> bytes:
        encode = self._encode
        try:
            return ("\n".join(map(encode, records)) + "\n").encode("utf-8")
        except (TypeError, ValueError):
            pass  # find the culprit
        for record in records:
            try:
                encode(record).encode("utf-8")
            except (TypeError, ValueError) as error:
                raise SinkError(
                    f"cannot write a record of type {type(record).__name__} as JSON: {error}"
                ) from None
        raise AssertionError("a batch failed to encode but each record encodes")

    def _open_file(self) -> _OpenFile:
        final = (
            f"part-{self._uid}-{self._context.subtask_index}-{self._deployment}"
            f"-{self._sequence:08d}.jsonl"
        )
        staged = f"{self._staging}/{final}"
        self._sequence += 1
        try:
            if not self._staging_created:
                _fs.make_dirs(self._here(self._staging))
                self._staging_created = True
            stream = _fs.open_output_stream(self._here(staged), self._buffer_size)
        except OSError as error:
            raise SinkError(f"cannot create {self._here(staged)}: {error}") from None
        return _OpenFile(stream, staged, final)

    def _commit_file(self, pending: PendingFile) -> None:
        staged, final = self._here(pending.staged), self._here(pending.final)
        try:
            _fs.commit_file(staged, final)
        except FileNotFoundError:
            raise SinkError(
                f"cannot commit {final} for checkpoint {pending.checkpoint_id}: "
                f"its staged file {staged} is missing"
            ) from None
        except OSError as error:
            raise SinkError(f"cannot commit {staged} to {final}: {error}") from None


def _pending_of(state: Any) -> list[PendingFile]:
    if not isinstance(state, dict) or state.get("version") != STATE_VERSION:
        raise StateRestoreError(
            f"unknown FileSink state (expected version {STATE_VERSION}): {state!r:.200}"
        )
    return [PendingFile.from_state(entry) for entry in state["pending"]]


_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def _name_part(text: str) -> str:
    """`text` made safe for a file name; a digest keeps altered or long names distinct."""
    safe = _UNSAFE.sub("_", text)
    if safe == text and len(text) <= 64:
        return text
    return f"{safe[:48]}_{hashlib.sha256(text.encode()).hexdigest()[:10]}"

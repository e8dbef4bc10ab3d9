"""`DataStream.execute_and_collect` (PyFlink's): run the job and read its records back on the
driver, as an iterator usable in a `with` block (or a list, with a `limit`).

Two guarantees, as Flink's collect sink gives them (its checkpointed and uncheckpointed
result buffers):

- With checkpointing on, exactly once, through `CollectSink`, a two-phase-commit sink:
  each subtask writes the records between two checkpoint barriers as one pickled file,
  staged at the barrier and published when that checkpoint completes. So records arrive
  as checkpoints complete, and a failure never shows a record twice.
- With checkpointing off, as they are produced, through `StreamingCollectSink`: each
  batch a subtask's sink receives is published at once as a file, so the first records
  reach the driver while the job runs (an unbounded job can be read too). At least
  once: an attempt restarted after a failure produces its records again, and the
  iterator returns them again.

The folder is a temporary one on local checkpoint storage, else a hidden folder below the
checkpoint storage (which every executor reaches); closing the iterator deletes it.
Closing before the end cancels the job and waits for it to end, so nothing of it runs on.
"""

from __future__ import annotations

import contextlib
import itertools
import pickle
import tempfile
import uuid
from collections import deque
from typing import TYPE_CHECKING, Any

from barrierflow import _fs
from barrierflow.connectors.base import AtOnceSinkWriter, Sink, SinkContext, SinkWriter
from barrierflow.connectors.two_phase_commit import TwoPhaseCommitSink
from barrierflow.errors import JobDefinitionError, JobExecutionError

if TYPE_CHECKING:
    from barrierflow.api.datastream import DataStream
    from barrierflow.api.job_client import JobClient
    from barrierflow.core.typeinfo import TypeInformation

POLL_S = 0.2
"""How long the iterator waits for the job to end between two looks for new records."""


class CollectSink(TwoPhaseCommitSink[str]):
    """One pickled file of records per subtask and checkpoint, published at its completion."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def open(self, context: SinkContext) -> None:
        self._context = context
        self._buffers: dict[str, list[Any]] = {}
        self._count = 0
        root = _fs.location(self.folder)
        self._pending, self._committed = root.child("pending"), root.child("committed")
        _fs.make_dirs(self._pending)
        _fs.make_dirs(self._committed)

    def begin_transaction(self) -> str:
        context = self._context
        self._count += 1
        name = f"{context.subtask_index:05d}-{context.deployment_id}-{context.attempt}"
        name = f"{name}-{self._count}"
        self._buffers[name] = []
        return name

    def write(self, transaction: str, records: list[Any]) -> None:
        self._buffers[transaction].extend(records)

    def pre_commit(self, transaction: str, checkpoint_id: int) -> str:
        """Stage the records (durable, unseen) under a name ordered by checkpoint id."""
        from pyspark import cloudpickle

        records = self._buffers.pop(transaction, [])
        handle = f"{checkpoint_id:012d}-{transaction}"
        if records:
            _fs.write_atomic(self._pending.child(handle), cloudpickle.dumps(records))
        return handle

    def commit(self, transaction: str) -> None:
        staged, final = self._pending.child(transaction), self._committed.child(transaction)
        if _fs.exists(staged) or _fs.exists(final):  # neither: a transaction of no records
            _fs.commit_file(staged, final)

    def abort(self, transaction: str) -> None:
        self._buffers.pop(transaction, None)
        _fs.delete_file(self._pending.child(transaction))

    def survives_fallback(self) -> bool:
        return False  # a commit above a fallback point cannot be taken back from the reader


class StreamingCollectSink(Sink):
    """Without checkpointing: every batch published as a file the moment it is written."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def create_writer(self, context: SinkContext) -> SinkWriter:
        return _StreamingCollectWriter(self.folder, context)


class _StreamingCollectWriter(AtOnceSinkWriter):
    """Publishes each batch as `committed/<subtask>-<deployment>-<attempt>-<n>`: names that
    sort in the order one writer wrote them, and never collide across attempts."""

    def __init__(self, folder: str, context: SinkContext) -> None:
        self._committed = _fs.location(folder).child("committed")
        _fs.make_dirs(self._committed)
        self._prefix = f"{context.subtask_index:05d}-{context.deployment_id}-{context.attempt}"
        self._count = 0

    def write_batch(self, records: list[Any]) -> None:
        if not records:
            return
        from pyspark import cloudpickle

        self._count += 1
        name = f"{self._prefix}-{self._count:012d}"
        _fs.write_atomic(self._committed.child(name), cloudpickle.dumps(list(records)))


class CloseableIterator:
    """The records of a running job, as published (by checkpoint, or batch by batch
    without checkpointing; within a subtask, as produced), FLOAT values as PyFlink's
    bridge returns them; `close()` (or leaving the `with` block) stops the job if it
    still runs."""

    def __init__(
        self,
        client: JobClient,
        folder: str,
        temporary: bool,
        declared_type: TypeInformation | None = None,
    ) -> None:
        self._client = client
        self._declared_type = declared_type
        self._folder = _fs.location(folder)
        self._temporary = temporary
        self._read: set[str] = set()
        self._records: deque[Any] = deque()
        self._ended = False
        self._closed = False

    @property
    def job_client(self) -> JobClient:
        """The job the records come from (barrierflow's own: its status, its log folder)."""
        return self._client

    @property
    def folder(self) -> str:
        """Where the committed records are read from (deleted by `close`)."""
        return str(self._folder)

    def __iter__(self) -> CloseableIterator:
        return self

    def __next__(self) -> Any:
        return self.next()

    def __enter__(self) -> CloseableIterator:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def next(self) -> Any:
        while not self._records:
            if self._closed:
                raise StopIteration("the iterator is closed")
            ended = self._ended
            self._take_new_files()
            if self._records:
                break
            if ended:
                self._finish()
                raise StopIteration("the job ended")
            self._ended = self._client.join(POLL_S)  # one more look once it has ended
        return self._records.popleft()

    def _take_new_files(self) -> None:
        committed = self._folder.child("committed")
        if not _fs.exists(committed):
            return
        for name in sorted(set(_fs.list_dir(committed)) - self._read):
            if name.startswith("."):
                continue
            records = pickle.loads(_fs.read_bytes(committed.child(name)))
            if self._declared_type is not None and self._declared_type.narrows_floats():
                records = [self._declared_type.collected(record) for record in records]
            self._records.extend(records)
            self._read.add(name)

    def _finish(self) -> None:
        """The job ended and every record was read: raise its failure, clean up."""
        try:
            self._client.wait(0)
        finally:
            self.close()

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        try:
            if not self._client.join(0):
                self._client.cancel("execute_and_collect's iterator was closed").result()
                with contextlib.suppress(JobExecutionError):  # the cancel we asked for
                    self._client.wait()
        finally:
            if self._temporary:
                _fs.delete_dir(self._folder)


def execute_and_collect(
    stream: DataStream, job_execution_name: str | None, limit: int | None
) -> CloseableIterator | list[Any]:
    """`stream`'s records: an iterator, or with `limit` the first `limit` as a list (the job
    is stopped then, as PyFlink does)."""
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise JobDefinitionError(f"execute_and_collect's limit must be an int >= 0, got {limit!r}")
    env = stream._env
    storage = _fs.location(env.get_checkpoint_config().get_checkpoint_storage())
    if _fs.is_local(storage):
        folder = tempfile.mkdtemp(prefix="barrierflow-collect-")
    else:
        folder = str(storage.child(f".collect-{uuid.uuid4().hex}"))
    checkpointed = env.get_checkpoint_config().is_checkpointing_enabled()
    sink = CollectSink(folder) if checkpointed else StreamingCollectSink(folder)
    stream.sink_to(sink).name("Collect")
    iterator = CloseableIterator(
        env.execute_async(job_execution_name), folder, True, stream._declared_type
    )
    if limit is None:
        return iterator
    with iterator:
        return list(itertools.islice(iterator, limit))

"""The job's state backend, from `env.set_state_backend` to the keyed operators of a task:
the factory's errors, the path through JobSettings, TaskSettings and OperatorContext, each
operator's own local folder, and that closing or aborting leaves nothing on disk."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from barrierflow import (
    EmbeddedRocksDBStateBackend,
    HashMapStateBackend,
    StreamExecutionEnvironment,
)
from barrierflow._clock import SYSTEM_CLOCK
from barrierflow.api.environment import JobDefined
from barrierflow.api.job_file import command_line_settings
from barrierflow.errors import ConfigurationError
from barrierflow.graph.deployment import build_task_descriptors
from barrierflow.runtime.batch import RecordBatch
from barrierflow.runtime.chain_outputs import CollectingOutput
from barrierflow.runtime.deployment import SubtaskId
from barrierflow.runtime.local_state import local_state_dir, remove_orphaned_state_dirs
from barrierflow.runtime.mailbox_executor import NO_MAILBOX
from barrierflow.runtime.operator_chain import operator_context
from barrierflow.runtime.operators.keyed import KeyedOperator
from barrierflow.state.backends import create_keyed_backend
from barrierflow.state.heap_backend import HeapKeyedStateBackend
from barrierflow.state.key_groups import KeyGroupRange, assign_to_key_group


def test_anything_but_a_state_backend_is_refused_with_the_two_names() -> None:
    env = StreamExecutionEnvironment.get_execution_environment()
    for wrong in ("rocksdb", None, HashMapStateBackend):
        with pytest.raises(ConfigurationError, match=r"HashMapStateBackend\(\) or Embedded"):
            env.set_state_backend(wrong)  # type: ignore[arg-type]
        with pytest.raises(ConfigurationError, match="must be HashMapStateBackend"):
            create_keyed_backend(wrong, KeyGroupRange(0, 127), 128)  # type: ignore[arg-type]
    assert env.get_state_backend() == HashMapStateBackend()


def test_rocksdb_without_rocksdict_is_one_error_naming_the_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "rocksdict", None)  # `import rocksdict` now fails
    monkeypatch.delitem(sys.modules, "barrierflow.state.rocksdb_backend", raising=False)
    install = r"pip install 'barrierflow\[rocksdb\]'"
    with pytest.raises(ConfigurationError, match=f"needs the rocksdict package.*{install}"):
        StreamExecutionEnvironment.get_execution_environment().set_state_backend(
            EmbeddedRocksDBStateBackend()
        )
    with pytest.raises(ConfigurationError, match=install):
        create_keyed_backend(EmbeddedRocksDBStateBackend(), KeyGroupRange(0, 127), 128, tmp_path)


def defined_job(backend) -> tuple:
    """The graph and JobSettings of a keyed word count on `backend`, without running it."""
    env = StreamExecutionEnvironment.get_execution_environment()
    env.set_parallelism(2)
    env.set_state_backend(backend)
    (
        env.from_collection(["a", "b", "a"])
        .map(lambda word: (word, 1))
        .key_by(lambda pair: pair[0])
        .reduce(lambda a, b: (a[0], a[1] + b[1]))
        .uid("count")
        .print()
    )
    defined = []

    def capture(graph, settings) -> None:
        defined.append((graph, settings))

    with command_line_settings(define_only=capture), pytest.raises(JobDefined):
        env.execute("backend-plumbing")
    return defined[0]


def test_the_jobs_backend_reaches_the_keyed_operator_of_every_subtask(tmp_path: Path) -> None:
    backend = EmbeddedRocksDBStateBackend(local_dir=str(tmp_path))
    graph, settings = defined_job(backend)
    assert settings.state_backend == backend
    task_settings = settings.task_settings(
        "job", 4, "run1-4", b"secret", ("127.0.0.1", 1), None, str(tmp_path / "chk"), ()
    )
    assert task_settings.state_backend == backend
    keyed = []
    for subtask, descriptor in build_task_descriptors(graph).items():
        context = operator_context(descriptor, task_settings, SYSTEM_CLOCK, NO_MAILBOX)
        assert context.state_backend == backend
        expected = local_state_dir(backend, "run1-4", subtask)
        assert expected.name.startswith(f"run1-4-{subtask}-pid{os.getpid()}-")
        assert context.local_dir == str(expected)
        for operator in (op.make() for op in descriptor.operators):
            if isinstance(operator, KeyedOperator):
                operator.setup(context, CollectingOutput())
                operator.initialize_state(None)
                operator.open()
                keyed.append(operator)
    assert len(keyed) == 2
    for operator in keyed:
        assert type(operator.backend).__name__ == "RocksDBKeyedStateBackend"
        context = operator.context
        words = [
            w
            for w in ("a", "b", "c", "d", "e")
            if assign_to_key_group(w, context.max_parallelism) in context.key_group_range
        ]
        assert words
        operator.process_batch(RecordBatch([(w, 1) for w in words]))
    folders = {Path(op.context.local_dir) for op in keyed}
    assert len(folders) == 2 and all(any(f.rglob("CURRENT")) for f in folders)
    keyed[0].close()
    keyed[1].abort()
    assert [p for f in folders for p in f.rglob("*") if p.is_file()] == []


def test_the_default_is_the_heap_backend(tmp_path: Path) -> None:
    graph, settings = defined_job(HashMapStateBackend())
    task_settings = settings.task_settings(
        "job", 0, "run1-0", b"secret", ("127.0.0.1", 1), None, str(tmp_path), ()
    )
    descriptor = next(iter(build_task_descriptors(graph).values()))
    context = operator_context(descriptor, task_settings, SYSTEM_CLOCK, NO_MAILBOX)
    backend = create_keyed_backend(
        context.state_backend, context.key_group_range, context.max_parallelism
    )
    assert isinstance(backend, HeapKeyedStateBackend)
    assert StreamExecutionEnvironment.get_execution_environment().get_state_backend() == (
        HashMapStateBackend()
    )


def test_each_attempt_and_subtask_gets_its_own_local_folder(tmp_path: Path) -> None:
    rocksdb = EmbeddedRocksDBStateBackend(local_dir=str(tmp_path))
    folders = {
        local_state_dir(rocksdb, deployment, SubtaskId(vertex, index))
        for deployment in ("run1-0", "run1-1", "run2-0")
        for vertex in (1, 2)
        for index in (0, 1)
    }
    assert len(folders) == 12
    assert all(folder.parent == tmp_path / "barrierflow-state" for folder in folders)
    default = local_state_dir(HashMapStateBackend(), "run1-0", SubtaskId(1, 0))
    assert default.parent.parent == Path(tempfile.gettempdir())


def test_a_chain_removes_the_local_state_that_dead_task_processes_left(tmp_path: Path) -> None:
    exited = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                            capture_output=True, text=True, check=True)  # fmt: skip
    dead_pid = int(exited.stdout)
    backend = EmbeddedRocksDBStateBackend(local_dir=str(tmp_path))
    dead = local_state_dir(backend, "run1-0", SubtaskId(2, 1), pid=dead_pid)
    living = local_state_dir(backend, "run1-1", SubtaskId(2, 1))
    elsewhere = local_state_dir(backend, "run1-0", SubtaskId(2, 0), dead_pid, "other-host")
    other = tmp_path / "barrierflow-state" / "not-a-task-folder"
    for path in (dead / "count-1a2b" / "db", living / "db", elsewhere / "db", other):
        path.mkdir(parents=True)
        (path / "000004.sst").write_bytes(b"state")

    assert remove_orphaned_state_dirs(tmp_path / "barrierflow-state") == [dead.name]
    assert not dead.exists() and living.exists() and elsewhere.exists() and other.exists()
    assert remove_orphaned_state_dirs(tmp_path / "nothing-here") == []

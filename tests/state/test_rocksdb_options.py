"""The on-disk backend's RocksDB options (`state/rocksdb_options.py`): the values derived
from the settings, bad settings named, real databases opened under either compaction style,
and incremental checkpoints after small changes staying small over many checkpoints."""

from __future__ import annotations

import os
import statistics
import time

import pytest
from rocksdict import Rdict

from barrierflow import _fs
from barrierflow.core.state_backends import EmbeddedRocksDBStateBackend
from barrierflow.errors import ConfigurationError
from barrierflow.state import ValueStateDescriptor
from barrierflow.state.backends import create_keyed_backend
from barrierflow.state.key_groups import KeyGroupRange
from barrierflow.state.rocksdb_options import (
    MB,
    UNIVERSAL_SIZE_AMPLIFICATION_PERCENT,
    UNIVERSAL_SORTED_RUNS,
    db_options,
    shared_memory,
    tuning,
)

ALL = KeyGroupRange(0, 127)


def test_incremental_checkpoints_get_universal_compaction_full_ones_level():
    incremental = tuning(EmbeddedRocksDBStateBackend(enable_incremental_checkpointing=True))
    full = tuning(EmbeddedRocksDBStateBackend())
    assert incremental.compaction == "universal"
    assert incremental.level0_compaction_trigger == UNIVERSAL_SORTED_RUNS
    assert incremental.max_size_amplification_percent == UNIVERSAL_SIZE_AMPLIFICATION_PERCENT
    assert full.compaction == "level"
    assert full.level0_compaction_trigger == 4
    for values in (incremental, full):  # a stall (the barrier's flush waits on it) stays far
        assert values.level0_slowdown_trigger >= 3 * values.level0_compaction_trigger
        assert values.level0_stop_trigger > values.level0_slowdown_trigger


def test_memory_follows_the_settings():
    values = tuning(EmbeddedRocksDBStateBackend(block_cache_mb=48, write_buffer_mb=40))
    assert values.block_cache_bytes == 48 * MB
    assert values.write_buffer_manager_bytes == 40 * MB
    assert values.memtable_bytes == 10 * MB  # a quarter of the budget
    assert values.max_memtables * values.memtable_bytes <= values.write_buffer_manager_bytes
    assert tuning(EmbeddedRocksDBStateBackend(write_buffer_mb=4)).memtable_bytes == 2 * MB


def test_one_cache_and_write_buffer_manager_per_process_and_sizes():
    settings = EmbeddedRocksDBStateBackend(block_cache_mb=9, write_buffer_mb=9)
    same = EmbeddedRocksDBStateBackend(
        enable_incremental_checkpointing=True, block_cache_mb=9, write_buffer_mb=9
    )
    assert shared_memory(settings) is shared_memory(same)
    other = shared_memory(EmbeddedRocksDBStateBackend(block_cache_mb=10, write_buffer_mb=9))
    assert other[0] is not shared_memory(settings)[0]


@pytest.mark.parametrize(
    ("field", "value", "named"),
    [
        ("block_cache_mb", 0, "block_cache_mb must be a positive number of MiB, got 0"),
        ("write_buffer_mb", "32", "write_buffer_mb must be a positive number of MiB, got '32'"),
        ("write_buffer_mb", True, "write_buffer_mb must be a positive number of MiB, got True"),
        ("enable_incremental_checkpointing", 1, "enable_incremental_checkpointing must be"),
    ],
)
def test_bad_settings_are_named_where_the_options_are_built(field, value, named):
    """Settings that skipped `__post_init__` (set after construction, or unpickled from
    elsewhere) are checked again by the builder."""
    settings = EmbeddedRocksDBStateBackend()
    object.__setattr__(settings, field, value)
    with pytest.raises(ConfigurationError, match=named):
        tuning(settings)
    with pytest.raises(ConfigurationError, match=named):
        db_options(settings)
    with pytest.raises(ConfigurationError, match=named):
        EmbeddedRocksDBStateBackend(**{field: value})


def test_other_settings_are_refused_with_their_type():
    with pytest.raises(ConfigurationError, match="need EmbeddedRocksDBStateBackend settings"):
        tuning("rocksdb")  # type: ignore[arg-type]


def test_a_database_opens_under_either_style_so_a_job_may_switch(tmp_path):
    """A job restored with incremental checkpointing switched on or off opens files written
    under the other compaction style."""
    full = EmbeddedRocksDBStateBackend(block_cache_mb=8, write_buffer_mb=8)
    incremental = EmbeddedRocksDBStateBackend(
        enable_incremental_checkpointing=True, block_cache_mb=8, write_buffer_mb=8
    )
    for first, second in ((full, incremental), (incremental, full)):
        path = str(tmp_path / f"db-{first.enable_incremental_checkpointing}")
        db = Rdict(path, db_options(first))
        for round_ in range(3):
            for i in range(round_, 20_000, 3):
                db[b"k%06d" % i] = b"v%d" % round_
            db.flush(True)
        db.compact_range(None, None)
        db.close()
        db = Rdict(path, db_options(second))
        db[b"k000001"] = b"new"
        db.flush(True)
        db.compact_range(None, None)
        assert [db[b"k000000"], db[b"k000001"], db[b"k019999"]] == [b"v0", b"new", b"v1"]
        db.close()


# ---- incremental uploads after small changes ------------------------------------------------


def _settled(db: Rdict) -> None:
    """Wait until RocksDB has no compaction pending or running, so each checkpoint's files,
    and the test, do not depend on when a background compaction ends."""
    deadline = time.monotonic() + 60
    while (
        db.property_int_value("rocksdb.compaction-pending")
        or db.property_int_value("rocksdb.num-running-compactions")
        or db.property_int_value("rocksdb.num-running-flushes")
    ):
        assert time.monotonic() < deadline, "RocksDB's compactions did not settle in 60 s"
        time.sleep(0.005)


def _checkpoint(backend, job: str, checkpoint_id: int) -> int:
    """Snapshot, write into the job folder as the uploader does, complete: bytes uploaded."""
    snapshot = backend.snapshot(checkpoint_id)
    folder = os.path.join(job, f"chk-{checkpoint_id}")
    try:
        section = snapshot.write(_fs.location(folder), _fs.location(os.path.join(job, "shared")))
        new = sum(size for _, size, is_new in snapshot.shared_files() if is_new)
    finally:
        snapshot.release()
    own = sum(os.path.getsize(os.path.join(folder, name)) for name in os.listdir(folder))
    backend.notify_checkpoint_complete(checkpoint_id)
    return len(section) + own + new


def test_after_one_percent_changed_uploads_stay_small_over_many_checkpoints(tmp_path):
    """30 checkpoints, each after a different 1 % of 150,000 keys changed: with level
    compaction (the options before) every L0 compaction rewrote the whole next level and
    the uploads averaged 9-13 % of the state with peaks of 70-88 %; universal compaction
    rewrites the large run only when the newer ones reach its size."""
    settings = EmbeddedRocksDBStateBackend(
        enable_incremental_checkpointing=True, block_cache_mb=8, write_buffer_mb=8
    )
    backend = create_keyed_backend(settings, ALL, 128, local_dir=str(tmp_path / "db"))
    try:
        state = backend.get_value_state(ValueStateDescriptor("count"))
        keys = 150_000
        state.put_many([f"key-{i}" for i in range(keys)], [1] * keys)
        backend.snapshot(0).release()  # everything written reaches RocksDB
        backend._db.compact_range(None, None)
        job = str(tmp_path / "job")
        full = _checkpoint(backend, job, 1)
        fractions = []
        for round_ in range(30):
            changed = [f"key-{i}" for i in range(round_, keys, 100)]
            state.put_many(changed, [round_ + 2] * len(changed))
            _settled(backend._db)
            fractions.append(_checkpoint(backend, job, round_ + 2) / full)
        assert statistics.fmean(fractions) < 0.05, fractions
        small = [f for f in fractions if f < 0.05]
        assert len(small) >= 28, fractions  # a merge now and then, never every few
        assert max(fractions) < 0.6, fractions  # no checkpoint re-uploads the whole state
        backend.set_current_key("key-7")
        assert state.value() == 9  # the last round that changed it (7 + 2)
    finally:
        backend.dispose()

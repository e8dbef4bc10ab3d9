"""RocksDB's options for the on-disk backend, built in one place from the job's
`EmbeddedRocksDBStateBackend` settings.

`tuning(settings)` derives every number (pure, tested); `db_options(settings)` applies them
to a rocksdict `Options`, with the task process's shared block cache and write buffer
manager (`shared_memory`). Why each value, in short (measured with `benchmarks/state.py`;
the figures are in docs/state-backends.md):

- Memory: one block cache and one write buffer manager per task process, whatever the number
  of subtasks and operators, so RocksDB holds about `block_cache_mb + write_buffer_mb`.
- Compaction: with incremental checkpoints, **universal** compaction. A checkpoint uploads
  the SST files that are new since the last one; with level compaction and changes spread
  over the key space every L0 -> L1 compaction rewrites (nearly) the whole next level, so
  every few checkpoints re-upload most of the state (1 M keys, 1 % changed a checkpoint:
  9-13 % of the state a checkpoint on average over 40, peaks of 70-106 %). Universal
  compaction merges whole sorted runs, newest first, and rewrites the oldest (largest) run
  only when the others together reach `max_size_amplification_percent` of it: 3.9 % on
  average over 160 checkpoints (3 % over 45), one peak (a full rewrite) about every 130 and
  a merge of the newer runs (20-30 %) about every 15. Without incremental checkpoints every
  checkpoint uploads every file anyway, so level compaction (dynamic level bytes), which
  keeps the files smallest (space amplification ~1.1 against up to 3), stays.
  Universal compaction also spends less of the task's CPU on compaction: records per CPU
  second of the keyed count rose from 11-12 k to 20-25 k at 1 M keys.
  A database written under one style opens under the other (checked), so a job may switch.
- Write stalls off in practice: the barrier's memtable flush waits while RocksDB stalls
  writes (too many L0 files), which made barrier pauses of seconds while universal
  compaction merged; writes skip the WAL and memtables are bounded by the write buffer
  manager, so a stall protects nothing here.
- A small MANIFEST limit (32 KiB): each checkpoint uploads the MANIFEST whole, and it grows
  with every flush and compaction until it reaches the limit (RocksDB's default: 1 GiB).
- Table format: bloom filters, partitioned index and filters charged to the cache (a large
  file's filter as one block of megabytes would not fit one cache shard and be read back for
  every get: 80-140 us a get instead of ~3), LZ4 on every level (an upload is what the
  flush and compactions wrote; uncompressed was 24 MiB against 9 MiB at 1 M keys).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from rocksdict import (
    BlockBasedIndexType,
    BlockBasedOptions,
    Cache,
    DBCompactionStyle,
    DBCompressionType,
    Options,
    UniversalCompactOptions,
    WriteBufferManager,
    WriteOptions,
)

from barrierflow.core.state_backends import EmbeddedRocksDBStateBackend
from barrierflow.errors import ConfigurationError

MB = 1 << 20

MIN_MEMTABLE_MB = 2
"""A memtable's floor: smaller ones flush into many tiny L0 files."""
UNIVERSAL_SORTED_RUNS = 20
"""Sorted runs before universal compaction merges the newest: bounds what a get probes (one
bloom filter per run) while letting a run's worth of checkpoints' flushes pile up first."""
UNIVERSAL_SIZE_AMPLIFICATION_PERCENT = 200
"""The newer runs together may reach this % of the oldest before it is rewritten (RocksDB's
default): the full rewrite comes once per ~130 checkpoints of 1 % changes. Measured at 1 M
keys over 160 checkpoints: 3.9 % of the state uploaded a checkpoint on average (100 %, with
a trigger of 16: 4.5 %). The price: the local disk, a checkpoint's state size and a
restore's download may reach three times the live state just before the rewrite."""
LEVEL0_SLOWDOWN_FILES = 64
LEVEL0_STOP_FILES = 128
"""L0 files that slow / stop writes (RocksDB's defaults: 20 and 36), far above either
compaction trigger: a stall, and the barrier's flush waiting on it, does not happen in
practice."""
MAX_MANIFEST_BYTES = 32 * 1024
"""The MANIFEST (RocksDB's log of file changes) is private to each checkpoint, uploaded whole
every time, and grows by each flush and compaction (RocksDB's default limit is 1 GiB):
past this size RocksDB starts a new one holding only the live files."""
MEMTABLE_BLOOM_RATIO = 0.1
"""A bloom filter over each memtable's whole keys, this fraction of the memtable's size
(allocated in the memtable, so inside `write_buffer_mb`): a get skips a memtable that
lacks its key instead of seeking its skip list, the largest single cost of a get in a
native profile at 1 M cycling keys, where the key read is rarely one written lately.
Measured (`benchmarks/keyed_count.py --floor` style loop, 1 M keys, load 6-15): a
multi-get 8.1 -> 6.9 us a key; the backend's own keyed count loop 30.5 -> 24.2 CPU s
per million records (medians of three, alternating)."""
BACKGROUND_JOBS = 2
"""Flush and compaction threads per database: one of each."""


@dataclass(frozen=True)
class RocksDBTuning:
    """Every number `db_options` sets, derived from the settings (pure: tested as is)."""

    block_cache_bytes: int
    write_buffer_manager_bytes: int
    memtable_bytes: int
    max_memtables: int
    compaction: str
    """"universal" (incremental checkpoints) or "level"."""
    level0_compaction_trigger: int
    level0_slowdown_trigger: int
    level0_stop_trigger: int
    max_size_amplification_percent: int
    max_manifest_bytes: int
    background_jobs: int


def tuning(settings: EmbeddedRocksDBStateBackend) -> RocksDBTuning:
    """The options' values for these settings; ConfigurationError names a bad setting."""
    if not isinstance(settings, EmbeddedRocksDBStateBackend):
        raise ConfigurationError(
            f"RocksDB options need EmbeddedRocksDBStateBackend settings, got {settings!r}"
        )
    settings.check()
    universal = settings.enable_incremental_checkpointing
    # One memtable flushes at a quarter of the process budget: a flush at the barrier writes
    # at most that much, and three fit the budget with one being flushed.
    trigger = UNIVERSAL_SORTED_RUNS if universal else 4
    return RocksDBTuning(
        block_cache_bytes=settings.block_cache_mb * MB,
        write_buffer_manager_bytes=settings.write_buffer_mb * MB,
        memtable_bytes=max(MIN_MEMTABLE_MB * MB, settings.write_buffer_mb * MB // 4),
        max_memtables=3,
        compaction="universal" if universal else "level",
        level0_compaction_trigger=trigger,
        level0_slowdown_trigger=LEVEL0_SLOWDOWN_FILES,
        level0_stop_trigger=LEVEL0_STOP_FILES,
        max_size_amplification_percent=UNIVERSAL_SIZE_AMPLIFICATION_PERCENT,
        max_manifest_bytes=MAX_MANIFEST_BYTES,
        background_jobs=BACKGROUND_JOBS,
    )


# ---- memory: one block cache and one write buffer manager per task process ----------------

_shared_lock = threading.Lock()
_shared: dict[tuple[int, int], tuple[Cache, WriteBufferManager]] = {}


def shared_memory(settings: EmbeddedRocksDBStateBackend) -> tuple[Cache, WriteBufferManager]:
    """The process's block cache and write buffer manager for these sizes, made once.

    Every backend of a task process shares them, so RocksDB's memory in a task process is
    about `block_cache_mb` (data, index and filter blocks: index and filter blocks are
    charged to the cache, not held outside it) plus `write_buffer_mb` (memtables, all
    databases together), whatever the state size and the number of subtasks.
    """
    values = tuning(settings)
    sizes = (values.block_cache_bytes, values.write_buffer_manager_bytes)
    with _shared_lock:
        found = _shared.get(sizes)
        if found is None:
            found = _shared[sizes] = (
                Cache(values.block_cache_bytes),
                WriteBufferManager(values.write_buffer_manager_bytes, False),
            )
        return found


def db_options(settings: EmbeddedRocksDBStateBackend) -> Options:
    """A database's options for these settings (see the module's docstring for why)."""
    values = tuning(settings)
    cache, write_buffers = shared_memory(settings)
    options = Options(raw_mode=True)
    options.create_if_missing(True)
    table = BlockBasedOptions()
    table.set_block_cache(cache)
    table.set_bloom_filter(10, False)
    table.set_cache_index_and_filter_blocks(True)
    table.set_pin_l0_filter_and_index_blocks_in_cache(True)
    table.set_index_type(BlockBasedIndexType.two_level_index_search())
    table.set_partition_filters(True)
    table.set_metadata_block_size(4096)
    table.set_pin_top_level_index_and_filter(True)
    options.set_block_based_table_factory(table)
    options.set_write_buffer_manager(write_buffers)
    options.set_memtable_whole_key_filtering(True)
    options.set_memtable_prefix_bloom_ratio(MEMTABLE_BLOOM_RATIO)
    options.set_write_buffer_size(values.memtable_bytes)
    options.set_max_write_buffer_number(values.max_memtables)
    options.set_compression_type(DBCompressionType.lz4())
    if values.compaction == "universal":
        options.set_compaction_style(DBCompactionStyle.universal())
        universal = UniversalCompactOptions()
        universal.max_size_amplification_percent = values.max_size_amplification_percent
        options.set_universal_compaction_options(universal)
    else:
        options.set_level_compaction_dynamic_level_bytes(True)
    options.set_level_zero_file_num_compaction_trigger(values.level0_compaction_trigger)
    options.set_level_zero_slowdown_writes_trigger(values.level0_slowdown_trigger)
    options.set_level_zero_stop_writes_trigger(values.level0_stop_trigger)
    options.set_max_manifest_file_size(values.max_manifest_bytes)
    options.set_max_background_jobs(values.background_jobs)
    options.set_keep_log_file_num(2)
    options.set_max_log_file_size(4 * MB)
    options.set_skip_stats_update_on_db_open(True)
    return options


def write_options() -> WriteOptions:
    """Writes skip the WAL: a checkpoint flushes the memtable, and a failure restores from
    the last completed checkpoint, never from the local database."""
    write = WriteOptions()
    write.disable_wal = True
    return write

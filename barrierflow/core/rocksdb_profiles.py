"""`PredefinedOptions`, PyFlink's RocksDB option profiles, and what each means here.

barrierflow builds RocksDB's options in one place (`state/rocksdb_options.py`) from the
backend's settings: a memory budget per task process (`block_cache_mb`, `write_buffer_mb`),
and the compaction style from `enable_incremental_checkpointing` (universal with incremental
checkpoints, level without; measured in docs/state-backends.md). A profile translates where
it names one of those settings:

- `SPINNING_DISK_OPTIMIZED_HIGH_MEM`: Flink's 256 MiB block cache and four 64 MiB write
  buffers become `block_cache_mb=256`, `write_buffer_mb=256` (settings the job left at their
  defaults; one it set stays).
- `DEFAULT`, `SPINNING_DISK_OPTIMIZED`, `FLASH_SSD_OPTIMIZED`: their settings are background
  jobs (barrierflow runs one flush and one compaction thread per database), open files
  (unlimited here too) and level compaction (chosen as above): nothing changes.

>>> PredefinedOptions.SPINNING_DISK_OPTIMIZED_HIGH_MEM.memory_settings()
{'block_cache_mb': 256, 'write_buffer_mb': 256}
>>> PredefinedOptions.FLASH_SSD_OPTIMIZED.memory_settings()
{}
"""

from __future__ import annotations

import enum


class PredefinedOptions(enum.Enum):
    """RocksDB profiles (PyFlink's names and values): see the module's docstring."""

    DEFAULT = 0
    SPINNING_DISK_OPTIMIZED = 1
    SPINNING_DISK_OPTIMIZED_HIGH_MEM = 2
    FLASH_SSD_OPTIMIZED = 3

    def memory_settings(self) -> dict[str, int]:
        """The `EmbeddedRocksDBStateBackend` settings this profile sets (MiB)."""
        if self is PredefinedOptions.SPINNING_DISK_OPTIMIZED_HIGH_MEM:
            return {"block_cache_mb": 256, "write_buffer_mb": 4 * 64}
        return {}

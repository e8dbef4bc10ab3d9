"""PyFlink DataStream names barrierflow accepts but ignores, or refuses when the job is built,
with why: data for `barrierflow port` (it lists them for a file) and docs/porting.md's table
(tests/porting/test_porting_table.py keeps the two in step). A name in neither is supported
when barrierflow exports it and missing otherwise."""

from __future__ import annotations

__all__ = ["IGNORED", "REFUSED"]

IGNORED: dict[str, str] = {}
"""Name -> why barrierflow accepts it and it changes nothing here."""

REFUSED: dict[str, str] = {}
"""Name -> the error a user gets when the job is built."""

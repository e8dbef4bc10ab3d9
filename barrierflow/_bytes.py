"""How byte counts are written for people (logs and the command line)."""

from __future__ import annotations

__all__ = ["format_bytes"]


def format_bytes(size: float) -> str:
    """A byte count as people read it, in binary units.

    >>> format_bytes(450), format_bytes(1_258_291), format_bytes(3 * 2**30)
    ('450 B', '1.2 MiB', '3.0 GiB')
    """
    if size < 1024:
        return f"{size:.0f} B"
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        size /= 1024
        if size < 1024 or unit == "TiB":
            break
    return f"{size:.1f} {unit}"

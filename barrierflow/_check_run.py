"""How a job built during one run of `barrierflow chaos` differs from its file as written.

`barrierflow chaos` runs the same job file twice, and each run must write its own output
and checkpoints without the file being edited. While `check_run(root)` is active,
`FileSink` (and any sink that names its location through `Sink.output_location`) writes a
path rebased under `root/outputs/`, a database sink (naming its table through
`Sink.output_table`) writes the run's own table `<table>__<run>`, and the job's checkpoints
go to `root/checkpoints`.
With `full_speed`, generator sources ignore their rate (`source_rate`): a rate only paces
a run so that failures fit in it, and a job whose output depended on its pace could not be
checked by comparing two runs anyway. One run at a time per process.

>>> from pathlib import Path
>>> with check_run(Path("/work/chaos"), full_speed=True):
...     output_location("/data/counts"), checkpoint_storage("/data/chk"), source_rate(100.0)
('/work/chaos/outputs/data/counts', '/work/chaos/checkpoints', None)
>>> output_location("/data/counts"), checkpoint_storage("/data/chk"), source_rate(100.0)
('/data/counts', '/data/chk', 100.0)
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

_root: Path | None = None
"""The active run's folder, None outside a check's run."""
_full_speed = False
_continued = False


@contextlib.contextmanager
def check_run(root: Path, *, full_speed: bool = False, continued: bool = False) -> Iterator[None]:
    """Jobs built inside the block write their outputs and checkpoints into `root` and, with
    `full_speed`, read generator sources without their rate. `continued`: the block goes on
    with a run whose driver was killed (`barrierflow chaos`'s kind driver; see
    `continues_run`)."""
    global _root, _full_speed, _continued
    if _root is not None:
        raise RuntimeError(f"a check's run into {_root} is already active")
    _root, _full_speed, _continued = root, full_speed, continued
    try:
        yield
    finally:
        _root, _full_speed, _continued = None, False, False


def continues_run() -> bool:
    """Whether the active run goes on with one whose driver was killed: what that driver
    committed belongs to the run, so a sink keeps the run's own table (a new run replaces it).

    >>> with check_run(Path("/work/chaos"), continued=True):
    ...     continues_run()
    True
    >>> continues_run()
    False
    """
    return _continued


def source_rate(records_per_second: float | None) -> float | None:
    """A generator source's rate: as given, or None (no limit) in a full-speed run."""
    return None if _full_speed else records_per_second


def output_location(path: str | os.PathLike[str]) -> str:
    """`path`, or its rebased form under the active run's `outputs/` folder.

    A local path keeps its absolute parts (`/data/x` -> `<root>/outputs/data/x`); a URI
    keeps its scheme as the first part (`s3://bucket/x` -> `<root>/outputs/s3/bucket/x`).

    >>> rebased(Path("/r"), "file:///tmp/out"), rebased(Path("/r"), "s3://bucket/x/")
    ('/r/outputs/file/tmp/out', '/r/outputs/s3/bucket/x')
    """
    if _root is None:
        return os.fspath(path)
    return rebased(_root, path)


def output_table(table: str) -> str:
    """`table`, or under the active run the run's own table `<table>__<run folder name>`
    (`counts__reference`, `counts__chaos`), so the runs of a check write different tables of
    the same database. A schema-qualified name keeps its schema.

    >>> with check_run(Path("/work/chaos")):
    ...     output_table("public.counts")
    'public.counts__chaos'
    >>> output_table("public.counts")
    'public.counts'
    """
    if _root is None:
        return table
    return f"{table}__{_root.name}"


def checkpoint_storage(configured: str) -> str:
    """The job's checkpoint storage, or the active run's own `checkpoints/` folder."""
    return configured if _root is None else str(_root / "checkpoints")


def rebased(root: Path, path: str | os.PathLike[str]) -> str:
    text = os.fspath(path)
    scheme, separator, rest = text.partition("://")
    local = Path(os.path.abspath(text)).parts[1:]
    parts = [scheme, *rest.split("/")] if separator else list(local)
    kept = [part for part in parts if part not in ("", ".", "..")]
    return str(root.joinpath("outputs", *kept))

"""Where a job writes: where the job says, or, under `barrierflow chaos`, into one run's folder.

`barrierflow chaos` runs the same job file twice, and each run must write its own output
and checkpoints without the job file being edited. While `redirect_outputs(root)` is
active, `FileSink` (and any sink that names its location through `Sink.output_location`)
writes a path rebased under `root/outputs/`, and the job's checkpoints go to
`root/checkpoints`. One redirection at a time per process: the runs follow each other.

>>> from pathlib import Path
>>> with redirect_outputs(Path("/work/chaos")):
...     output_location("/data/counts"), checkpoint_storage("/data/chk")
('/work/chaos/outputs/data/counts', '/work/chaos/checkpoints')
>>> output_location("/data/counts"), checkpoint_storage("/data/chk")
('/data/counts', '/data/chk')
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

_root: Path | None = None
"""The active run's folder, None when nothing is redirected."""


@contextlib.contextmanager
def redirect_outputs(root: Path) -> Iterator[None]:
    """Redirect outputs and checkpoints of every job built inside the block into `root`."""
    global _root
    if _root is not None:
        raise RuntimeError(f"outputs are already redirected into {_root}")
    _root = root
    try:
        yield
    finally:
        _root = None


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

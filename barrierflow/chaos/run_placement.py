"""How a job built during one run of `barrierflow chaos` differs from its file as written.

`barrierflow chaos` runs the same job file twice, and each run must write its own output
and checkpoints without the file being edited. `check_run(root)` installs a `RunPlacement`
through the connectors' placement hook (connectors/placement.py) while the file builds its
job: `FileSink` (and any sink that names its location through `Sink.output_location`) then
writes a path rebased under `root/outputs/`, a database sink (naming its table through
`Sink.output_table`) writes the run's own table `<table>__<run>`; the check hands the job's
environment `root/checkpoints` as its checkpoint storage itself (check.py).
With `full_speed`, generator sources ignore their rate (`Source.pace`): a rate only paces
a run so that failures fit in it, and a job whose output depended on its pace could not be
checked by comparing two runs anyway. The placement is the building thread's
(connectors/placement.py), so a job built meanwhile on another thread keeps its own; the check
itself runs one at a time per process (it sets the command line's settings and `sys.argv`).

>>> from barrierflow.connectors.base import Sink, Source
>>> with check_run(Path("/work/chaos"), full_speed=True):
...     Sink.output_location("/data/counts"), Source.pace(100.0)
('/work/chaos/outputs/data/counts', None)
>>> Sink.output_location("/data/counts"), Source.pace(100.0)
('/data/counts', 100.0)
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from barrierflow.connectors.placement import placed


@dataclass(frozen=True)
class RunPlacement:
    """One run of a check: its folder `root`, whether it drops the sources' pace, and
    whether it goes on with a run whose driver was killed (the kind driver)."""

    root: Path
    full_speed: bool = False
    continued: bool = False

    def location(self, path: str) -> str:
        """`path` rebased under the run's `outputs/` folder (see `rebased`)."""
        return rebased(self.root, path)

    def table(self, table: str) -> str:
        """The run's own table `<table>__<run folder name>` (`counts__reference`,
        `counts__chaos`), so the runs of a check write different tables of the same database.
        A schema-qualified name keeps its schema.

        >>> RunPlacement(Path("/work/chaos")).table("public.counts")
        'public.counts__chaos'
        """
        return f"{table}__{self.root.name}"

    def pace(self, records_per_second: float | None) -> float | None:
        return None if self.full_speed else records_per_second

    @property
    def keeps_tables(self) -> bool:
        """What a killed driver of the same run committed belongs to the run, so a sink
        keeps the run's own table (a new run replaces it)."""
        return self.continued

    @property
    def checkpoints(self) -> str:
        """The run's own checkpoint storage."""
        return str(self.root / "checkpoints")


@contextlib.contextmanager
def check_run(
    root: Path, *, full_speed: bool = False, continued: bool = False
) -> Iterator[RunPlacement]:
    """Jobs built inside the block write their outputs into `root` and, with `full_speed`,
    read generator sources without their rate. `continued`: the block goes on with a run
    whose driver was killed (`barrierflow chaos`'s kind driver)."""
    run = RunPlacement(root, full_speed, continued)
    with placed(run):
        yield run


def rebased(root: Path, path: str | os.PathLike[str]) -> str:
    """`path` under `root/outputs/`: a local path keeps its absolute parts (`/data/x` ->
    `<root>/outputs/data/x`); a URI keeps its scheme as the first part (`s3://bucket/x` ->
    `<root>/outputs/s3/bucket/x`).

    >>> rebased(Path("/r"), "file:///tmp/out"), rebased(Path("/r"), "s3://bucket/x/")
    ('/r/outputs/file/tmp/out', '/r/outputs/s3/bucket/x')
    """
    text = os.fspath(path)
    scheme, separator, rest = text.partition("://")
    local = Path(os.path.abspath(text)).parts[1:]
    parts = [scheme, *rest.split("/")] if separator else list(local)
    kept = [part for part in parts if part not in ("", ".", "..")]
    return str(root.joinpath("outputs", *kept))

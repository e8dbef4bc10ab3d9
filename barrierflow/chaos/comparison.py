"""The verdict (pure, but for reading the sinks): what each sink committed in the two runs,
compared as multisets, and the lines that report the failures and the verdict."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from barrierflow.api.environment import JobClient
from barrierflow.errors import ChaosError

SHOWN = 5
"""How many lost and duplicated records the report names."""


def hashable(value: Any) -> Any:
    """A record as a value a Counter can hold: lists become tuples, dicts sorted item tuples.

    >>> hashable(["a", [1, 2], {"b": 1}])
    ('a', (1, 2), (('b', 1),))
    """
    if isinstance(value, list | tuple):
        return tuple(hashable(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, hashable(v)) for k, v in value.items()))
    if isinstance(value, set | frozenset):
        return frozenset(hashable(v) for v in value)
    return value


@dataclass(frozen=True)
class SinkComparison:
    """One sink's committed output in the two runs, as multisets."""

    sink: str
    reference_count: int
    chaos_count: int
    lost: Counter = field(default_factory=Counter)
    """Records the failure-free run committed more often (by how many more)."""
    duplicated: Counter = field(default_factory=Counter)
    """Records the chaos run committed more often (by how many more)."""

    @property
    def exactly_once(self) -> bool:
        return not self.lost and not self.duplicated


def compare_outputs(sink: str, reference: Iterable[Any], chaos: Iterable[Any]) -> SinkComparison:
    """Compare two committed outputs as multisets.

    >>> c = compare_outputs("out", [("a", 1), ("b", 1)], [("a", 1), ("a", 1)])
    >>> dict(c.lost), dict(c.duplicated), c.exactly_once
    ({('b', 1): 1}, {('a', 1): 1}, False)
    """
    before = Counter(hashable(r) for r in reference)
    after = Counter(hashable(r) for r in chaos)
    return SinkComparison(
        sink, sum(before.values()), sum(after.values()), before - after, after - before
    )


@dataclass(frozen=True)
class FailureRecord:
    """One injected failure, as the report shows it."""

    number: int
    at_s: float
    """Since the chaos run started."""
    kind: str
    task: str
    attempt: int
    """The attempt it hit."""
    recovery_ms: float | None
    """From the injection to RUNNING under a later attempt (restore: the attempt after the
    one that failed while restoring; driver: from the kill to RUNNING in the new driver);
    None: the job ended first."""

    def describe(self, total: int) -> str:
        """`failure 3/10 at 4.21 s: kill of 'Map' (1/2) in attempt 2, recovered in 1532 ms`"""
        recovered = (
            f"recovered in {self.recovery_ms:.0f} ms"
            if self.recovery_ms is not None
            else "the job ended before it recovered"
        )
        return (
            f"failure {self.number}/{total} at {self.at_s:.2f} s: {self.kind} of {self.task} "
            f"in attempt {self.attempt}, {recovered}"
        )


def verdict_lines(comparisons: Sequence[SinkComparison]) -> list[str]:
    """The report's last lines: a line per sink, examples of what differs, the verdict last.

    >>> for line in verdict_lines([compare_outputs("'out'", [1, 2, 2], [2, 2, 2])]):
    ...     print(line)
    sink 'out': 3 records without failures, 3 with; 1 lost, 1 duplicated
      lost (first 5): 1
      duplicated (first 5): 2 (1 more)
    exactly-once: FAILED (1 records lost, 1 duplicated)
    """
    lines = []
    for c in comparisons:
        lost, duplicated = sum(c.lost.values()), sum(c.duplicated.values())
        lines.append(
            f"sink {c.sink}: {c.reference_count} records without failures, "
            f"{c.chaos_count} with; {lost} lost, {duplicated} duplicated"
        )
        for what, counter in (("lost", c.lost), ("duplicated", c.duplicated)):
            if counter:
                shown = ", ".join(
                    repr(r) + (f" ({n} more)" if what == "duplicated" or n > 1 else "")
                    for r, n in sorted(counter.items(), key=repr)[:SHOWN]
                )
                lines.append(f"  {what} (first {SHOWN}): {shown}")
    lost = sum(sum(c.lost.values()) for c in comparisons)
    duplicated = sum(sum(c.duplicated.values()) for c in comparisons)
    if lost or duplicated:
        lines.append(f"exactly-once: FAILED ({lost} records lost, {duplicated} duplicated)")
    else:
        lines.append("exactly-once: OK")
    return lines


def _sinks(jobs: Sequence[JobClient]) -> dict[str, Any]:
    """Every sink of the run's jobs by a name that is the same in both runs."""
    sinks = {}
    for index, client in enumerate(jobs):
        prefix = f"job {index + 1} " if len(jobs) > 1 else ""
        for vertex in client.job_graph.vertices:
            for op in vertex.operators:
                if op.transformation.sink is not None:
                    sinks[f"{prefix}'{op.name}' (uid {op.uid})"] = op.transformation.sink
    return sinks


def committed_outputs(jobs: Sequence[JobClient]) -> dict[str, list[Any] | None]:
    """What each sink of the run's jobs committed (None: it cannot say), by `_sinks` name."""
    outputs: dict[str, list[Any] | None] = {}
    for name, sink in _sinks(jobs).items():
        committed = sink.committed_output()
        outputs[name] = None if committed is None else list(committed)
    return outputs


def compare_runs(
    before: dict[str, list[Any] | None], after: dict[str, list[Any] | None]
) -> tuple[list[SinkComparison], list[str]]:
    """The comparison of every sink that can say what it committed (`committed_outputs` of
    each run), and the names of those that cannot."""
    if before.keys() != after.keys():
        raise ChaosError(
            f"the two runs built different sinks ({sorted(before)} and {sorted(after)}): "
            "the job file must build the same job every time"
        )
    comparisons, skipped = [], []
    for name, committed in before.items():
        if committed is None:
            skipped.append(name)
            continue
        comparisons.append(compare_outputs(name, committed, after[name] or []))
    if not comparisons:
        raise ChaosError(
            "no sink of the job can say what it committed (FileSink, DeltaSink and "
            "PostgresSink can; a custom sink "
            "implements Sink.committed_output), so there is nothing to compare"
        )
    return comparisons, skipped

"""The plan of a chaos run (pure): which failures, of which kinds, how far apart, and
how a plan with driver failures is cut into one share per driver process."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

from barrierflow.api.environment import FAILURE_KINDS
from barrierflow.errors import ConfigurationError


@dataclass(frozen=True)
class PlannedFailure:
    kind: str
    """One of FAILURE_KINDS."""
    gap_s: float
    """How long after the job became eligible (RUNNING, a checkpoint since the last recovery)."""
    target: int
    """Picks the subtask: `subtasks[target % len(subtasks)]`."""


def plan_failures(
    count: int, kinds: Sequence[str], seed: int, max_gap_s: float
) -> list[PlannedFailure]:
    """`count` failures from `seed`: each kind `count // len(kinds)` or one more times, in a
    random order, each with a random gap in [0, max_gap_s] and a random target.

    >>> from collections import Counter
    >>> plan = plan_failures(4, ["exception", "kill"], seed=7, max_gap_s=0.5)
    >>> sorted(Counter(p.kind for p in plan).items())
    [('exception', 2), ('kill', 2)]
    >>> plan == plan_failures(4, ["exception", "kill"], seed=7, max_gap_s=0.5)
    True
    """
    unknown = [kind for kind in kinds if kind not in FAILURE_KINDS]
    if unknown or not kinds:
        raise ConfigurationError(
            f"unknown failure kinds {unknown or kinds}; the kinds are {', '.join(FAILURE_KINDS)}"
        )
    rng = random.Random(seed)
    order = [kinds[i % len(kinds)] for i in range(count)]
    rng.shuffle(order)
    return [PlannedFailure(kind, rng.uniform(0, max_gap_s), rng.randrange(2**31)) for kind in order]


def driver_shares(plan: Sequence[PlannedFailure]) -> list[list[PlannedFailure]]:
    """The plan cut after each driver failure: one share per driver process.

    >>> kinds = lambda shares: [[p.kind for p in share] for share in shares]
    >>> plan = [PlannedFailure(k, 0.0, 0) for k in ("kill", "driver", "driver", "storage")]
    >>> kinds(driver_shares(plan))
    [['kill', 'driver'], ['driver'], ['storage']]
    >>> kinds(driver_shares(plan[:2]))  # a last driver runs the job to its end
    [['kill', 'driver'], []]
    """
    shares: list[list[PlannedFailure]] = [[]]
    for planned in plan:
        shares[-1].append(planned)
        if planned.kind == "driver":
            shares.append([])
    return shares

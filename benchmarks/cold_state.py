"""What encoding keyed state costs when its objects are scattered through the heap, as a
long-running job leaves them, against the same values made in one go.

    python benchmarks/cold_state.py [--keys 100000] [--updates 1000000] [--sample 3000]

A heap checkpoint marshals (or pickles) state values on the uploader thread; its cost per
byte depends less on the encoder than on where the objects lie. A job builds each key's
value over time (here q19's shape: per key a list of up to ten bid tuples, each with two
strings of its own, updated `--updates` times across `--keys` keys with other allocations
in between), so a key's objects end up far apart and every object the encoder visits is
a cache (and often TLB) miss. The figures: MB/s for marshal (a checkpoint's encoding) and
pickle (a savepoint's) over `--sample` random keys, and over the full state, for the values
as the updates left them ("scattered") and for copies of the same values made one after
the other ("contiguous"), plus the time to merely visit every object of the sample.
"""

from __future__ import annotations

import argparse
import gc
import marshal
import pickle
import platform
import random
import string
import time
from collections.abc import Callable
from typing import Any

TOP = 10


def _text(rng: random.Random, length: int) -> str:
    return "".join(rng.choices(string.ascii_letters, k=length))


def _bid(rng: random.Random) -> tuple:
    return (
        -rng.randrange(10**7),
        1_600_000_000_000 + rng.randrange(10**9),
        rng.randrange(10**6),
        f"channel-{rng.randrange(10_000)}",
        f"https://www.nexmark.com/{_text(rng, 5)}/{_text(rng, 5)}/item.htm?query=1",
        _text(rng, rng.randrange(20, 120)),
    )


def build_state(keys: int, updates: int, seed: int = 1) -> dict[int, list[tuple]]:
    """`updates` bids over `keys` keys in random order, each key keeping `TOP` bids, with
    short-lived garbage in between (as records and batches leave it)."""
    rng = random.Random(seed)
    state: dict[int, list[tuple]] = {}
    garbage: list[str] = []
    for step in range(updates):
        top = state.setdefault(rng.randrange(keys), [])
        top.append(_bid(rng))
        if len(top) > TOP:
            top.pop(rng.randrange(len(top)))
        if step % 3 == 0:
            garbage.append(_text(rng, 50))
            if len(garbage) > 1000:
                garbage = []
    return state


def _fresh(values: list[list[tuple]]) -> list[list[tuple]]:
    """Equal values made anew, one object after the other (a marshal round trip: a deep
    copy would keep the tuples and strings, which cannot change)."""
    return marshal.loads(marshal.dumps(values, 4))


def _rate(encode: Callable[[Any], bytes], value: Any) -> tuple[float, int]:
    """MB/s of `encode(value)` (the best of three) and the encoded size."""
    best, size = float("inf"), 0
    for _ in range(3):
        started = time.perf_counter()
        size = len(encode(value))
        best = min(best, time.perf_counter() - started)
    return size / best / 1e6, size


def _visit(values: list[list[tuple]]) -> float:
    """Seconds to touch every object of `values` (each bid's numbers and strings)."""
    started = time.perf_counter()
    total = 0
    for top in values:
        for bid in top:
            total += bid[0] + len(bid[3]) + len(bid[4]) + len(bid[5])
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=100_000)
    parser.add_argument("--updates", type=int, default=1_000_000)
    parser.add_argument("--sample", type=int, default=3000, help="keys per encoded sample")
    args = parser.parse_args(argv)
    gc.disable()  # a collection in the middle of a timing would be measured with it
    state = build_state(args.keys, args.updates)
    sample_keys = random.Random(2).sample(sorted(state), min(args.sample, len(state)))
    scattered = [state[key] for key in sample_keys]
    contiguous = _fresh(scattered)
    whole_scattered = list(state.values())
    whole_contiguous = _fresh(whole_scattered)
    print(f"{platform.processor() or platform.machine()}, Python {platform.python_version()}")
    print(f"{len(state):,} keys, {args.updates:,} updates; sample of {len(scattered):,} keys")
    print("| values | objects | marshal MB/s | pickle MB/s | marshalled MB | visit ms |")
    print("|---|---|---:|---:|---:|---:|")
    for what, layout, values in (
        ("sample", "scattered", scattered),
        ("sample", "contiguous", contiguous),
        ("whole state", "scattered", whole_scattered),
        ("whole state", "contiguous", whole_contiguous),
    ):
        marshal_rate, size = _rate(lambda v: marshal.dumps(v, 4), values)
        pickle_rate, _ = _rate(lambda v: pickle.dumps(v, 5), values)
        visit_ms = _visit(values) * 1000
        print(
            f"| {what} | {layout} | {marshal_rate:.0f} | {pickle_rate:.0f} "
            f"| {size / 1e6:.1f} | {visit_ms:.1f} |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

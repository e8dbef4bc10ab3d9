"""Deterministic inputs and independent expectations shared by the end-to-end tests."""

from __future__ import annotations

from collections import Counter

WORDS = ["ant", "bee", "cat", "dog", "eel", "fox", "gnu"]


def word_of(index: int) -> str:
    return WORDS[(index * 31 + index // 5) % len(WORDS)]


def running_count_rows(words) -> Counter:
    """A keyed running count emits (word, n) once for every n from 1 to the word's total."""
    totals = Counter(words)
    return Counter((w, n) for w, total in totals.items() for n in range(1, total + 1))

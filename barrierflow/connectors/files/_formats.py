"""How a FileSource turns the lines of a file into records: as text, or as JSON values."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from typing import Any


class MalformedLine(Exception):
    """Line `index` of the batch given to `LineFormat.parse` is not valid in this format."""

    def __init__(self, index: int, reason: str) -> None:
        super().__init__(reason)
        self.index = index
        self.reason = reason


class LineFormat(ABC):
    """Parses decoded lines (newline and a trailing carriage return removed) into records."""

    @abstractmethod
    def parse(self, lines: list[str]) -> list[Any]:
        """The records of `lines`, in order; raises `MalformedLine` at the first bad line."""

    def parse_all(self, lines: list[str]) -> tuple[list[Any], list[tuple[int, str]]]:
        """The records of the good lines, in order, and `(index, reason)` of every bad one
        (for a source that sends bad lines to dead letters instead of failing).

        >>> records, bad = JsonLineFormat().parse_all(["1", "{oops", "", "[2]"])
        >>> records, [index for index, _ in bad]
        ([1, [2]], [1])
        """
        try:
            return self.parse(lines), []
        except MalformedLine:
            pass  # redo line by line: rare, only where a batch holds a bad line
        records: list[Any] = []
        bad: list[tuple[int, str]] = []
        for index, line in enumerate(lines):
            try:
                records.extend(self.parse([line]))
            except MalformedLine as error:
                bad.append((index, error.reason))
        return records, bad


class TextLineFormat(LineFormat):
    """Every line is a record, as a `str`."""

    def parse(self, lines: list[str]) -> list[Any]:
        return lines


class JsonLineFormat(LineFormat):
    """Every line holds one JSON value, which is the record; blank lines are skipped."""

    def parse(self, lines: list[str]) -> list[Any]:
        loads = json.loads
        try:
            return [loads(line) for line in lines]
        except ValueError:
            pass  # a blank or malformed line: redo one by one to skip or name it
        records = []
        for index, line in enumerate(lines):
            if not line or line.isspace():
                continue
            try:
                records.append(loads(line))
            except json.JSONDecodeError as error:
                reason = f"is not valid JSON: {error.msg} at column {error.colno}"
                raise MalformedLine(index, reason) from None
            except ValueError as error:  # for example a number too long to convert
                raise MalformedLine(index, f"is not valid JSON: {error}") from None
        return records

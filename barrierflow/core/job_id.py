"""`JobID`: a job's identifier, 32 hexadecimal digits as Flink's.

A `str` subclass, so the plain string `JobClient.get_job_id()` and
`JobExecutionResult.get_job_id()` return compares equal to it and prints the same: PyFlink's
`str(job_id)` is that text too.

>>> job_id = JobID("5a4f3e2d1c0b5a4f3e2d1c0b5a4f3e2d")
>>> str(job_id), job_id == "5a4f3e2d1c0b5a4f3e2d1c0b5a4f3e2d"
('5a4f3e2d1c0b5a4f3e2d1c0b5a4f3e2d', True)
"""

from __future__ import annotations

import re
import uuid

from barrierflow.errors import ConfigurationError

_HEX32 = re.compile(r"[0-9a-f]{32}")


class JobID(str):
    """A job's id: 32 lowercase hexadecimal digits."""

    def __new__(cls, job_id: str) -> JobID:
        text = job_id.lower() if isinstance(job_id, str) else None
        if text is None or not _HEX32.fullmatch(text):
            raise ConfigurationError(f"a JobID is 32 hexadecimal digits, got {job_id!r}")
        return super().__new__(cls, text)

    @staticmethod
    def generate() -> JobID:
        """A new random id (how barrierflow names each job it runs)."""
        return JobID(uuid.uuid4().hex)

    @staticmethod
    def from_hex_string(hex_string: str) -> JobID:
        return JobID(hex_string)

    def to_hex_string(self) -> str:
        return str.__str__(self)

    def __repr__(self) -> str:
        return f"JobID({str.__str__(self)!r})"

"""Credentials taken out of URIs before the REST endpoint serves them.

A storage URI may carry a user and password (`s3a://key:secret@bucket/jobs`) or keys in its
query (`s3://bucket/jobs?access_key=...&secret_key=...`, as pyarrow takes them), and such
URIs reach the served JSON in many places: the configuration, a savepoint's location, a
checkpoint's external path, a failure's message. `redact` walks a JSON body and rewrites
every string, so no route can forget one (issue 21).
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["redact", "redact_text"]

_USERINFO = re.compile(r"(\b[A-Za-z][A-Za-z0-9+.-]*://)[^/\s@?#'\"]+@")
"""`scheme://user[:password]@`: the user info goes."""
_SECRET_PARAMETER = re.compile(
    r"([?&;][A-Za-z0-9_.-]*(?:key|secret|token|password|passwd|pwd|credential|signature|sig)"
    r"[A-Za-z0-9_.-]*=)[^&;\s#'\"]*",
    re.IGNORECASE,
)
"""A query parameter whose name says it is secret: its value goes."""
REDACTED = "***"


def redact_text(text: str) -> str:
    """`text` with the credentials of every URI in it replaced.

    >>> redact_text("restoring from s3a://AKIA:ab%2Fc@bucket/jobs/chk-3")
    'restoring from s3a://***@bucket/jobs/chk-3'
    >>> redact_text("s3://b/j?region=eu&access_key=AK&secret_key=s3c&endpoint_override=x")
    's3://b/j?region=eu&access_key=***&secret_key=***&endpoint_override=x'
    >>> redact_text("/tmp/checkpoints/word-count, user@example.com")
    '/tmp/checkpoints/word-count, user@example.com'
    """
    if "@" not in text and "=" not in text:
        return text
    text = _USERINFO.sub(lambda m: m.group(1) + REDACTED + "@", text)
    return _SECRET_PARAMETER.sub(lambda m: m.group(1) + REDACTED, text)


def redact(value: Any) -> Any:
    """A JSON value with `redact_text` applied to every string in it (keys too).

    >>> redact({"storage": ["s3a://k:s@b/x"], "n": 1})
    {'storage': ['s3a://***@b/x'], 'n': 1}
    """
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {redact(k): redact(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [redact(v) for v in value]
    return value

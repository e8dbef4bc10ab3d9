"""The checkpoint file envelope, under its old path: it lives in `barrierflow._envelope`.

State backends below the checkpoint package write envelopes too, so the envelope is a
leaf module; this name stays for code that still imports it here.
"""

from barrierflow._envelope import FORMAT_VERSION, MAGIC, decode, encode

__all__ = ["FORMAT_VERSION", "MAGIC", "decode", "encode"]

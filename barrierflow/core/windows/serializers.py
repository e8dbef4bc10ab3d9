"""The window serializers a `WindowAssigner` names in `get_window_serializer()` (PyFlink's
`TimeWindowSerializer`, `CountWindowSerializer`, `GlobalWindowSerializer`), implementing
`core/type_serializer.py`'s `TypeSerializer`.

barrierflow's window operator keeps windows as Python objects and checkpoints them with the
rest of its state, so it never calls a serializer; these write the bytes PyFlink's write
(big-endian 64-bit start and end, a count window's id, one zero byte for the global window)
for code that uses them directly.

>>> from io import BytesIO
>>> from barrierflow.core.windows.window import TimeWindow
>>> stream = BytesIO()
>>> TimeWindowSerializer().serialize(TimeWindow(1, 5), stream)
>>> stream.getvalue().hex()
'00000000000000010000000000000005'
>>> TimeWindowSerializer().deserialize(BytesIO(stream.getvalue()))
TimeWindow(start=1, end=5)
"""

from __future__ import annotations

import struct
from io import BytesIO

from barrierflow.core.type_serializer import TypeSerializer
from barrierflow.core.windows.window import CountWindow, GlobalWindow, TimeWindow
from barrierflow.errors import ConfigurationError

__all__ = ["CountWindowSerializer", "GlobalWindowSerializer", "TimeWindowSerializer"]

_TWO_LONGS = struct.Struct(">qq")
_LONG = struct.Struct(">q")


def _read(stream: BytesIO, size: int, what: str) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise ConfigurationError(f"{what} needs {size} bytes, the stream had {len(data)}")
    return data


class TimeWindowSerializer(TypeSerializer[TimeWindow]):
    """A `TimeWindow` as its start and end, two big-endian 64-bit integers (16 bytes)."""

    def serialize(self, element: TimeWindow, stream: BytesIO) -> None:
        stream.write(_TWO_LONGS.pack(element.start, element.end))

    def deserialize(self, stream: BytesIO) -> TimeWindow:
        start, end = _TWO_LONGS.unpack(_read(stream, 16, "a TimeWindow"))
        return TimeWindow(start, end)


class CountWindowSerializer(TypeSerializer[CountWindow]):
    """A `CountWindow` as its id, a big-endian 64-bit integer (8 bytes)."""

    def serialize(self, element: CountWindow, stream: BytesIO) -> None:
        stream.write(_LONG.pack(element.id))

    def deserialize(self, stream: BytesIO) -> CountWindow:
        return CountWindow(_LONG.unpack(_read(stream, 8, "a CountWindow"))[0])


class GlobalWindowSerializer(TypeSerializer[GlobalWindow]):
    """The one `GlobalWindow` as one zero byte, as PyFlink writes it."""

    def serialize(self, element: GlobalWindow, stream: BytesIO) -> None:
        stream.write(b"\x00")

    def deserialize(self, stream: BytesIO) -> GlobalWindow:
        _read(stream, 1, "a GlobalWindow")
        return GlobalWindow.get()

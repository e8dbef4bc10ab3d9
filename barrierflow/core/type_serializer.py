"""`TypeSerializer`, PyFlink's interface of a type's bytes (`serialize` into a stream,
`deserialize` from one); the window serializers that implement it for the window model are in
`core/windows/serializers.py`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from io import BytesIO
from typing import Generic, TypeVar

T = TypeVar("T")


class TypeSerializer(ABC, Generic[T]):
    """Writes an element to a binary stream and reads it back."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, self.__class__) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash(str(self))

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}()"

    @abstractmethod
    def serialize(self, element: T, stream: BytesIO) -> None:
        """Write `element` to `stream`."""

    @abstractmethod
    def deserialize(self, stream: BytesIO) -> T:
        """Read one element from `stream`."""

"""KafkaRecordSerializationSchema: a stream record to a Kafka record (topic, key, value).

PyFlink's builder: `KafkaRecordSerializationSchema.builder().set_topic(t)` (or
`set_topic_selector(f)`), `.set_value_serialization_schema(SimpleStringSchema())` (required),
`.set_key_serialization_schema(...)` (optional; records without a key otherwise), `.build()`.
A schema is an object with `serialize(value) -> bytes` or a function; a `str` result is
encoded as UTF-8.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from barrierflow.connectors.base import Sink
from barrierflow.connectors.kafka._client import to_bytes_function
from barrierflow.errors import ConfigurationError

__all__ = [
    "KafkaRecordSerializationSchema",
    "KafkaRecordSerializationSchemaBuilder",
    "KafkaTopicSelector",
]


class KafkaTopicSelector:
    """Computes a record's target topic (PyFlink's `KafkaTopicSelector`): override `apply`."""

    def apply(self, data: Any) -> str:
        raise NotImplementedError


class KafkaRecordSerializationSchema:
    """Serializes a record to `(topic, key bytes or None, value bytes)`; see the module."""

    def __init__(
        self,
        topic: str | None,
        topic_selector: Callable[[Any], str] | None,
        value: Callable[[Any], Any],
        key: Callable[[Any], Any] | None,
    ) -> None:
        self.topic = topic
        self.topic_selector = topic_selector
        self.value = value
        self.key = key

    @staticmethod
    def builder() -> KafkaRecordSerializationSchemaBuilder:
        return KafkaRecordSerializationSchemaBuilder()

    def serialize(self, element: Any) -> tuple[str, bytes | None, bytes]:
        """(topic, key, value) of `element`; raises what the user's schema raises.

        >>> schema = KafkaRecordSerializationSchema.builder().set_topic("out") \\
        ...     .set_value_serialization_schema(str).build()
        >>> schema.serialize(("a", 1))
        ('out', None, b"('a', 1)")
        """
        topic = self.topic if self.topic_selector is None else self.topic_selector(element)
        key = None if self.key is None else _bytes(self.key(element))
        return topic, key, _bytes(self.value(element))  # type: ignore[return-value]

    def placed(self) -> KafkaRecordSerializationSchema:
        """The same schema writing the topic a chaos run gives it (`Sink.output_table`)."""
        if self.topic is None:
            return self
        return KafkaRecordSerializationSchema(
            Sink.output_table(self.topic), None, self.value, self.key
        )


def _bytes(value: Any) -> bytes | None:
    if value is None or isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    raise TypeError(f"a serialization schema returned {type(value).__name__}, not bytes or str")


class KafkaRecordSerializationSchemaBuilder:
    """Builds a `KafkaRecordSerializationSchema`: a topic and a value schema are required."""

    def __init__(self) -> None:
        self._topic: str | None = None
        self._selector: Callable[[Any], str] | None = None
        self._value: Callable[[Any], Any] | None = None
        self._key: Callable[[Any], Any] | None = None

    def set_topic(self, topic: str) -> KafkaRecordSerializationSchemaBuilder:
        self._topic, self._selector = topic, None
        return self

    def set_topic_selector(
        self, topic_selector: Callable[[Any], str] | KafkaTopicSelector
    ) -> KafkaRecordSerializationSchemaBuilder:
        if isinstance(topic_selector, KafkaTopicSelector):
            topic_selector = topic_selector.apply
        if not callable(topic_selector):
            raise ConfigurationError("topic_selector must be a KafkaTopicSelector or a callable")
        self._selector, self._topic = topic_selector, None
        return self

    def set_key_serialization_schema(
        self, key_serialization_schema: Any
    ) -> KafkaRecordSerializationSchemaBuilder:
        self._key = to_bytes_function(key_serialization_schema, "serialize")
        return self

    def set_value_serialization_schema(
        self, value_serialization_schema: Any
    ) -> KafkaRecordSerializationSchemaBuilder:
        self._value = to_bytes_function(value_serialization_schema, "serialize")
        return self

    def build(self) -> KafkaRecordSerializationSchema:
        if self._topic is None and self._selector is None:
            raise ConfigurationError(
                "KafkaRecordSerializationSchema: set_topic(...) or set_topic_selector(...) is "
                "required"
            )
        if self._value is None:
            raise ConfigurationError(
                "KafkaRecordSerializationSchema: set_value_serialization_schema(...) is required"
            )
        return KafkaRecordSerializationSchema(self._topic, self._selector, self._value, self._key)

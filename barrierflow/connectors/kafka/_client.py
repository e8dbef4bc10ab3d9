"""What the Kafka source and sink share: the lazy client import, client settings, records.

confluent-kafka is imported on first use, so `barrierflow.connectors.kafka` imports
without it; a missing one is a `ConfigurationError` naming the extra. User properties
(SASL, SSL, timeouts) go to librdkafka untouched; only the settings the connector needs for
correctness are set over them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from barrierflow.errors import ConfigurationError

__all__ = [
    "CLIENT_TIMEOUT_S",
    "KafkaRecord",
    "KafkaRecordDeserializationSchema",
    "client_config",
    "import_kafka",
    "new_client",
    "to_bytes_function",
]

CLIENT_TIMEOUT_S = 30.0
"""Bound on one metadata or offsets request (a broker that does not answer fails the call)."""


def import_kafka() -> Any:
    try:
        import confluent_kafka
    except ImportError as error:
        raise ConfigurationError(
            "the Kafka connector needs confluent-kafka: pip install 'barrierflow[kafka]'"
        ) from error
    return confluent_kafka


def client_config(
    bootstrap_servers: str, properties: Mapping[str, Any], overrides: Mapping[str, Any]
) -> dict[str, Any]:
    """librdkafka settings: the user's properties as given (SASL, SSL, ...), the servers,
    then what the connector must control.

    >>> client_config("b:9092", {"security.protocol": "SASL_SSL"}, {"enable.auto.commit": False})
    {'security.protocol': 'SASL_SSL', 'bootstrap.servers': 'b:9092', 'enable.auto.commit': False}
    """
    config = {key: value for key, value in properties.items() if key not in _NOT_FOR_CLIENT}
    config["bootstrap.servers"] = bootstrap_servers
    config.update(overrides)
    return config


def new_client(kind: str, config: Mapping[str, Any], owner: str) -> Any:
    """A confluent-kafka `Producer` or `Consumer` (`kind`) of `config`; settings librdkafka
    refuses (a missing `ssl.ca.location`, an unknown `sasl.mechanism`, a misspelt key) are
    one `ConfigurationError` naming `owner`, raised on the driver before the job runs."""
    kafka = import_kafka()
    try:
        return getattr(kafka, kind)(dict(config))
    except kafka.KafkaException as error:
        reason = error.args[0].str() if error.args and hasattr(error.args[0], "str") else error
        raise ConfigurationError(f"{owner}: librdkafka refuses its settings: {reason}") from None


_NOT_FOR_CLIENT = frozenset({"partition.discovery.interval.ms", "client.id.prefix"})
"""Flink's source options that are not librdkafka settings."""


@dataclass(frozen=True)
class KafkaRecord:
    """A record as read, for a `KafkaRecordDeserializationSchema` that needs more than the
    value (the key, headers, topic, partition, offset or timestamp)."""

    topic: str
    partition: int
    offset: int
    timestamp: int | None
    """The record's timestamp in ms (create or log-append time), None if it has none."""
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()


class KafkaRecordDeserializationSchema:
    """Turns a whole `KafkaRecord` into the value the stream carries (Flink's
    `KafkaRecordDeserializationSchema`): `KafkaRecordDeserializationSchema.of(function)` for a
    function of the record, `.value_only(schema)` for the value alone.

    >>> schema = KafkaRecordDeserializationSchema.of(lambda r: (r.key, r.value))
    >>> schema.deserialize(KafkaRecord("t", 0, 5, None, b"k", b"v"))
    (b'k', b'v')
    """

    def __init__(self, function: Callable[[KafkaRecord], Any], whole_record: bool) -> None:
        self.function = function
        self.whole_record = whole_record
        """False: `function` takes the value's bytes only (a value-only deserializer)."""

    @staticmethod
    def of(function: Callable[[KafkaRecord], Any]) -> KafkaRecordDeserializationSchema:
        if not callable(function):
            raise ConfigurationError(f"a record deserializer must be callable: {function!r}")
        return KafkaRecordDeserializationSchema(function, True)

    @staticmethod
    def value_only(schema: Any) -> KafkaRecordDeserializationSchema:
        """`schema` has `deserialize(bytes)` (SimpleStringSchema, JsonRowDeserializationSchema)
        or is a function of the value's bytes."""
        return KafkaRecordDeserializationSchema(to_bytes_function(schema, "deserialize"), False)

    def deserialize(self, record: KafkaRecord) -> Any:
        if self.whole_record:
            return self.function(record)
        return self.function(record.value)


def to_bytes_function(schema: Any, method: str) -> Callable[[Any], Any]:
    """`schema.<method>` (a PyFlink-style (de)serialization schema), or `schema` itself if it
    is a plain function; anything else is refused when the job is built.

    >>> to_bytes_function(bytes.decode, "deserialize")(b"ok")
    'ok'
    """
    bound = getattr(schema, method, None)
    if callable(bound):
        return bound
    if callable(schema):
        return schema
    raise ConfigurationError(
        f"{schema!r} is no {method} schema: give an object with {method}(...) "
        "(e.g. SimpleStringSchema()) or a function"
    )

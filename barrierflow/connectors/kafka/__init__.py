"""Kafka in and out through confluent-kafka (librdkafka), with PyFlink's names.

`KafkaSource.builder()...build()` reads topics exactly once (each partition a split, its
offset in every checkpoint); `KafkaSink.builder()...build()` writes them with a
`DeliveryGuarantee` (EXACTLY_ONCE: one Kafka transaction per checkpoint and subtask,
committed when the checkpoint completes). confluent-kafka is imported when a source or sink
first talks to Kafka: `pip install 'barrierflow[kafka]'`. See docs/connectors/kafka.md.
"""

from barrierflow.connectors.base import DEAD_LETTERS
from barrierflow.connectors.delivery_guarantee import DeliveryGuarantee
from barrierflow.connectors.kafka._client import KafkaRecord, KafkaRecordDeserializationSchema
from barrierflow.connectors.kafka._legacy import FlinkKafkaConsumer, FlinkKafkaProducer, Semantic
from barrierflow.connectors.kafka._offsets import (
    KafkaOffsetResetStrategy,
    KafkaOffsetsInitializer,
    KafkaTopicPartition,
)
from barrierflow.connectors.kafka._serialization import (
    KafkaRecordSerializationSchema,
    KafkaRecordSerializationSchemaBuilder,
    KafkaTopicSelector,
)
from barrierflow.connectors.kafka._sink import DEFAULT_MARKER_TOPIC, KafkaSink, KafkaSinkBuilder
from barrierflow.connectors.kafka._source import KafkaSource, KafkaSourceBuilder

__all__ = [
    "DEAD_LETTERS",
    "DEFAULT_MARKER_TOPIC",
    "DeliveryGuarantee",
    "FlinkKafkaConsumer",
    "FlinkKafkaProducer",
    "KafkaOffsetResetStrategy",
    "KafkaOffsetsInitializer",
    "KafkaRecord",
    "KafkaRecordDeserializationSchema",
    "KafkaRecordSerializationSchema",
    "KafkaRecordSerializationSchemaBuilder",
    "KafkaSink",
    "KafkaSinkBuilder",
    "KafkaSource",
    "KafkaSourceBuilder",
    "KafkaTopicPartition",
    "KafkaTopicSelector",
    "Semantic",
]

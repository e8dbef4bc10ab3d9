"""Flink's legacy Kafka connector (`FlinkKafkaConsumer`, `FlinkKafkaProducer` and its
`Semantic`): Java source and sink functions, removed from Flink's Kafka connector, which
barrierflow cannot run. Each is refused when constructed, naming `KafkaSource` /
`KafkaSink`, so a ported job stops while it is defined, never mid-run. `Semantic` keeps
its three names for the calls that pass it; they match `DeliveryGuarantee`'s.
"""

from __future__ import annotations

import enum
from typing import Any

from barrierflow.errors import JobDefinitionError

CONSUMER_REFUSED = (
    "FlinkKafkaConsumer is Flink's legacy Java source function, which barrierflow cannot "
    "run: use KafkaSource.builder()...build() with env.from_source"
)
PRODUCER_REFUSED = (
    "FlinkKafkaProducer is Flink's legacy Java sink function, which barrierflow cannot run: "
    "use KafkaSink.builder()...set_delivery_guarantee(DeliveryGuarantee...).build() with sink_to"
)


class Semantic(enum.Enum):
    """FlinkKafkaProducer's guarantee; `KafkaSink` takes the same three as
    `DeliveryGuarantee`."""

    EXACTLY_ONCE = 0
    AT_LEAST_ONCE = 1
    NONE = 2


class FlinkKafkaConsumer:
    """Flink's legacy Kafka source function: refused when constructed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise JobDefinitionError(CONSUMER_REFUSED)


class FlinkKafkaProducer:
    """Flink's legacy Kafka sink function: refused when constructed."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise JobDefinitionError(PRODUCER_REFUSED)

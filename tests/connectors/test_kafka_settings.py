"""librdkafka settings reach the client as given (SASL, SSL, ...), and settings it refuses
are one line naming the connector, on the driver before the job runs (issue 25).

Against librdkafka's mock cluster, no Spark. A real SASL or TLS handshake cannot run here
(the mock cluster speaks plaintext only), so what is shown is that librdkafka itself reads
the properties: it refuses a bad one when the client is created.
"""

from __future__ import annotations

import pytest
from support.kafka_cluster import string_sink_builder

from barrierflow.connectors import DeliveryGuarantee
from barrierflow.connectors.kafka import (
    KafkaSource,
)
from barrierflow.errors import ConfigurationError
from barrierflow.serialization import SimpleStringSchema

pytest.importorskip("confluent_kafka")

REFUSED = [
    (
        {"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"},
        "ssl.ca.location failed",
    ),
    ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "NOPE"}, "SASL mechanism: NOPE"),
    ({"security.protocol": "SASL_SSLL"}, "security.protocol"),
    ({"no.such.setting": "1"}, "No such configuration property"),
]


def source_of(cluster, properties):
    builder = KafkaSource.builder().set_bootstrap_servers(cluster.bootstrap_servers)
    builder = builder.set_topics("t").set_value_only_deserializer(SimpleStringSchema())
    for key, value in properties.items():
        builder = builder.set_property(key, value)
    return builder.build()


def sink_of(cluster, properties, guarantee=DeliveryGuarantee.AT_LEAST_ONCE):
    builder = string_sink_builder(cluster.bootstrap_servers, "t", "settings-tx", guarantee)
    for key, value in properties.items():
        builder = builder.set_property(key, value)
    return builder.build()


@pytest.mark.parametrize(("properties", "reason"), REFUSED, ids=["ssl", "sasl", "protocol", "key"])
def test_a_setting_librdkafka_refuses_is_one_line_before_the_job_runs(
    kafka_cluster, properties, reason
):
    with pytest.raises(ConfigurationError, match=f"^KafkaSource: librdkafka refuses.*{reason}"):
        source_of(kafka_cluster, properties).create_splits()
    with pytest.raises(ConfigurationError, match=f"^KafkaSink \\(topic t, .*{reason}"):
        sink_of(kafka_cluster, properties).prepare()


def test_the_users_settings_are_given_to_librdkafka_as_they_are(kafka_cluster):
    sasl = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "u",
        "sasl.password": "p",
        "ssl.endpoint.identification.algorithm": "https",
    }
    consumer = source_of(kafka_cluster, sasl).consumer_config({})
    producer = sink_of(kafka_cluster, sasl, DeliveryGuarantee.EXACTLY_ONCE).producer_config({})
    for config in (consumer, producer):
        assert {k: config[k] for k in sasl} == sasl
        assert config["bootstrap.servers"] == kafka_cluster.bootstrap_servers

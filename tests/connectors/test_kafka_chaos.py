"""KafkaSink in `barrierflow chaos`: each run of a check writes its own topic
(`<topic>__<run>`, made on first use) with its own transactional ids, and
`committed_output` is every value the run's topic holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from barrierflow.chaos.run_placement import check_run
from barrierflow.connectors import DeliveryGuarantee, SinkContext
from barrierflow.connectors.kafka import KafkaRecordSerializationSchema, KafkaSink

pytest.importorskip("confluent_kafka")


def test_each_run_writes_its_own_topic_and_reads_back_what_it_committed(kafka_cluster, tmp_path):
    topic = kafka_cluster.fresh_name("counts")
    markers = kafka_cluster.create_topic(kafka_cluster.fresh_name("markers"), 1)
    outputs = {}
    for run, values in (("reference", ["a", "b"]), ("chaos", ["a", "b", "b"])):
        with check_run(Path(tmp_path / run)):
            serializer = KafkaRecordSerializationSchema.builder().set_topic(topic)
            sink = (
                KafkaSink.builder()
                .set_bootstrap_servers(kafka_cluster.bootstrap_servers)
                .set_record_serializer(serializer.set_value_serialization_schema(str).build())
                .set_delivery_guarantee(DeliveryGuarantee.EXACTLY_ONCE)
                .set_transactional_id_prefix("tx")
                .set_commit_marker_topic(markers)
                .build()
            )
        assert sink.serializer.topic == f"{topic}__{run}"
        assert sink.transactional_id_prefix == f"tx__{run}"
        sink.prepare()  # the run's topic exists now, empty
        assert sink.committed_output() == []
        writer = sink.create_writer(SinkContext("out", 0, 1, 0, "d", "job", None))
        writer.restore([])
        writer.write_batch(values)
        writer.pre_commit(1)
        writer.commit(1)
        writer.close()
        outputs[run] = sorted(sink.committed_output())
    assert outputs == {"reference": ["a", "b"], "chaos": ["a", "b", "b"]}

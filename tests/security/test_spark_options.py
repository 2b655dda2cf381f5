"""The Spark source and sink pass ``kafka.security.protocol``, ``kafka.sasl.*`` and
``kafka.ssl.*`` options to their clients: the executors' writer and range reader reach a
SASL_SSL listener with them (no Spark session needed for that; the options parse as Spark
hands them over, lower-cased keys)."""

from __future__ import annotations

import uuid

import pyarrow as pa
import pytest

from samsa import TopicPartition
from samsa.spark.fetch import RangeReader
from samsa.spark.options import OptionError, SinkOptions, SourceOptions, client_settings
from samsa.spark.produce import BulkProducer
from tests.security.conftest import PASSWORD, Secure

pytestmark = pytest.mark.conformance


def _options(secure: Secure) -> dict[str, str]:
    jaas = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="alice" password="{PASSWORD}";')
    return {"kafka.bootstrap.servers": secure.address("SASL_SSL"),
            "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-256",
            "kafka.sasl.jaas.config": jaas, "kafka.ssl.truststore.location": str(secure.ca)}


def test_sink_and_source_options_reach_a_sasl_ssl_listener(secure: Secure) -> None:
    topic = f"app-spark-{uuid.uuid4().hex[:6]}"  # alice may write and read app-* topics
    sink = SinkOptions.parse({**_options(secure), "topic": topic})
    with BulkProducer(sink.bootstrap, security=client_settings(sink.security)) as producer:
        producer.send_columns(topic, None, pa.array([b"v%d" % i for i in range(5)]),
                              pa.array([0] * 5, pa.int32()), None)
        producer.flush()
    source = SourceOptions.parse({**_options(secure), "subscribe": topic}, batch=True)
    with RangeReader(source.bootstrap, security=client_settings(source.security)) as reader:
        chunks = list(reader.chunks(TopicPartition(topic, 0), 0, 5, fail_on_data_loss=True))
    assert chunks and chunks[-1][2] == 5


def test_bad_security_options_are_refused_on_the_driver(secure: Secure) -> None:
    with pytest.raises(OptionError, match="PEM"):
        SinkOptions.parse({**_options(secure), "kafka.ssl.truststore.type": "JKS"})

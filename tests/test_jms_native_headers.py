"""JMS headers and JMSX properties through bridge/connectors/jms_native/objects.py in a real JVM (JPype) with
ActiveMQ's own JMS client and the session's broker: each header's value, not only its presence.

- JMSDestination: the queue or topic the message was sent to, by kind and name.
- JMSExpiration: model -> Java -> model and Java -> model -> Java keep the instant (within the send's delay).
- JMSCorrelationID as bytes: carried where the provider keeps them, else a finding (ActiveMQ keeps a String).
- JMSRedelivered: a message rolled back once and received again is redelivered in the model.
- JMSXUserID: carried (ActiveMQ's broker keeps a producer's value unless populateJMSXUserID is on).
"""
from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from mappings.jms.model import (
    Destination,
    JavaType,
    JavaValue,
    JmsHeaders,
    JmsMessage,
    TextBody,
    TypedMap,
)
from mappings.report import ConversionReport
from tests.support.activemq import BrokerEndpoints
from tests.support.jmstool import COMPILE_JARS, JAVA_DIR

jpype = pytest.importorskip("jpype", reason="jpype1 not installed (pip install 'mqbridge[jms]')")
pytestmark = pytest.mark.activemq

WAIT_MS = 10_000
SLACK_MS = 5_000   # a send's delay on a loaded 2-core machine: the provider stamps the send time


@pytest.fixture(scope="module")
def connection(activemq: BrokerEndpoints) -> Iterator[Any]:
    from bridge.connectors.jms_native import jvm

    jvm.start(jvm.expand_jars(str(JAVA_DIR / j) for j in COMPILE_JARS))
    conn = jpype.JClass("org.apache.activemq.ActiveMQConnectionFactory")(activemq.openwire_url).createConnection()
    conn.start()
    yield conn
    conn.close()


@pytest.fixture(scope="module")
def session(connection: Any) -> Any:
    return connection.createSession(False, 1)   # AUTO_ACKNOWLEDGE


def _objects() -> Any:
    from bridge.connectors.jms_native import objects  # imports JPype's Java types: after the JVM started
    return objects


def _now_ms() -> int:
    return int(time.time() * 1000)


def _name(kind: str) -> str:
    return f"native.hdr.{kind}.{uuid.uuid4().hex[:8]}"


def _through(session: Any, dest: Any, msg: Any, mode: int = 2, priority: int = 4, ttl: int = 0) -> Any:
    """``msg`` sent to ``dest`` and received back (a consumer made before the send: a topic too)."""
    consumer = session.createConsumer(dest)
    producer = session.createProducer(dest)
    producer.send(msg, mode, priority, ttl)
    got = consumer.receive(WAIT_MS)
    producer.close()
    consumer.close()
    assert got is not None, "the message did not arrive"
    return got


def _model_through(session: Any, model: JmsMessage, now_ms: int | None = None) -> tuple[Any, ConversionReport]:
    """``model`` made a Java message by from_model, sent to a new queue and received: the Java message."""
    report = ConversionReport()
    msg, args = _objects().from_model(session, model, now_ms=_now_ms() if now_ms is None else now_ms, report=report)
    got = _through(session, session.createQueue(_name("m")), msg, args.delivery_mode, args.priority,
                   args.time_to_live)
    return got, report


@pytest.mark.parametrize("kind", ["queue", "topic"])
def test_jms_destination_is_the_queue_or_topic_sent_to(session: Any, kind: str) -> None:
    name = _name(kind)
    dest = session.createQueue(name) if kind == "queue" else session.createTopic(name)
    got = _objects().to_model(_through(session, dest, session.createTextMessage("d")))
    assert got.headers.destination == (Destination.queue(name) if kind == "queue" else Destination.topic(name))


def test_jms_expiration_model_to_java_to_model_keeps_the_instant(session: Any) -> None:
    """JMS sets JMSExpiration at send from the time to live: from_model gives expiration - now as the time to
    live, so the provider's JMSExpiration is the model's, later by the send's delay only."""
    now = _now_ms()
    expiration = now + 3_600_000
    got, report = _model_through(session, JmsMessage(JmsHeaders(expiration=expiration), body=TextBody("e")), now)
    assert report.findings == []
    back = _objects().to_model(got).headers
    assert expiration <= back.expiration <= expiration + SLACK_MS
    assert back.expiration - back.timestamp == 3_600_000   # the time to live: expiration - now_ms


def test_jms_expiration_java_to_model_to_java_keeps_the_instant(session: Any) -> None:
    objects = _objects()
    first = _through(session, session.createQueue(_name("j")), session.createTextMessage("e"), ttl=90_000)
    sent = int(first.getJMSExpiration())
    assert sent == int(first.getJMSTimestamp()) + 90_000   # ActiveMQ: send time + time to live
    model = objects.to_model(first)
    assert model.headers.expiration == sent
    again, report = _model_through(session, model)
    assert [(f.change.value, f.name) for f in report.findings] == [("dropped", "JMSMessageID"),
                                                                    ("dropped", "JMSTimestamp")]
    assert sent <= int(again.getJMSExpiration()) <= sent + SLACK_MS


def test_a_passed_jms_expiration_is_a_finding_not_a_message_that_never_expires(session: Any) -> None:
    report = ConversionReport()
    now = _now_ms()
    _, args = _objects().from_model(session, JmsMessage(JmsHeaders(expiration=now - 1), body=TextBody("x")),
                                    now_ms=now, report=report)
    assert args.time_to_live == 1   # 0 would be "never"
    assert [(f.change.value, f.name) for f in report.findings] == [("coerced", "JMSExpiration")]


@pytest.mark.parametrize("corr", [b"corr-\x01-bytes", "caf\u00e9".encode()])
def test_a_bytes_correlation_id_set_by_a_java_producer_is_carried_to_a_java_consumer(session: Any,
                                                                                     corr: bytes) -> None:
    """setJMSCorrelationIDAsBytes -> the model -> a message from_model made: getJMSCorrelationIDAsBytes gives
    the same bytes (ActiveMQ keeps a correlation id as a String: its UTF-8)."""
    objects = _objects()
    msg = session.createTextMessage("c")
    msg.setJMSCorrelationIDAsBytes(jpype.JArray(jpype.JByte)(corr))
    model = objects.to_model(_through(session, session.createQueue(_name("c")), msg))
    got, report = _model_through(session, model)
    assert not [f for f in report.findings if f.name == "JMSCorrelationID"]
    assert bytes(got.getJMSCorrelationIDAsBytes()) == corr


def test_a_bytes_correlation_id_the_provider_cannot_keep_is_a_finding(session: Any) -> None:
    """The model's byte[] JMSCorrelationID (MQ's CorrelId, MQTT 5 Correlation Data that is not UTF-8): where the
    provider gives back other bytes (ActiveMQ: its String, the bytes decoded as UTF-8), it is coerced, not lost
    silently."""
    corr = b"\x00\xff\xfe\x80mq"
    got, report = _model_through(session, JmsMessage(JmsHeaders(correlation_id=corr), body=TextBody("c")))
    back = bytes(got.getJMSCorrelationIDAsBytes())
    coerced = [f for f in report.findings if f.name == "JMSCorrelationID" and f.change.value == "coerced"]
    assert (back == corr) == (not coerced), (back, report.findings)
    assert coerced   # ActiveMQ 5.17: the loss this reports


def test_a_message_rolled_back_and_received_again_is_redelivered(connection: Any, session: Any) -> None:
    objects = _objects()
    name = _name("r")
    transacted = connection.createSession(True, 0)
    try:
        consumer = transacted.createConsumer(transacted.createQueue(name))
        producer = session.createProducer(session.createQueue(name))
        producer.send(session.createTextMessage("again"))
        first = consumer.receive(WAIT_MS)
        assert first is not None
        assert objects.to_model(first).headers.redelivered is False
        transacted.rollback()
        second = consumer.receive(WAIT_MS)
        assert second is not None
        model = objects.to_model(second)
        transacted.commit()
        producer.close()
    finally:
        transacted.close()
    assert model.body == TextBody("again") and model.headers.redelivered is True
    assert model.properties["JMSXDeliveryCount"] == JavaValue(JavaType.INT, 2)


def test_jmsx_user_id_is_carried_both_ways(session: Any) -> None:
    """ActiveMQ keeps a producer's JMSXUserID (its docs: with populateJMSXUserID the broker sets the authenticated
    user instead; the session's broker leaves it off): the model's reaches a Java consumer, and a Java
    producer's the model."""
    objects = _objects()
    model = JmsMessage(properties=TypedMap([("JMSXUserID", JavaValue(JavaType.STRING, "alice"))], what="property"),
                       body=TextBody("u"))
    got, report = _model_through(session, model)
    assert report.findings == []
    assert str(got.getStringProperty("JMSXUserID")) == "alice"
    assert objects.to_model(got).properties["JMSXUserID"] == JavaValue(JavaType.STRING, "alice")
    java = session.createTextMessage("u")
    java.setStringProperty("JMSXUserID", "bob")
    back = objects.to_model(_through(session, session.createQueue(_name("u")), java))
    assert back.properties["JMSXUserID"] == JavaValue(JavaType.STRING, "bob")


def _bytes_correlation_provider(real: Any, corr: bytes, text: str | None) -> Any:
    """``real`` as a provider that keeps a byte[] JMSCorrelationID as bytes (JMS 1.1 lets it: "non-portable")
    and gives ``text`` as its String form (None: no String form); every other call goes to ``real``."""
    from jpype import JArray, JByte, JClass, JImplements, JOverride

    @JImplements("java.lang.reflect.InvocationHandler")
    class Handler:
        @JOverride
        def invoke(self, proxy: Any, method: Any, args: Any) -> Any:
            name = str(method.getName())
            if name == "getJMSCorrelationIDAsBytes":
                return JArray(JByte)(corr)
            if name == "getJMSCorrelationID":
                return text
            return method.invoke(real, args)

    text_message = JClass("javax.jms.TextMessage")
    return JClass("java.lang.reflect.Proxy").newProxyInstance(
        text_message.class_.getClassLoader(), JArray(JClass("java.lang.Class"))([text_message.class_]), Handler())


def test_a_bytes_correlation_id_without_a_string_form_reaches_the_model_as_bytes(session: Any) -> None:
    """A provider whose getJMSCorrelationID gives nothing for a byte[] id (only getJMSCorrelationIDAsBytes):
    the model has the bytes, and a message from_model made carries them (ActiveMQ: as far as it can)."""
    corr = b"\x01\x02corr"
    objects = _objects()
    provider = _bytes_correlation_provider(session.createTextMessage("p"), corr, None)
    model = objects.to_model(provider)
    assert model.headers.correlation_id == corr
    from bridge.connectors.jms_native.batch_read import batch_read

    reader = batch_read(objects.JMSX)
    assert reader is not None
    assert objects.from_row(provider, reader([provider])[0]) == model   # the source's batch read: the same
    got, report = _model_through(session, model)
    assert report.findings == [] and bytes(got.getJMSCorrelationIDAsBytes()) == corr


def test_a_string_correlation_id_stays_a_string(session: Any) -> None:
    """Where a provider gives both forms (IBM MQ's ``ID:<hex>`` String for a byte[] id), the String is kept: it
    is what a JMS consumer compares, and the JMS -> MQ mapping reads ``ID:`` ids as bytes."""
    model = _objects().to_model(_bytes_correlation_provider(session.createTextMessage("p"), b"\xab\xcd", "ID:abcd"))
    assert model.headers.correlation_id == "ID:abcd"

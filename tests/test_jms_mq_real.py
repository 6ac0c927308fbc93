"""JMS <-> MQ (mappings.conversions.jms_mq) on real messages: the checked-in fixture, captures of real
MQ messages (third-party data kept outside the repository; the tests skip without them) and an MQ message
written by the MQTT -> MQ mapping."""
from __future__ import annotations

from pathlib import Path

from mappings.conversions.jms_mq import (
    mq_bytes_to_jms,
)
from mappings.conversions.mqtt_mq import mqtt_to_mq
from mappings.jms.model import (
    BytesBody,
    DeliveryMode,
    Destination,
    TextBody,
    jint,
    jstring,
)
from mappings.mq import constants as C
from mappings.mq.message import decode_message, encode_message
from mappings.mq.mqmd import encode_mqmd
from mappings.mqtt.publication import MqttPublication
from tests.jms_mq_support import NOW, folder, got, names, to_mq
from tests.mq_fixtures import FIXTURE_DIR
from tests.mq_support import REPO_ROOT, real_message


def test_fixture_jms_text_big_endian():
    j, r = mq_bytes_to_jms((FIXTURE_DIR / "jms_text_big_endian.bin").read_bytes(), now_ms=NOW)
    assert j.body == TextBody("caf\u00e9 & cr\u00e8me")
    h = j.headers
    assert (h.destination, h.delivery_mode, h.timestamp, h.priority) == (
        Destination.queue("DEV.QUEUE.1"), DeliveryMode.PERSISTENT, 1700000000120, 4)
    assert h.message_id == "ID:414d5120514d3120202020202020202065a1b2c3000012ab"
    assert dict(j.properties) == {"JMSXDeliveryCount": jint(1), "JMSXUserID": jstring("app"),
                                  "JMSXAppID": jstring("demo.jar"), "color": jstring("blue"), "count": jint(3),
                                  "JMS_IBM_PutApplType": jint(C.MQAT_JAVA)}
    assert names(r) == ["usr/gone"]     # a null long is no JMS property


def test_real_capture_tnt4j_rfh2():
    data = real_message("tnt4j_RFH2.msg.hex")
    j, r = mq_bytes_to_jms(data, now_ms=NOW)
    assert isinstance(j.body, TextBody) and j.body.text.startswith("<GetIndicativeAssociate")   # CCSID 437
    h = j.headers
    assert h.message_id == "ID:414d51204449494e464f425131202020a10b474f902c3b21"
    assert (h.priority, h.delivery_mode, h.expiration, h.timestamp, h.correlation_id, h.destination) == (
        4, DeliveryMode.NON_PERSISTENT, 0, 0, None, None)
    assert j.properties["Root"] == jstring("ADP") and len(j.properties) == 20   # 18 usr, delivery count, charset
    assert j.properties["JMS_IBM_Character_Set"] == jstring("IBM437")   # the body's CCSID 437, as a Java name
    assert j.properties["RoutingOverrideQueue"] == jstring("ADP.ES.INFO.BB.PAYX")
    assert r.findings == []
    mq, r2 = to_mq(j)                          # back to MQ: every mapped field and the usr folder survive
    assert r2.findings == []
    assert folder(mq, "usr") == folder(decode_message(data), "usr")
    assert mq.headers[0].coded_char_set_id == 437                        # and the body's CCSID with it
    assert (mq.md.msg_id, mq.md.priority, mq.md.persistence) == (decode_message(data).md.msg_id, 4, 0)


def test_real_capture_pymqi_rfh2_with_an_mqmd_in_front():
    rfh_and_body = real_message("pymqi_single_rfh2.dat.hex")
    md = encode_mqmd(got(version=2, encoding=C.MQENC_NORMAL, coded_char_set_id=C.CCSID_UTF8,
                          format=C.MQFMT_RF_HEADER_2, persistence=1, priority=0))
    j, r = mq_bytes_to_jms(md + rfh_and_body, now_ms=NOW)
    assert j.body == TextBody("<testData><testVar>testValue</testVar></testData>")
    assert j.headers.type == "mcd://xmlnsc"                     # a non-JMS Msd gives the URI (IBM MQ JMS mapping)
    assert (j.headers.priority, j.headers.delivery_mode) == (0, DeliveryMode.PERSISTENT)
    assert sorted(names(r)) == ["psc folder", "testFolder folder"]
    mq, _ = to_mq(j)
    assert folder(mq, "mcd") == {"Msd": ("xmlnsc", None)} and mq.body_format == C.MQFMT_STRING


def test_repo_has_no_copy_of_the_real_captures():
    assert not list(Path(REPO_ROOT / "fixtures").rglob("*tnt4j*"))
    assert not list(Path(REPO_ROOT / "tests").rglob("*.hex"))


def test_mqtt_origin_message_is_a_bytes_message_on_its_topic():
    """IBM MQ JMS mapping: an MQTT publication in MQ is a jms-bytes message; mqps/Top gives topic://<Top>."""
    pub = MqttPublication(topic="sensors/hall/temp", payload=b'{"t":21.5}', qos=1, packet_id=7, client_id="thermo-1",
                          retain=True)
    mq, _ = mqtt_to_mq(pub)
    j, r = mq_bytes_to_jms(encode_message(mq), now_ms=NOW)
    assert j.body == BytesBody(b'{"t":21.5}')
    assert j.headers.destination == Destination.topic("sensors/hall/temp")
    assert j.headers.delivery_mode is DeliveryMode.PERSISTENT               # QoS 1 -> MQPER_PERSISTENT
    assert "mqtt folder" in names(r) and "mqps/Ret" in names(r)

"""The sample MQ messages in fixtures/messages/: built here with the codec; `python -m tests.mq_fixtures`
rewrites them, and tests/test_mqmessage.py checks the checked-in files still match."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from mappings.conversions.mqtt_mq import mqtt_to_mq
from mappings.mq import constants as C
from mappings.mq.headers import Mqdlh
from mappings.mq.message import MqMessage, build_message, encode_message, message_as_dict
from mappings.mq.mqmd import Mqmd
from mappings.mq.rfh2 import Rfh1, Rfh2, RfhElement, RfhFolder
from mappings.mqtt.publication import MqttPublication

FIXTURE_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "messages"
MSG_ID = b"AMQ QM1         " + bytes.fromhex("65a1b2c3000012ab")


def samples() -> dict[str, tuple[str, MqMessage]]:
    """name -> (what it shows, message)."""
    out: dict[str, tuple[str, MqMessage]] = {}
    pub = MqttPublication(
        topic="sensors/hall/temp", payload=b'{"t":21.5}', qos=1, packet_id=7, client_id="thermo-1", retain=True
    )
    out["mqtt_qos1_retained"] = (
        "MQTT QoS 1 retained publication as MQXR puts it (MQ Telemetry Tables 1-3)",
        mqtt_to_mq(pub)[0],
    )
    pub0 = MqttPublication(topic="a/b", payload=b"", qos=0, client_id="c0")
    out["mqtt_qos0_empty"] = ("MQTT QoS 0 publication with an empty payload", mqtt_to_mq(pub0)[0])
    md = Mqmd(
        version=2,
        encoding=C.MQENC_NORMAL,
        coded_char_set_id=C.CCSID_UTF8,
        priority=4,
        persistence=C.MQPER_PERSISTENT,
        msg_id=MSG_ID,
        user_identifier="app",
        put_appl_type=C.MQAT_JAVA,
        put_appl_name="demo.jar",
        put_date="20231114",
        put_time="22132012",
    )
    rfh = Rfh2(
        encoding=C.MQENC_NORMAL,
        coded_char_set_id=C.CCSID_UTF8,
        folders=(
            RfhFolder("mcd", (RfhElement("Msd", "jms_text"),)),
            RfhFolder(
                "jms",
                (RfhElement("Dst", "queue:///DEV.QUEUE.1"), RfhElement("Tms", "1700000000120"), RfhElement("Dlv", "2")),
            ),
            RfhFolder(
                "usr", (RfhElement("color", "blue"), RfhElement("count", "3", "i4"), RfhElement("gone", None, "i8"))
            ),
        ),
    )
    out["jms_text_big_endian"] = (
        "IBM MQ classes for JMS style TextMessage: MQMD v2 big-endian, RFH2 mcd/jms/usr, UTF-8 text",
        build_message(
            md,
            (rfh,),
            "caf\u00e9 & cr\u00e8me".encode(),
            body_format=C.MQFMT_STRING,
            body_encoding=C.MQENC_NORMAL,
            body_ccsid=C.CCSID_UTF8,
        ),
    )
    plain = Mqmd(
        version=1,
        coded_char_set_id=C.CCSID_ISO8859_1,
        format=C.MQFMT_STRING,
        priority=0,
        persistence=C.MQPER_PERSISTENT,
        msg_id=MSG_ID,
        reply_to_q="REPLY.Q",
        reply_to_q_mgr="QM1",
    )
    out["mq_plain_string"] = (
        "MQ-origin message without headers: MQMD v1 little-endian + MQSTR body",
        MqMessage(plain, (), b"hello from MQ"),
    )
    rfh1 = Rfh1(pairs=(("OPT_A", "valueA"), ("OPT_B", "two words")))
    rfh2 = Rfh2(name_value_ccsid=C.CCSID_UTF16, folders=(RfhFolder("mqps", (RfhElement("Top", "price/\u20ac"),)),))
    out["rfh1_rfh2_chain"] = (
        "An MQRFH v1 chained to an MQRFH2 with UTF-16 folders, then bytes",
        build_message(Mqmd(coded_char_set_id=C.CCSID_UTF8, persistence=0), (rfh1, rfh2), b"\x00\x01\x02\xff"),
    )
    dlh = Mqdlh(reason=2053, dest_q_name="TARGET.Q", dest_q_mgr_name="QM2", encoding=C.MQENC_NATIVE,
                coded_char_set_id=C.CCSID_UTF8, put_appl_type=C.MQAT_UNIX, put_appl_name="amqrmppa",
                put_date="20240229", put_time="12000000")
    jms_bytes = Rfh2(folders=(RfhFolder("mcd", (RfhElement("Msd", "jms_bytes"),)),))
    out["dead_letter_rfh2"] = ("A dead-lettered JMS BytesMessage: MQDLH (reason 2053 queue full) -> MQRFH2 -> bytes",
                               build_message(Mqmd(version=2, persistence=C.MQPER_PERSISTENT, msg_id=MSG_ID,
                                                  backout_count=1), (dlh, jms_bytes), b"\xca\xfe"))
    return out


def expected_files() -> dict[str, bytes]:
    files: dict[str, bytes] = {}
    for name, (what, msg) in samples().items():
        files[f"{name}.bin"] = encode_message(msg)
        desc = {"description": what, **message_as_dict(msg)}
        files[f"{name}.json"] = (json.dumps(desc, indent=2, ensure_ascii=False) + "\n").encode()
    return files


def main() -> int:
    FIXTURE_DIR.mkdir(parents=True, exist_ok=True)
    for name, data in expected_files().items():
        (FIXTURE_DIR / name).write_bytes(data)
        print(f"wrote {FIXTURE_DIR / name} ({len(data)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

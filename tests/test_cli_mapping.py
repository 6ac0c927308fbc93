"""`mqbridge inspect` and `mqbridge convert`: real command runs on fixtures, outputs and exit codes."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.cli import mapping_mqtt_mq, mapping_table
from bridge.cli.main import main
from bridge.cli.mapping_input import ConvertEntry, ConvertResult
from bridge.cli.mq_dump import as_json, render
from mappings.conversions.mqtt_mq import MqttToMqEncoder
from mappings.errors import MappingError
from mappings.mq.message import decode_message, message_as_dict
from mappings.mqtt.publication import MqttPublication
from mappings.report import ConversionReport
from tests.mq_fixtures import FIXTURE_DIR
from tests.mq_support import REAL_MESSAGES, REPO_ROOT

JMS_TEXT = FIXTURE_DIR / "jms_text_big_endian.bin"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_inspect_readable_dump(capsys):
    code, out, err = run(capsys, "inspect", str(JMS_TEXT))
    assert code == 0 and err == ""
    assert "MQMD at offset 0: version 2, 364 bytes, integers big-endian" in out
    assert "  0020   32  Format           : 'MQHRF2  '" in out
    assert "  0030   48  MsgId            : X'414D5120514D31" in out
    assert "MQRFH2 at offset 364: 252 bytes, integers big-endian" in out
    assert "folder <usr> at offset 520, NameValueLength 92" in out
    assert "count (dt=i4) = '3'" in out and "gone (dt=i8) = <null> (xsi:nil)" in out
    assert "body at offset 616: 14 bytes, Format 'MQSTR   '" in out
    assert "00000268:  636166C3 A9202620 6372C3A8 6D65" in out


def test_inspect_json(capsys):
    code, out, _ = run(capsys, "inspect", "--json", str(JMS_TEXT))
    doc = json.loads(out)
    spans = doc.pop("spans")
    assert doc == message_as_dict(decode_message(JMS_TEXT.read_bytes()))
    assert spans == [
        {"part": "MQMD", "offset": 0, "length": 364},
        {"part": "MQRFH2", "offset": 364, "length": 252},
        {"part": "body", "offset": 616, "length": 14},
    ]


def test_inspect_real_capture_hex_dump(capsys):
    path = REAL_MESSAGES / "tnt4j_RFH2.msg.hex"
    if not path.is_file():
        pytest.skip(f"{path} not present (third-party data, not in the repo)")
    code, out, _ = run(capsys, "inspect", str(path))
    assert code == 0
    assert "note: MQMD Version is 1 but the region is 364 bytes" in out
    assert "folder <usr> at offset" in out and "Root = 'ADP'" in out


def test_inspect_stdin_through_the_real_entry_point():
    proc = subprocess.run(
        [sys.executable, "-m", "bridge", "inspect", "-"],
        input=JMS_TEXT.read_bytes(),
        capture_output=True,
        cwd=REPO_ROOT,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert b"MQRFH2 at offset 364" in proc.stdout


def test_inspect_description_input(capsys, tmp_path):
    desc = tmp_path / "m.yaml"
    desc.write_text(
        "MQMD: {Persistence: 1}\nheaders:\n  - folders:\n      - {name: usr, elements: "
        "[{name: a, value: '1', dt: i4}]}\nbody: {text: hi}\n"
    )
    code, out, _ = run(capsys, "inspect", str(desc))
    assert code == 0 and "a (dt=i4) = '1'" in out and "'hi" in out


def test_inspect_errors(capsys, tmp_path):
    bad = tmp_path / "t.bin"
    bad.write_bytes(JMS_TEXT.read_bytes()[:330])
    code, _, err = run(capsys, "inspect", str(bad))
    assert code == 1 and "MQMD at offset 0: GroupId: truncated" in err
    bad.write_bytes(b"\xffXYZ" * 100)
    code, _, err = run(capsys, "inspect", str(bad))
    assert code == 1 and "MQMD at offset 0: StrucId" in err
    code, _, err = run(capsys, "inspect", str(tmp_path / "missing.bin"))
    assert code == 2 and "cannot read" in err
    rfh = bytearray(JMS_TEXT.read_bytes())
    rfh[364 + 8 : 364 + 12] = (250).to_bytes(4, "big")
    bad.write_bytes(bytes(rfh))
    code, _, err = run(capsys, "inspect", str(bad))
    assert code == 1 and "MQRFH2 at offset 364: StrucLength: 250 is not a multiple of 4" in err


def test_convert_mqtt_to_mq(capsys, tmp_path):
    desc = tmp_path / "pub.json"
    desc.write_text(
        json.dumps(
            {
                "topic": "a/b",
                "payload": "hello",
                "qos": 1,
                "packet_id": 3,
                "client_id": "a-very-long-client-id",
                "retain": True,
            }
        )
    )
    out_file = tmp_path / "out.bin"
    code, out, _ = run(capsys, "convert", "--from", "mqtt", "--to", "mq", str(desc), "--out", str(out_file))
    assert code == 0
    expected, _ = MqttToMqEncoder().encode(
        MqttPublication(
            topic="a/b", payload=b"hello", qos=1, packet_id=3, client_id="a-very-long-client-id", retain=True
        )
    )
    assert out_file.read_bytes() == expected
    assert "truncated MQMD.UserIdentifier" in out
    code, out, _ = run(capsys, "convert", "--from", "mqtt", "--to", "mq", str(desc), "--json")
    doc = json.loads(out)
    assert bytes.fromhex(doc["hex"]) == expected
    assert doc["result"]["headers"][0]["folders"][1]["elements"][1] == {"name": "Ret", "value": "1"}
    assert doc["report"][0]["change"] == "truncated"


def test_convert_mqtt5_properties_to_mq_and_back(capsys, tmp_path):
    """The MQTT 5 properties of a description reach the MQ message (docs/mqtt5-mq.md) and come back."""
    desc = tmp_path / "pub5.json"
    desc.write_text(json.dumps({"topic": "svc/req", "payload": "hi", "qos": 1, "packet_id": 9, "client_id": "r",
                                "response_topic": "svc/replies", "correlation_data_hex": b"req-1".hex(),
                                "user_properties": [["order", "42"]], "message_expiry_interval": 60}))
    out_file = tmp_path / "req.bin"
    code, out, err = run(capsys, "convert", "--from", "mqtt", "--to", "mq", str(desc), "--reply-to-queue", "SVC.REP",
                         "--out", str(out_file), "--json")
    assert code == 0, err
    doc = json.loads(out)
    folders = {f["name"]: f["elements"] for f in doc["result"]["headers"][0]["folders"]}
    assert folders["usr"] == [{"name": "order", "value": "42"}]
    assert {"name": "Rto", "value": "topic://svc/replies"} in folders["jms"]
    assert doc["result"]["MQMD"]["ReplyToQ"].strip() == "SVC.REP" and doc["result"]["MQMD"]["Expiry"] == 600
    assert doc["report"] == []
    code, out, err = run(capsys, "convert", "--from", "mq", "--to", "mqtt", str(out_file), "--json",
                         "--allocate-packet-id", "5")
    assert code == 0, err
    back = json.loads(out)["result"]
    assert back["user_properties"] == [["order", "42"]] and back["response_topic"] == "svc/replies"
    assert back["message_expiry_interval"] == 60 and bytes.fromhex(back["correlation_data_hex"]) == b"req-1"


def test_convert_raw_payload_with_flags(capsys, tmp_path):
    raw = tmp_path / "payload.bin"
    raw.write_bytes(b"\x00\x01binary")
    code, out, _ = run(
        capsys,
        "convert",
        "--from",
        "mqtt",
        "--to",
        "mq",
        "--raw",
        "--topic",
        "t",
        "--client-id",
        "c",
        "--qos",
        "2",
        "--encoding",
        "273",
        str(raw),
    )
    assert code == 0 and out.startswith("468 bytes:")
    assert "00000000:  4D442020 00000001" in out  # big-endian MQMD for --encoding 273


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("topic: a\nqos: 5\n", "pub.yaml:2: qos:"),
        ("topic: a\nbogus: 1\n", "pub.yaml:2: bogus: Extra inputs"),
        ("topic: [a\n", "pub.yaml:2:1: not valid JSON/YAML"),
        ("- 1\n", "expected a JSON/YAML object"),
        ("qos: 0\n", "no topic"),
        ("topic: a\npayload: x\npayload_hex: '00'\n", "only one of"),
        ("topic: a\npayload_hex: zz\n", "payload_hex"),
    ],
)
def test_convert_description_errors(capsys, tmp_path, text, message):
    desc = tmp_path / "pub.yaml"
    desc.write_text(text)
    code, _, err = run(capsys, "convert", "--from", "mqtt", "--to", "mq", str(desc))
    assert code == 2 and message in err


def test_convert_mapping_error_exit_code(capsys, tmp_path):
    desc = tmp_path / "pub.json"
    desc.write_text(json.dumps({"topic": "a/b", "qos": 0}))  # no client id: Table 2 needs one
    code, _, err = run(capsys, "convert", "--from", "mqtt", "--to", "mq", str(desc))
    assert code == 1 and "client_id" in err


def test_convert_mq_to_mqtt(capsys):
    path = str(FIXTURE_DIR / "mqtt_qos1_retained.bin")
    code, _, err = run(capsys, "convert", "--from", "mq", "--to", "mqtt", path)
    assert code == 1 and "MsgId" in err  # MQXR-built message has no MsgId yet: packet id would be 0
    code, out, _ = run(
        capsys,
        "convert",
        "--from",
        "mq",
        "--to",
        "mqtt",
        "--allocate-packet-id",
        "9",
        "--subscriber-qos",
        "2",
        "--json",
        path,
    )
    doc = json.loads(out)
    assert doc["result"] == {
        "topic": "sensors/hall/temp",
        "qos": 1,
        "retain": True,
        "dup": False,
        "packet_id": 9,
        "client_id": "thermo-1",
        "payload": '{"t":21.5}',
    }
    code, out, _ = run(
        capsys,
        "convert",
        "--from",
        "mq",
        "--to",
        "mqtt",
        "--fallback-topic",
        "Q",
        str(FIXTURE_DIR / "mq_plain_string.json"),
    )
    assert code == 0 and '"packet_id": 4779' in out
    # MQMD ReplyToQ/ReplyToQMgr is the MQTT 5 Response Topic (docs/mqtt5-mq.md), no longer dropped
    assert '"response_topic": "queue://QM1/REPLY.Q"' in out and "MQMD.ReplyToQ" not in out
    assert "payload_format_indicator" not in out   # MQSTR, but in CCSID 819: the bytes are not UTF-8 text


def test_convert_unknown_pair(capsys):
    code, _, err = run(capsys, "convert", "--from", "mqtt", "--to", "mqtt", str(JMS_TEXT))
    assert code == 2 and "no converter from 'mqtt' to 'mqtt'" in err and "mqtt->mq" in err


def test_converter_table_is_pluggable(monkeypatch):
    plugin = types.ModuleType("fake_jms_plugin")

    def run_it(raw: bytes, name: str, args: argparse.Namespace) -> ConvertResult:
        return ConvertResult(report=ConversionReport(), document={"echo": raw.decode()})

    plugin.entries = lambda: [ConvertEntry("jms", "mq", run_it, "test")]
    plugin.add_arguments = lambda parser: parser.add_argument("--jms-flag")
    monkeypatch.setattr(mapping_table, "ENTRY_MODULES", (mapping_mqtt_mq, plugin))
    parser = argparse.ArgumentParser()
    table = mapping_table.load_convert_table(parser)
    assert set(table) == {("mqtt", "mq"), ("mq", "mqtt"), ("jms", "mq")}
    assert parser.parse_args(["--jms-flag", "x"]).jms_flag == "x"
    assert table[("jms", "mq")].run(b"hi", "-", argparse.Namespace()).document == {"echo": "hi"}


@settings(max_examples=150, deadline=None)
@given(
    st.sampled_from(["jms_text_big_endian.bin", "rfh1_rfh2_chain.bin", "mqtt_qos1_retained.bin"]),
    st.lists(st.tuples(st.integers(0, 640), st.integers(0, 255)), min_size=1, max_size=4),
)
def test_dump_of_mutated_messages_raises_only_mapping_error(name, flips):
    data = bytearray((FIXTURE_DIR / name).read_bytes())
    for pos, value in flips:
        if pos < len(data):
            data[pos] = value
    try:
        text = render(bytes(data))
        doc = as_json(bytes(data))
    except MappingError:
        return
    assert text.startswith("MQMD at offset 0") and doc["spans"][0]["part"] == "MQMD"


def test_inspect_message_data_without_mqmd(capsys):
    path = REAL_MESSAGES / "pymqi_single_rfh2.dat.hex"
    if not path.is_file():
        pytest.skip(f"{path} not present (third-party data, not in the repo)")
    code, out, _ = run(capsys, "inspect", str(path))
    assert code == 0
    assert out.startswith("note: the data has no MQMD; it is read as Format 'MQHRF2  ', Encoding 273")
    assert "MQRFH2 at offset 0: 284 bytes, integers big-endian" in out
    assert "folder <testFolder> at offset 192, NameValueLength 56" in out
    assert "body at offset 284: 49 bytes, Format 'MQSTR   '" in out


def test_inspect_no_mqmd_with_explicit_context(capsys, tmp_path):
    body_only = tmp_path / "body.bin"
    body_only.write_bytes("h\u00e9".encode("latin-1"))
    code, out, _ = run(capsys, "inspect", "--no-mqmd", "--format", "MQSTR", "--ccsid", "819", "--json",
                       str(body_only))
    doc = json.loads(out)
    assert code == 0 and doc["body"]["text"] == "h\u00e9" and doc["body"]["Format"] == "MQSTR   "
    assert doc["spans"] == [{"part": "body", "offset": 0, "length": 2}]


def test_convert_jms_to_mqtt_readable_output(capsys, tmp_path):
    """Like the other directions: the publication (topic, QoS, retain, payload as text when UTF-8, else
    hex) and the report; --out still writes the payload bytes."""
    text = tmp_path / "text.json"
    text.write_text(json.dumps({
        "headers": {"JMSDeliveryMode": 1, "JMSType": "order"},
        "properties": {"n": {"type": "int", "value": 5}, "gone": {"type": "String", "value": None}},
        "body": {"type": "jms_text", "text": "21.5 °C"}}))
    code, out, _ = run(capsys, "convert", "--from", "jms", "--to", "mqtt", "--topic", "plant/temp", str(text))
    assert code == 0
    doc = json.loads(out[:out.index("\nreport:")])
    assert (doc["topic"], doc["qos"], doc["retain"], doc["payload"]) == ("plant/temp", 0, False, "21.5 °C")
    assert doc["content_type"] == "order" and doc["user_properties"] == [["n", "5"]]
    assert "bytes:" not in out                                   # no hex dump of a text payload
    assert "coerced   n (int -> String)" in out and "dropped   gone" in out
    raw = tmp_path / "bytes.json"
    raw.write_text(json.dumps({"headers": {"JMSDeliveryMode": 2},
                               "body": {"type": "jms_bytes", "base64": "AP8Q"}}))   # 00 FF 10
    code, out, _ = run(capsys, "convert", "--from", "jms", "--to", "mqtt", "--topic", "b", str(raw))
    doc = json.loads(out[:out.index("\nreport:")])
    assert code == 0 and doc["payload_hex"] == "00FF10" and "payload" not in doc and doc["qos"] == 2
    assert out.rstrip().endswith("report: nothing lost or coerced")
    dest = tmp_path / "payload.bin"
    code, out, _ = run(capsys, "convert", "--from", "jms", "--to", "mqtt", "--topic", "b", "--out", str(dest),
                       str(raw))
    assert code == 0 and dest.read_bytes() == b"\x00\xff\x10" and "wrote 3 bytes to" in out
    assert json.loads(out[:out.index("\nwrote")])["payload_hex"] == "00FF10"

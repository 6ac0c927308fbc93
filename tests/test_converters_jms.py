"""`mqbridge convert` between MQTT and JMS: the amlen body rule and a round trip through the CLI."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def _convert(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bridge", "convert", *args], capture_output=True, text=True,
                          timeout=60)


def test_mqtt_text_payload_becomes_text_message_and_back(tmp_path: Path) -> None:
    src = tmp_path / "pub.json"
    src.write_text(json.dumps({"topic": "plant/a", "payload": "21.5 C", "qos": 1, "client_id": "dev-1"}))
    r = _convert("--from", "mqtt", "--to", "jms", "--json", "--now-ms", "1700000000000", str(src))
    assert r.returncode == 0, r.stderr
    jms = json.loads(r.stdout)["result"]
    assert jms["body"] == {"type": "jms_text", "text": "21.5 C"}
    assert jms["headers"]["JMSDestination"] == "topic://plant/a"
    assert jms["headers"]["JMSDeliveryMode"] == 2           # QoS 1 -> PERSISTENT
    assert jms["headers"]["JMSTimestamp"] == 1700000000000
    assert jms["properties"]["JMS_SWIFTMQ_CID"] == {"type": "String", "value": "dev-1"}
    back = tmp_path / "jms.json"
    back.write_text(json.dumps(jms))
    out = tmp_path / "payload.bin"
    r = _convert("--from", "jms", "--to", "mqtt", "--out", str(out), str(back))
    assert r.returncode == 0, r.stderr
    assert out.read_bytes() == b"21.5 C"


def test_control_bytes_make_a_bytes_message_unless_text_is_forced(tmp_path: Path) -> None:
    src = tmp_path / "raw.bin"
    src.write_bytes(b"a\x01b")
    r = _convert("--from", "mqtt", "--to", "jms", "--raw", "--topic", "t", "--json", str(src))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["result"]["body"]["type"] == "jms_bytes"
    r = _convert("--from", "mqtt", "--to", "jms", "--raw", "--topic", "t", "--json",
                 "--convert-message-type", "text", str(src))
    assert json.loads(r.stdout)["result"]["body"]["type"] == "jms_text"


def test_bad_jms_description_names_the_member(tmp_path: Path) -> None:
    src = tmp_path / "bad.json"
    src.write_text(json.dumps({"headers": {"JMSPriority": "high"}, "body": {"type": "jms_text", "text": "x"}}))
    r = _convert("--from", "jms", "--to", "mqtt", "--topic", "t", str(src))
    assert r.returncode != 0
    assert "JMSPriority" in r.stderr

"""`mqbridge convert` input: JSON read by a JSON parser (numbers YAML 1.1 would take for strings), and the
command's own `--json` output accepted as input again, in every direction."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bridge.cli.main import main

JMS = {"headers": {"JMSPriority": 7, "JMSType": "order", "JMSCorrelationID": "c-1"},
       "properties": {"big": {"type": "double", "value": 1e308}, "plus": {"type": "double", "value": 1e+16},
                      "n": {"type": "long", "value": 42}},
       "body": {"type": "jms_text", "text": "21.5 °C"}}


def convert(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    code = main(["convert", *argv, "--json", "--now-ms", "1700000000000"])
    out, err = capsys.readouterr()
    assert code == 0, err
    return json.loads(out)


def test_json_numbers_are_read_as_json(tmp_path: Path) -> None:
    """1e308 and 1e+16 are JSON numbers; through YAML 1.1 they were strings and the input was refused."""
    src = tmp_path / "m.json"
    src.write_text(json.dumps(JMS).replace("1e+308", "1e308"))
    assert "1e308" in src.read_text() and "1e+16" in src.read_text()
    run = subprocess.run([sys.executable, "-m", "bridge", "convert", "--from", "jms", "--to", "mq", "--json",
                          str(src)], capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stderr
    folders = {f["name"]: f["elements"] for f in json.loads(run.stdout)["result"]["headers"][0]["folders"]}
    usr = {e["name"]: (e["value"], e["dt"]) for e in folders["usr"]}
    assert float(usr["big"][0]) == 1e308 and float(usr["plus"][0]) == 1e16
    assert usr["big"][1] == usr["plus"][1] == "r8" and usr["n"] == ("42", "i8")


def test_bad_json_names_line_and_column(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = tmp_path / "bad.json"
    src.write_text('{"headers": {"JMSPriority": 4},\n "body": {"type": "jms_text", "text": "x"},,}\n')
    assert main(["convert", "--from", "jms", "--to", "mq", str(src)]) != 0
    err = capsys.readouterr().err
    assert f"{src}:2:" in err and "not valid JSON" in err


@pytest.mark.parametrize(("first", "second", "extra"), [
    ("jms", "mq", []), ("jms", "mqtt", ["--topic", "plant/temp"]), ("mq", "jms", []),
    ("mqtt", "mq", ["--client-id", "c1"]),
    ("mq", "mqtt", ["--fallback-topic", "plant/temp", "--allocate-packet-id", "5"]), ("mqtt", "jms", []),
])
def test_convert_output_is_accepted_as_input(tmp_path: Path, capsys: pytest.CaptureFixture[str], first: str,
                                             second: str, extra: list[str]) -> None:
    """X -> Y with --json, then Y -> X on that output: the command reads its own output, and what the first
    conversion carried comes back."""
    start = tmp_path / "start.json"
    if first == "jms":
        start.write_text(json.dumps(JMS))
    elif first == "mqtt":
        start.write_text(json.dumps({"topic": "plant/temp", "qos": 1, "client_id": "c1", "payload": "21.5 °C"}))
    else:   # an MQ message: made from the JMS description, so that it has an RFH2
        made = convert(capsys, "--from", "jms", "--to", "mq", str(_write(tmp_path / "jms.json", JMS)))
        start.write_text(json.dumps(made))
    there = convert(capsys, "--from", first, "--to", second, *extra, str(start))
    back_input = _write(tmp_path / "there.json", there)
    back_extra = {"mqtt": ["--topic", "plant/temp"], "mq": ["--client-id", "c1"]}.get(first, [])
    if (second, first) == ("mq", "mqtt"):
        back_extra = ["--fallback-topic", "plant/temp", "--allocate-packet-id", "5"]
    back = convert(capsys, "--from", second, "--to", first, *back_extra, str(back_input))["result"]
    if first == "jms":
        assert back["body"] == JMS["body"]
        if second == "mq":   # typed properties and headers travel in the RFH2
            assert back["headers"]["JMSType"] == "order" and back["headers"]["JMSCorrelationID"] == "c-1"
            assert back["properties"]["big"] == {"type": "double", "value": 1e308}
    elif first == "mqtt":
        assert back["topic"] == "plant/temp" and back["payload"] == "21.5 °C"
    else:
        assert back["body"]["text"] == "21.5 °C"
        assert back["MQMD"]["Priority"] == (7 if second == "jms" else -1)   # MQTT has no priority: as queue def


def _write(path: Path, doc: dict) -> Path:
    path.write_text(json.dumps(doc))
    return path

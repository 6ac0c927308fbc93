"""`mqbridge queue list|browse|put|get|clear` on the embedded store (real SQLite) and `mqbridge log tail`,
run as the real command line."""
from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
from pathlib import Path

from bridge.cli.gateway import complete_lines
from mappings.mq.message import decode_message
from tests.support.gateway import wait_for

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "messages"


def mqbridge(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "bridge", *args], capture_output=True, text=True, timeout=60)


def queue(data: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return mqbridge("queue", "--data-dir", str(data), *args)


def test_put_list_browse_get_and_clear_a_queue(tmp_path: Path) -> None:
    data = tmp_path / "var"
    original = (FIXTURES / "jms_text_big_endian.bin").read_bytes()
    r = queue(data, "put", "IN.Q", "--file", str(FIXTURES / "jms_text_big_endian.bin"))
    assert r.returncode == 0 and r.stdout.startswith(f"put {len(original)} bytes on IN.Q, MsgId ")
    r = queue(data, "put", "IN.Q", "--payload", "second", "--topic", "a/b", "--persistent")
    assert r.returncode == 0, r.stderr
    listed = json.loads(queue(data, "list", "--json").stdout)
    assert [(q["queue"], q["depth"]) for q in listed] == [("IN.Q", 2)]
    assert "IN.Q" in queue(data, "list").stdout
    r = queue(data, "browse", "IN.Q")
    assert r.returncode == 0 and r.stdout.count("--- message") == 2 and "MQRFH2 at offset" in r.stdout
    out = tmp_path / "got.bin"
    r = queue(data, "get", "IN.Q", "--out", str(out))   # the oldest first
    assert r.returncode == 0, r.stderr
    got = decode_message(out.read_bytes())
    want = decode_message(original)
    # what was put, but for what a queue manager sets on MQPUT: PutDate/PutTime (and a MsgId if none)
    assert got.body == want.body and got.headers == want.headers
    assert got.md == dataclasses.replace(want.md, put_date=got.md.put_date, put_time=got.md.put_time)
    assert json.loads(queue(data, "list", "--json").stdout)[0]["depth"] == 1
    second = json.loads(queue(data, "get", "IN.Q", "--json").stdout)["message"]
    assert second["body"]["text"] == "second" and second["MQMD"]["Persistence"] == 1
    assert second["headers"][0]["folders"] == [{"name": "mqps", "elements": [{"name": "Top", "value": "a/b"}]}]
    r = queue(data, "get", "IN.Q")
    assert r.returncode == 4 and "MQRC_NO_MSG_AVAILABLE" in r.stderr
    queue(data, "put", "IN.Q", "--payload", "x")
    r = queue(data, "clear", "IN.Q")
    assert r.returncode == 0 and r.stdout.strip() == "cleared 1 messages from IN.Q"


def test_put_of_bytes_that_are_not_an_mq_message_names_the_problem_and_puts_nothing(tmp_path: Path) -> None:
    data = tmp_path / "var"
    bad = tmp_path / "bad.bin"
    bad.write_bytes(b"XD  " + bytes(400))
    r = queue(data, "put", "IN.Q", "--file", str(bad))
    assert r.returncode == 2 and "is not an MQ message" in r.stderr and "StrucId" in r.stderr
    assert json.loads(queue(data, "list", "--json").stdout) == []


def _record(i: int) -> str:
    return json.dumps({"event_time": f"2026-01-01T00:00:0{i}.000000Z", "route": "r", "direction": "egress",
                       "source_protocol": "mqtt", "source_type": "publish", "target_protocol": "mq",
                       "target_type": "MQHRF2", "status": "ok", "message_key": f"k{i}", "qos": 1,
                       "source_size": 1, "findings": []})


def test_log_tail_follows_new_records(tmp_path: Path) -> None:
    logdir = tmp_path / "var" / "convlog"
    logdir.mkdir(parents=True)
    log = logdir / "convlog-20260101-00-000.jsonl"
    log.write_text(_record(0) + "\n")
    proc = subprocess.Popen([sys.executable, "-m", "bridge", "log", "tail", "--data-dir", str(tmp_path / "var"),
                             "-n", "1", "-f"], stdout=subprocess.PIPE, text=True)
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        wait_for(lambda: len(lines) == 1, 20, what="the last record")
        with log.open("a") as f:
            f.write(_record(1) + "\n" + _record(2) + "\n")
        wait_for(lambda: len(lines) == 3, 20, what="the two new records")
    finally:
        proc.terminate()
        proc.wait(10)
    assert ["key=k0" in lines[0], "key=k1" in lines[1], "key=k2" in lines[2]] == [True, True, True]
    assert not any("(malformed)" in line for line in lines)


def test_a_line_the_writer_has_not_finished_waits_for_its_newline() -> None:
    assert complete_lines(b'{"a": 1}\n{"b": ') == (['{"a": 1}'], 9)
    assert complete_lines(b'{"b": ') == ([], 0)
    assert complete_lines('{"é": 1}\n{"é'.encode()[:-1]) == (['{"é": 1}'], 10)   # cut inside a character

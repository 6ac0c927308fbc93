"""MQBRIDGE_EVENT_LOOP picks the gateway's event loop (docs/deployment.md "The event loop")."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.support.gateway import free_port, wait_for


def _serve(tmp_path: Path, choice: str) -> subprocess.Popen[str]:
    cfg = tmp_path / "gw.json"
    cfg.write_text(json.dumps({"data_dir": str(tmp_path / "data"),
                               "broker": {"listeners": [{"host": "127.0.0.1", "port": free_port()}]},
                               "admin": {"enabled": False}, "logging": {"level": "INFO"}}))
    return subprocess.Popen([sys.executable, "-m", "bridge", "serve", "-c", str(cfg)], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env={**os.environ, "MQBRIDGE_EVENT_LOOP": choice})


def test_an_unknown_choice_stops_the_start_naming_the_variable(tmp_path):
    proc = _serve(tmp_path, "tokio")
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert "MQBRIDGE_EVENT_LOOP='tokio': expected auto, asyncio or uvloop" in out


def test_asyncio_is_used_when_asked_for(tmp_path):
    proc = _serve(tmp_path, "asyncio")
    lines: list[str] = []
    try:
        assert proc.stdout is not None
        wait_for(lambda: lines.append(proc.stdout.readline()) or "ready" in lines[-1], 60, what="gateway ready")
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
    assert any("event loop: asyncio" in line for line in lines)

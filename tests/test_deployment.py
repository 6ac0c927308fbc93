"""The Docker Compose deployment: compose.yaml, Dockerfile, deploy/spark-audit.Dockerfile,
deploy/mqbridge.yaml and deploy/rules.yaml. No Docker engine runs on this machine, so these tests parse
the files and check that they agree with each other and with the code (the gateway configuration and
rules validate, the audit command parses); they cannot show that the images build or start."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import yaml

from bridge.config import load_config
from mappings.rules.model import JmsConnector, MqConnector, QueueEndpoint, parse_rules
from spark_audit.options import build_parser

ROOT = Path(__file__).resolve().parent.parent
COMPOSE: dict[str, Any] = yaml.safe_load((ROOT / "compose.yaml").read_text(encoding="utf-8"))
SERVICES: dict[str, Any] = COMPOSE["services"]


def _mounts(service: str) -> dict[str, str]:
    """container path -> source (named volume or host path) of a service's volumes."""
    out = {}
    for spec in SERVICES[service].get("volumes", []):
        source, target, *_ = spec.split(":")
        out[target] = source
    return out


def _dockerfile(path: Path) -> list[str]:
    """Instructions of a Dockerfile with continuation lines joined."""
    text = re.sub(r"\\\n", " ", path.read_text(encoding="utf-8"))
    return [line.strip() for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def test_compose_has_the_four_services_with_the_required_images() -> None:
    assert set(SERVICES) == {"mq", "activemq", "mqbridge", "spark-audit"}
    mq = SERVICES["mq"]
    assert mq["image"].startswith("icr.io/ibm-messaging/mq")
    assert mq["environment"]["LICENSE"] == "accept" and mq["environment"]["MQ_QMGR_NAME"] == "QM1"
    assert "1414:1414" in mq["ports"]
    assert SERVICES["activemq"]["image"].startswith("apache/activemq-classic")
    bridge = SERVICES["mqbridge"]
    assert (ROOT / bridge["build"]["context"] / bridge["build"]["dockerfile"]).is_file()
    assert bridge["command"] == ["serve", "-c", "/etc/mqbridge/mqbridge.yaml"]
    assert bridge["depends_on"]["mq"]["condition"] == "service_healthy"
    spark = SERVICES["spark-audit"]["build"]
    spark_file = ROOT / spark["context"] / spark["dockerfile"]
    assert any(re.match(r"FROM (apache|bitnami)/spark:", line) for line in _dockerfile(spark_file))


def test_every_volume_is_declared_or_a_file_in_the_repository() -> None:
    declared = set(COMPOSE["volumes"])
    for name in SERVICES:
        for target, source in _mounts(name).items():
            if source.startswith("."):
                assert (ROOT / source).exists(), f"{name}: {source} -> {target}"
            else:
                assert source in declared, f"{name}: volume {source} is not declared"


def test_gateway_config_and_rules_are_the_mounted_files_and_validate() -> None:
    mounts = _mounts("mqbridge")
    config_src = mounts["/etc/mqbridge/mqbridge.yaml"]
    cfg = load_config(ROOT / config_src)
    assert str(cfg.rules) in mounts, "the configuration's rules file is mounted"
    rules_src = ROOT / mounts[str(cfg.rules)]
    assert cfg.convlog.enabled and cfg.convlog.directory is not None
    # the conversion log lies in the volume the audit reads
    log_volume = next(src for tgt, src in mounts.items() if str(cfg.convlog.directory).startswith(tgt + "/"))
    assert _mounts("spark-audit")["/var/log/mqbridge"] == log_volume
    assert str(cfg.data_dir) in mounts
    assert any(lst.host == "0.0.0.0" and f"{lst.port}:{lst.port}" in SERVICES["mqbridge"]["ports"]
               for lst in cfg.broker.listeners)
    out = subprocess.run([sys.executable, "-m", "bridge", "validate", str(rules_src)], capture_output=True,
                         text=True, cwd=ROOT)
    assert out.returncode == 0, out.stderr
    assert "OK" in out.stdout


def test_rules_route_mqtt_both_ways_to_qm1_queues_and_to_activemq() -> None:
    rules = parse_rules((ROOT / "deploy" / "rules.yaml").read_text(encoding="utf-8"), "deploy/rules.yaml")
    mq = [c for c in rules.connectors.values() if isinstance(c, MqConnector)]
    jms = [c for c in rules.connectors.values() if isinstance(c, JmsConnector)]
    assert len(mq) == 1 and len(jms) == 1
    qm1 = mq[0]
    env = SERVICES["mq"]["environment"]
    assert qm1.queue_manager == env["MQ_QMGR_NAME"] and qm1.channel == "DEV.APP.SVRCONN"
    assert qm1.conname == "mq(1414)" and qm1.user == "app" and qm1.password == env["MQ_APP_PASSWORD"]
    assert jms[0].host == "activemq" and f"{jms[0].port}:{jms[0].port}" in SERVICES["activemq"]["ports"]

    def kind(ep: object) -> str:
        if isinstance(ep, QueueEndpoint):
            ctype = rules.connector(ep.connector).type
            return f"{ctype}-{'queue' if ep.queue else 'topic'}"
        return "mqtt"

    directions = {(kind(r.source), kind(r.target)) for r in rules.routes}
    assert {("mqtt", "mq-queue"), ("mq-queue", "mqtt"), ("mqtt", "jms-queue"), ("jms-queue", "mqtt")} <= directions


def test_dockerfile_is_python_311_slim_installs_extras_and_serves() -> None:
    lines = _dockerfile(ROOT / "Dockerfile")
    assert lines[0] == "FROM python:3.11-slim"
    installs = [line for line in lines if line.startswith("RUN pip install")]
    assert installs
    extras = re.search(r'"\.\[([a-z,]+)\]"', installs[0])
    assert extras is not None
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    assert set(extras.group(1).split(",")) <= set(declared)
    assert 'CMD ["serve", "-c", "/etc/mqbridge/mqbridge.yaml"]' in lines
    assert 'ENTRYPOINT ["mqbridge"]' in lines


def test_spark_audit_command_parses_with_the_audit_cli() -> None:
    spark = SERVICES["spark-audit"]
    script = spark["command"][0].replace("$$", "$")
    run = next(part for part in script.split(";") if "-m spark_audit" in part)
    for name, value in spark.get("environment", {}).items():  # the shell expands them at run time
        run = run.replace("${" + name + "}", str(value))
    argv = shlex.split(run.strip().removeprefix("do").strip())
    argv = argv[argv.index("spark_audit") + 1:]
    args = build_parser().parse_args(argv)
    # --every is the long-running incremental mode: one incremental run per tick in one Spark session
    assert args.logs == ["/var/log/mqbridge/convlog"] and args.out == "/audit"
    assert args.every == float(spark["environment"]["AUDIT_INTERVAL_SECONDS"]) > 0
    assert _mounts("spark-audit")["/audit"] in COMPOSE["volumes"]


def test_readme_documents_the_deployment() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "## Deployment with Docker Compose" in readme
    section = readme.split("## Deployment with Docker Compose", 1)[1]
    assert "no Docker engine" in section and "deploy/rules.yaml" in section

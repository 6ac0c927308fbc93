"""The deployment files checked for real without a Docker engine: Debian's docker-compose (1.29.2)
validates compose.yaml with `docker-compose config -q`, which needs no daemon; every file compose.yaml
and the Dockerfiles name exists in the build context (and is not hidden by .dockerignore); the
gateway's configuration loads with its own model and the rules validate; ports, paths and commands
agree between compose.yaml, the Dockerfiles, deploy/mqbridge.yaml and deploy/rules.yaml; the audit
image's modules import nothing that image lacks. (tests/test_deployment.py checks the services and
README; this file checks the references between the files.)"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from bridge.config import GatewayConfig, load_config
from mappings.rules.model import EMBEDDED, JmsConnector, MqConnector, QueueEndpoint, RulesFile, parse_rules

ROOT = Path(__file__).resolve().parent.parent
COMPOSE_FILE = ROOT / "compose.yaml"
COMPOSE: dict[str, Any] = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
SERVICES: dict[str, Any] = COMPOSE["services"]
DOCKER_COMPOSE = shutil.which("docker-compose")


# -- reading the files ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Mount:
    source: str        # named volume, or a host path relative to compose.yaml
    target: str
    read_only: bool

    @property
    def is_bind(self) -> bool:
        return self.source.startswith((".", "/"))


def mounts(service: str) -> list[Mount]:
    out = []
    for spec in SERVICES[service].get("volumes", []):
        assert isinstance(spec, str), f"{service}: only the short volume syntax is checked here: {spec!r}"
        source, target, *mode = spec.split(":")
        out.append(Mount(source, target, mode == ["ro"]))
    return out


def container_ports(service: str) -> dict[int, int]:
    """container port -> published host port ("HOST:CONTAINER" strings)."""
    out = {}
    for spec in SERVICES[service].get("ports", []):
        host, container = str(spec).rsplit(":", 1)
        out[int(container)] = int(host.rsplit(":", 1)[-1])
    return out


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    line: int


def dockerfile(path: Path) -> list[Instruction]:
    """A Dockerfile's instructions (continuations joined), with the line each starts on."""
    out: list[Instruction] = []
    pending: list[str] = []
    start = 0
    for n, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if not pending:
            start = n
        if line.startswith("#"):
            continue
        pending.append(line.removesuffix("\\").strip())
        if not line.endswith("\\"):
            keyword, _, args = " ".join(pending).partition(" ")
            out.append(Instruction(keyword.upper(), args.strip(), start))
            pending = []
    return out


def exec_form(args: str) -> list[str]:
    value = json.loads(args)
    assert isinstance(value, list)
    return value


def copy_sources(inst: Instruction) -> tuple[list[str], str]:
    """(sources, destination) of a COPY/ADD without --from (which copies from another stage)."""
    words = [w for w in inst.args.split() if not w.startswith("--")]
    return words[:-1], words[-1]


def dockerignore(context: Path) -> list[str]:
    path = context / ".dockerignore"
    if not path.is_file():
        return []
    return [ln.strip() for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("#")]


def ignored(rel: str, patterns: list[str]) -> bool:
    """Docker's rule, enough for the patterns used here: the last matching pattern wins, ``!`` re-includes,
    a pattern matching a parent directory excludes everything under it."""
    parts = PurePosixPath(rel).parts
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    result = False
    for pattern in patterns:
        negate = pattern.startswith("!")
        pat = pattern.lstrip("!").strip("/")
        if any(fnmatch.fnmatchcase(p, pat) or (pat.startswith("**/") and fnmatch.fnmatchcase(p.split("/")[-1],
                                                                                            pat[3:]))
               for p in prefixes):
            result = not negate
    return result


def built_services() -> list[tuple[str, Path, Path]]:
    """(service, build context, Dockerfile) of every service built from this repository."""
    out = []
    for name, svc in SERVICES.items():
        build = svc.get("build")
        if build is None:
            continue
        if isinstance(build, str):
            build = {"context": build}
        context = (COMPOSE_FILE.parent / build["context"]).resolve()
        out.append((name, context, context / build.get("dockerfile", "Dockerfile")))
    return out


def gateway_config() -> GatewayConfig:
    return load_config(ROOT / "deploy" / "mqbridge.yaml")


def rules() -> RulesFile:
    return parse_rules((ROOT / "deploy" / "rules.yaml").read_text(encoding="utf-8"), "deploy/rules.yaml")


def bind_source(service: str, target: str) -> Path:
    """The repository file mounted at ``target`` in ``service``."""
    found = [m for m in mounts(service) if m.target == target]
    assert found and found[0].is_bind, f"{service}: nothing from the repository is mounted at {target}"
    return (COMPOSE_FILE.parent / found[0].source).resolve()


def under(path: str | Path, parent: str) -> bool:
    return PurePosixPath(str(path)).is_relative_to(PurePosixPath(parent))


# -- docker-compose's own validation --------------------------------------------------------------------------


def _compose_config(path: Path) -> subprocess.CompletedProcess[str]:
    assert DOCKER_COMPOSE is not None
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DOCKER_", "COMPOSE_"))}
    return subprocess.run([DOCKER_COMPOSE, "-f", str(path), "config", "-q"], cwd=path.parent, env=env,
                          capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(DOCKER_COMPOSE is None, reason="docker-compose is not installed (Debian package "
                    "docker-compose, in scripts/dev.sh's APT_PACKAGES): compose.yaml's schema is not checked")
def test_docker_compose_validates_compose_yaml_without_a_daemon() -> None:
    r = _compose_config(COMPOSE_FILE)
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""


@pytest.mark.skipif(DOCKER_COMPOSE is None, reason="docker-compose is not installed (Debian package "
                    "docker-compose, in scripts/dev.sh's APT_PACKAGES)")
def test_docker_compose_rejects_a_broken_copy(tmp_path: Path) -> None:
    """The validation is real: the same file with an unknown service key, or a build context that does
    not exist, is refused (so the test above can fail)."""
    for name, edit in (("unknown-key", lambda c: c["services"]["mqbridge"].update(no_such_key=1)),
                       ("no-context", lambda c: c["services"]["mqbridge"]["build"].update(context="./missing"))):
        broken = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
        edit(broken)
        where = tmp_path / name
        where.mkdir()
        (where / "compose.yaml").write_text(yaml.safe_dump(broken), encoding="utf-8")
        for child in ("deploy", "Dockerfile"):
            os.symlink(ROOT / child, where / child)
        r = _compose_config(where / "compose.yaml")
        assert r.returncode != 0, f"{name}: accepted"
        assert ("no_such_key" if name == "unknown-key" else "missing") in r.stderr, r.stderr


# -- every file referenced exists --------------------------------------------------------------------------------


def test_build_contexts_dockerfiles_and_bind_mounts_exist() -> None:
    built = built_services()
    assert {name for name, _, _ in built} == {"mqbridge", "spark-audit"}
    for name, context, file in built:
        assert context.is_dir(), f"{name}: build context {context} is missing"
        assert file.is_file(), f"{name}: {file} is missing"
    declared = set(COMPOSE.get("volumes") or {})
    for name in SERVICES:
        for m in mounts(name):
            if m.is_bind:
                assert (COMPOSE_FILE.parent / m.source).exists(), f"{name}: bind mount {m.source} is missing"
            else:
                assert m.source in declared, f"{name}: volume {m.source} is not declared at the top level"
        for dep in SERVICES[name].get("depends_on", {}):
            assert dep in SERVICES, f"{name} depends on an unknown service {dep}"


def test_copy_sources_exist_in_the_build_context_and_are_not_dockerignored() -> None:
    for _, context, file in built_services():
        patterns = dockerignore(context)
        copies = [i for i in dockerfile(file) if i.keyword in ("COPY", "ADD") and "--from" not in i.args]
        assert copies, f"{file} copies nothing"
        for inst in copies:
            sources, _ = copy_sources(inst)
            for src in sources:
                assert (context / src).exists(), f"{file.name}:{inst.line}: COPY source {src} is not in {context}"
                assert not ignored(src, patterns), f"{file.name}:{inst.line}: {src} is excluded by .dockerignore"


def test_ignored_follows_dockerignore_rules() -> None:
    assert ignored("tests/test_x.py", ["tests"]) and not ignored("testsuite", ["tests"])
    assert ignored("bridge/__pycache__/a.pyc", ["**/__pycache__"])
    assert not ignored("docs/keep.md", ["docs", "!docs/keep.md"])


def test_the_gateway_image_copies_what_pip_install_needs() -> None:
    """pip install . needs pyproject.toml, its readme and every package it finds."""
    _, _, file = next(b for b in built_services() if b[0] == "mqbridge")
    copied = {PurePosixPath(s).as_posix() for i in dockerfile(file) if i.keyword == "COPY"
              for s in copy_sources(i)[0]}
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "pyproject.toml" in copied and project["project"]["readme"] in copied
    for pattern in project["tool"]["setuptools"]["packages"]["find"]["include"]:
        top = pattern.rstrip("*")
        assert top in copied, f"package {top} is installed from pyproject.toml but not copied into the image"


def test_the_audit_image_code_imports_only_what_that_image_has(tmp_path: Path) -> None:
    """deploy/spark-audit.Dockerfile copies mappings/ and spark_audit/ onto Spark's image, which has
    PySpark (and py4j) and the standard library only: import every audit module with anything else
    refused for imports made by those two packages."""
    image_root = tmp_path / "opt-mqbridge"
    image_root.mkdir()
    _, context, file = next(b for b in built_services() if b[0] == "spark-audit")
    for inst in dockerfile(file):
        if inst.keyword == "COPY":
            sources, dest = copy_sources(inst)
            for src in sources:
                shutil.copytree(context / src, image_root / PurePosixPath(dest).name,
                                ignore=shutil.ignore_patterns("__pycache__"))
    assert {p.name for p in image_root.iterdir()} == {"mappings", "spark_audit"}
    script = f"""
import builtins, importlib, pkgutil, sys
root = {str(image_root)!r}
allowed = set(sys.stdlib_module_names) | {{"pyspark", "py4j", "mappings", "spark_audit"}}
real = builtins.__import__
def guard(name, globals=None, locals=None, fromlist=(), level=0):
    caller = (globals or {{}}).get("__file__") or ""
    if level == 0 and caller.startswith(root) and name.split(".")[0] not in allowed:
        raise ImportError(f"{{caller}} imports {{name}}, which the spark-audit image does not have")
    return real(name, globals, locals, fromlist, level)
builtins.__import__ = guard
sys.path.insert(0, root)
import spark_audit
names = [m.name for m in pkgutil.walk_packages(spark_audit.__path__, "spark_audit.")]
for name in names:
    importlib.import_module(name)
assert all(m.__file__.startswith(root) for n, m in sys.modules.items()
           if n.split(".")[0] in ("mappings", "spark_audit") and getattr(m, "__file__", None))
print(len(names))
"""
    r = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": ""})
    assert r.returncode == 0, r.stderr
    assert int(r.stdout.strip()) >= 5


# -- the configuration and rules, and what they must agree with --------------------------------------------------


def test_gateway_config_loads_and_rules_validate_with_existing_connectors() -> None:
    cfg = gateway_config()
    assert isinstance(cfg, GatewayConfig)
    mounted_config = bind_source("mqbridge", "/etc/mqbridge/mqbridge.yaml")
    assert mounted_config == (ROOT / "deploy" / "mqbridge.yaml").resolve()
    assert cfg.rules is not None and bind_source("mqbridge", str(cfg.rules)) == (ROOT / "deploy" / "rules.yaml")
    rf = rules()
    defined = set(rf.connectors) | {EMBEDDED}
    for route in rf.routes:
        for ep in (route.source, route.target, route.options.backout_destination):
            if isinstance(ep, QueueEndpoint):
                assert ep.connector in defined, f"route {route.name}: connector {ep.connector} is not defined"
    r = subprocess.run([sys.executable, "-m", "bridge", "validate", str(ROOT / "deploy" / "rules.yaml")],
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr


def test_the_command_is_the_same_in_compose_and_the_dockerfile_and_its_config_is_there() -> None:
    _, _, file = next(b for b in built_services() if b[0] == "mqbridge")
    insts = dockerfile(file)
    cmd = exec_form(next(i.args for i in insts if i.keyword == "CMD"))
    entry = exec_form(next(i.args for i in insts if i.keyword == "ENTRYPOINT"))
    command = SERVICES["mqbridge"]["command"]
    assert command == cmd and entry == ["mqbridge"]
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    assert "mqbridge" in project["project"]["scripts"]           # the entry point pip installs
    config_path = command[command.index("-c") + 1]
    assert bind_source("mqbridge", config_path).is_file()         # mounted from the repository
    copied_to = [copy_sources(i)[1] for i in insts if i.keyword == "COPY"
                 if "deploy/mqbridge.yaml" in copy_sources(i)[0]]
    assert copied_to and under(config_path, copied_to[0].rstrip("/"))   # and baked in as a fallback


def test_mqtt_listener_port_is_the_one_compose_publishes_and_the_image_exposes() -> None:
    cfg = gateway_config()
    ports = container_ports("mqbridge")
    _, _, file = next(b for b in built_services() if b[0] == "mqbridge")
    exposed = {int(p.split("/")[0]) for i in dockerfile(file) if i.keyword == "EXPOSE" for p in i.args.split()}
    assert cfg.broker.listeners
    for lst in cfg.broker.listeners:
        assert lst.host in ("0.0.0.0", "::", ""), f"listener {lst.name} binds {lst.host}: unreachable from outside"
        assert lst.port in ports, f"listener port {lst.port} is not published by compose (publishes {ports})"
        assert lst.port in exposed, f"listener port {lst.port} is not EXPOSEd by the Dockerfile"
    assert cfg.admin.host == "127.0.0.1" and cfg.admin.port not in ports   # unauthenticated: never published


def test_data_and_log_paths_are_volumes_the_image_user_owns_and_the_audit_reads() -> None:
    cfg = gateway_config()
    _, _, file = next(b for b in built_services() if b[0] == "mqbridge")
    insts = dockerfile(file)
    volumes = exec_form(next(i.args for i in insts if i.keyword == "VOLUME"))
    owned = [w for i in insts if i.keyword == "RUN" and "chown" in i.args
             for w in i.args.split("chown", 1)[1].split() if w.startswith("/")]
    named = {m.target: m.source for m in mounts("mqbridge") if not m.is_bind}
    assert cfg.convlog.enabled and cfg.convlog.directory is not None
    for path in (cfg.data_dir, cfg.convlog.directory):
        assert any(under(path, t) for t in named), f"{path} is not on a compose volume"
        assert any(under(path, v) for v in volumes), f"{path} is not under a VOLUME of the image"
        assert any(under(path, o) for o in owned), f"{path} is not owned by the image's user"
    log_volume = next(src for tgt, src in named.items() if under(cfg.convlog.directory, tgt))
    audit = {m.target: m for m in mounts("spark-audit")}
    reader = next(m for m in audit.values() if m.source == log_volume)
    assert reader.read_only and under(cfg.convlog.directory, reader.target)
    script = SERVICES["spark-audit"]["command"][0]
    assert re.search(rf"-m spark_audit {re.escape(str(cfg.convlog.directory))}\s", script), script


def test_connectors_reach_compose_services_on_their_container_ports() -> None:
    rf = rules()
    mq = [c for c in rf.connectors.values() if isinstance(c, MqConnector)]
    jms = [c for c in rf.connectors.values() if isinstance(c, JmsConnector)]
    assert mq and jms
    for c in mq:
        m = re.fullmatch(r"([^()]+)\((\d+)\)", c.conname)
        assert m is not None, c.conname
        host, port = m.group(1), int(m.group(2))
        assert host in SERVICES and port in container_ports(host), f"{c.conname}: no such service/port"
        assert c.queue_manager == SERVICES[host]["environment"]["MQ_QMGR_NAME"]
        assert c.password == SERVICES[host]["environment"]["MQ_APP_PASSWORD"]
    for c in jms:
        assert c.host in SERVICES and c.port in container_ports(c.host), f"{c.host}:{c.port}: no such service/port"
    assert "mq" in SERVICES["mqbridge"]["depends_on"] and "activemq" in SERVICES["mqbridge"]["depends_on"]

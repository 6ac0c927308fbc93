"""`mqbridge serve`, `mqbridge status` and `mqbridge admin`: run the gateway and talk to a running one."""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any
from urllib.parse import quote

from bridge.admin_token import HEADER, bearer, read_token
from bridge.config import ConfigError, GatewayConfig, ListenerConfig, load_config
from bridge.logsetup import setup_logging


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("serve", help="run the gateway (built-in MQTT broker, embedded defaults)")
    p.add_argument("--config", "-c", type=Path, help="YAML configuration file")
    p.add_argument("--data-dir", type=Path, help="where the store and runtime files live (default var/)")
    p.add_argument("--rules", "-r", type=Path, help="mapping rules file (default: the embedded routes)")
    p.add_argument("--host", help="bind address of the default listener (overrides the config)")
    p.add_argument("--port", type=int, help="port of the default listener (overrides the config)")
    p.add_argument("--admin-port", type=int, help="loopback admin port (0 picks a free one)")
    p.add_argument("--log-level", choices=["DEBUG", "INFO", "WARNING", "ERROR"])
    p.add_argument("--json-logs", action="store_true", help="log JSON lines")
    p.set_defaults(func=cmd_serve)

    for name, helptext in (("status", "show connections, sessions, subscriptions and rates"),):
        p = sub.add_parser(name, help=helptext)
        _add_target(p)
        p.add_argument("--json", action="store_true", help="print the raw JSON")
        p.set_defaults(func=cmd_status)

    p = sub.add_parser("admin", help="list or act on connections and persistent sessions")
    _add_target(p)
    asub = p.add_subparsers(dest="action", metavar="ACTION")
    asub.required = True
    for what in ("connections", "sessions", "subscriptions"):
        a = asub.add_parser(what, help=f"list {what}")
        a.add_argument("--json", action="store_true")
        a.set_defaults(func=cmd_admin_list, what=what)
    a = asub.add_parser("disconnect", help="close a client's connection (its will is published)")
    a.add_argument("client_id")
    a.set_defaults(func=cmd_admin_action, method="DELETE", path="connections")
    a = asub.add_parser("delete-session", help="delete an offline persistent session")
    a.add_argument("client_id")
    a.set_defaults(func=cmd_admin_action, method="DELETE", path="sessions")
    a = asub.add_parser("trace", help="switch the packet-level trace of a client on or off")
    a.add_argument("client_id")
    a.add_argument("state", choices=["on", "off"])
    a.set_defaults(func=cmd_admin_action, method="POST", path="trace")


def _add_target(p: argparse.ArgumentParser) -> None:
    p.add_argument("--config", "-c", type=Path, help="configuration of the running gateway")
    p.add_argument("--data-dir", type=Path, help="data directory of the running gateway")
    p.add_argument("--admin", metavar="URL", help="admin URL, e.g. http://127.0.0.1:9883")


# -- serve ----------------------------------------------------------------------------------------


def _effective_config(args: argparse.Namespace) -> GatewayConfig:
    cfg = load_config(args.config)
    updates: dict[str, Any] = {}
    if getattr(args, "data_dir", None) is not None:
        updates["data_dir"] = args.data_dir
    if getattr(args, "rules", None) is not None:
        updates["rules"] = args.rules
    if getattr(args, "host", None) is not None or getattr(args, "port", None) is not None:
        listeners = list(cfg.broker.listeners) or [ListenerConfig()]
        first = listeners[0].model_copy(update={
            k: v for k, v in (("host", args.host), ("port", args.port)) if v is not None})
        listeners[0] = first
        updates["broker"] = cfg.broker.model_copy(update={"listeners": listeners})
    if getattr(args, "admin_port", None) is not None:
        updates["admin"] = cfg.admin.model_copy(update={"port": args.admin_port})
    if getattr(args, "log_level", None) or getattr(args, "json_logs", False):
        log_updates: dict[str, Any] = {}
        if args.log_level:
            log_updates["level"] = args.log_level
        if args.json_logs:
            log_updates["json_format"] = True
        updates["logging"] = cfg.logging.model_copy(update=log_updates)
    return cfg.model_copy(update=updates) if updates else cfg


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        cfg = _effective_config(args)
    except ConfigError as exc:
        print(f"mqbridge: {exc}", file=sys.stderr)
        return 2
    setup_logging(cfg.logging.level, cfg.logging.json_format)
    from bridge.app import run  # the gateway itself: not imported by the other commands (e.g. audit)
    return run(cfg)


# -- talking to a running gateway -------------------------------------------------------------------


class AdminUnavailable(Exception):
    pass


def _admin_url(args: argparse.Namespace) -> str:
    if args.admin:
        return args.admin.rstrip("/")
    try:
        cfg = load_config(args.config)
    except ConfigError as exc:
        raise AdminUnavailable(str(exc)) from None
    data_dir = args.data_dir or cfg.data_dir
    runtime = Path(data_dir) / "runtime.json"
    try:
        info = json.loads(runtime.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        if not cfg.admin.enabled:
            raise AdminUnavailable("the admin channel is disabled in the configuration") from None
        return f"http://{cfg.admin.host}:{cfg.admin.port}"
    if not info.get("admin"):
        raise AdminUnavailable("the running gateway has no admin channel")
    return str(info["admin"])


def _admin_token(args: argparse.Namespace) -> str | None:
    """MQBRIDGE_ADMIN_TOKEN, else the token file in the configuration's data directory."""
    given = os.environ.get("MQBRIDGE_ADMIN_TOKEN")
    if given:
        return given
    data_dir = getattr(args, "data_dir", None)
    if data_dir is None:
        try:
            data_dir = load_config(getattr(args, "config", None)).data_dir
        except ConfigError:
            return None
    return read_token(data_dir)


def admin_request(args: argparse.Namespace, method: str, path: str) -> tuple[int, Any]:
    url = _admin_url(args) + path
    req = urllib.request.Request(url, method=method)
    token = _admin_token(args)
    if token is not None:
        req.add_header(HEADER, bearer(token))
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        try:
            return exc.code, json.loads(exc.read())
        except ValueError:
            return exc.code, {"error": exc.reason}
    except (urllib.error.URLError, OSError) as exc:
        raise AdminUnavailable(f"no gateway answers at {url}: {getattr(exc, 'reason', exc)}") from None


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):.1f}"


def cmd_status(args: argparse.Namespace) -> int:
    try:
        code, status = admin_request(args, "GET", "/status")
        _, conns = admin_request(args, "GET", "/connections")
    except AdminUnavailable as exc:
        print(f"mqbridge: {exc}", file=sys.stderr)
        return 3
    if code != 200:
        print(f"mqbridge: status failed: {status}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps({"status": status, "connections": conns}, indent=2))
        return 0
    s = status
    print(f"gateway {s['gateway_id']} (mqbridge {s['version']}), up {s['uptime_seconds']:.0f} s")
    for lst in s["listeners"]:
        state = "running" if lst["running"] else "stopped"
        print(f"  listener {lst['name']:<28} {state:<8} {lst['connections']} connected, "
              f"{lst['accepted']} accepted, {lst['refused']} refused")
    sess = s["sessions"]
    msgs = s["messages"]
    print(f"  connections {s['connections']}   sessions {sess['total']} ({sess['persistent']} persistent, "
          f"{sess['offline']} offline)   subscriptions {s['subscriptions']}   retained {s['retained']}")
    print(f"  messages received {msgs['received']}  sent {msgs['sent']}  dropped {msgs['dropped']}  "
          f"queued {msgs['queued']}  in flight {msgs['inflight']}  "
          f"publisher re-sends {msgs.get('resends', 0)}")
    print(f"  rates  in {s['rates']['received_per_s']}/s  out {s['rates']['sent_per_s']}/s   "
          f"store commits {s['store']['commits']}")
    top = s.get("top_queued") or []
    if top:
        print("  top sessions by queued bytes:")
        for q in top:
            state = "connected" if q["connected"] else "offline"
            print(f"    {q['client_id']:<30} {_mib(q['queued_bytes'])} MiB of {_mib(q['max_queued_bytes'])} "
                  f"({q['queued']}/{q['max_queued']} queued, {q['inflight']} in flight, "
                  f"{_mib(q['inbound_qos2_bytes'])} MiB unreleased QoS 2)  dropped {q['dropped']}  {state}")
    for r in s.get("routes", []):   # filtered: not matched by the route's selector (acknowledged, not logged)
        error = f"  last error: {r['last_error']}" if r.get("last_error") else ""
        queue = ""
        if "queued" in r:   # a route from MQTT: its broker session's queue, and whether it holds publishers
            queue = f"  queued {r['queued']}/{r['max_queued']}"
            if r.get("backpressure"):
                queue += f"  BACKPRESSURE: {r['held_publishers']} publisher(s) held"
        print(f"  route {r['route']:<28} moved {r['moved']}  filtered {r.get('filtered', 0)}  "
              f"dropped {r.get('dropped', 0)}  backout {r['backout']}  delivery failures {r['delivery_failures']}"
              f"{queue}{error}")
        for end in ("source", "target"):   # a connector's link to its provider (JMS): up, or down since when
            link = r.get(f"{end}_link")
            if link:
                since = time.strftime("%H:%M:%S", time.localtime(link["since"])) if link.get("since") else "?"
                why = f": {link['error']}" if link.get("error") else ""
                print(f"    {end} link {link['state'].upper()} since {since}, "
                      f"{link.get('reconnects', 0)} reconnect(s){why}")
    for k in s.get("kept_route_sessions", []):   # a removed route's broker session (docs/rules.md)
        print(f"  kept   {k['route']:<28} {k['kept']} queued message(s) no route matches (topics "
              f"{', '.join(k['topics'])}): `mqbridge reload --discard {k['route']}` drops them")
    if conns:
        print(f"\n  {'CLIENT':<30} {'PEER':<22} {'PROTO':<6} {'IN/s':>8} {'OUT/s':>8} "
              f"{'INFL':>5} {'QUEUE':>6}")
        for c in conns:
            print(f"  {c['client_id']:<30} {c['peer']:<22} {c['protocol_level']:<6} {c['rate_in']:>8} "
                  f"{c['rate_out']:>8} {c['inflight']:>5} {c['queued']:>6}")
    return 0


def cmd_admin_list(args: argparse.Namespace) -> int:
    try:
        code, body = admin_request(args, "GET", f"/{args.what}")
    except AdminUnavailable as exc:
        print(f"mqbridge: {exc}", file=sys.stderr)
        return 3
    if code != 200:
        print(f"mqbridge: {body.get('error', body)}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(body, indent=2))
        return 0
    if not body:
        print(f"no {args.what}")
        return 0
    keys = {"connections": ["client_id", "peer", "protocol_level", "clean_session", "keepalive",
                            "received", "sent", "inflight", "queued"],
            "sessions": ["client_id", "persistent", "connected", "queued", "inflight", "last_seen"],
            "subscriptions": ["client_id", "topic_filter", "qos", "matched", "rate"]}[args.what]
    print("  ".join(k.upper() for k in keys))
    for row in body:
        print("  ".join(str(row.get(k)) for k in keys))
    return 0


def cmd_admin_action(args: argparse.Namespace) -> int:
    path = f"/{args.path}/{quote(args.client_id, safe='')}"
    if args.path == "trace":
        path += f"?on={'1' if args.state == 'on' else '0'}"
    try:
        code, body = admin_request(args, args.method, path)
    except AdminUnavailable as exc:
        print(f"mqbridge: {exc}", file=sys.stderr)
        return 3
    if code != 200:
        print(f"mqbridge: {body.get('error', body)}", file=sys.stderr)
        return 1
    print(json.dumps(body))
    return 0

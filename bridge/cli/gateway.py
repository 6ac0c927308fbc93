"""`mqbridge validate`, `mqbridge queue ...` and `mqbridge log tail`: rules and configuration checks, the
embedded queue store, and the conversion log, from the command line."""
from __future__ import annotations

import argparse
import json
import sys
import time
import urllib.parse
from pathlib import Path

from bridge.cli.broker import AdminUnavailable, admin_request
from bridge.cli.mq_dump import render
from bridge.config import ConfigError, GatewayConfig, load_config
from bridge.connectors.embedded import QueueStore, default_path
from bridge.connectors.jms_native.connector import native_problems
from bridge.convlog import log_files
from bridge.mqtt.acl import read_acl
from bridge.mqtt.passwords import AuthFileError, parse_hash, read_password_file
from bridge.routing.route_acl import route_acl_problems
from bridge.rules_file import load_rules
from mappings.errors import MappingError
from mappings.mq import constants as C
from mappings.mq.message import build_message, decode_message, encode_message, message_as_dict
from mappings.mq.mqmd import Mqmd
from mappings.mq.rfh2 import Rfh2, RfhElement, RfhFolder
from mappings.rules.model import MqttEndpoint, RulesError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("validate", help="check a rules file (and with -c a configuration) without starting anything")
    p.add_argument("rules", type=Path, nargs="?", help="rules file (default with -c: the configuration's)")
    p.add_argument("--config", "-c", type=Path,
                   help="also check this configuration, its users and its password file")
    p.set_defaults(func=cmd_validate)

    p = sub.add_parser("reload", help="make a running gateway re-read its rules file (like SIGHUP)")
    p.add_argument("--config", "-c", type=Path)
    p.add_argument("--data-dir", type=Path)
    p.add_argument("--admin", metavar="URL")
    p.add_argument("--discard", metavar="ROUTE", action="append", default=[],
                   help="drop (each logged) the queued messages a removed route's broker session keeps")
    p.set_defaults(func=cmd_reload)

    q = sub.add_parser("queue", help="the embedded queue store: list, browse, put, get, clear")
    q.add_argument("--config", "-c", type=Path, help="gateway configuration (its data_dir and queue definitions)")
    q.add_argument("--data-dir", type=Path)
    qs = q.add_subparsers(dest="queue_action", metavar="ACTION")
    qs.required = True
    a = qs.add_parser("list", help="queues with their depth")
    a.add_argument("--json", action="store_true")
    a.set_defaults(func=cmd_queue_list)
    a = qs.add_parser("browse", help="show messages without removing them (like amqsbcg)")
    a.add_argument("queue")
    a.add_argument("--limit", type=int, default=20)
    a.add_argument("--json", action="store_true")
    a.set_defaults(func=cmd_queue_browse)
    a = qs.add_parser("get", help="remove the oldest message and print it")
    a.add_argument("queue")
    a.add_argument("--json", action="store_true")
    a.add_argument("--out", type=Path, help="write the raw MQ message bytes here")
    a.set_defaults(func=cmd_queue_get)
    a = qs.add_parser("put", help="put an MQ message: raw bytes from a file, or one built from a payload")
    a.add_argument("queue")
    src = a.add_mutually_exclusive_group(required=True)
    src.add_argument("--file", type=Path, help="a complete MQ message (MQMD + headers + body)")
    src.add_argument("--payload", help="a text payload; with --topic builds MQMD + RFH2 mqps/Top")
    a.add_argument("--topic", help="publication topic (RFH2 mqps/Top) for --payload")
    a.add_argument("--persistent", action="store_true")
    a.set_defaults(func=cmd_queue_put)
    a = qs.add_parser("clear", help="delete every message on a queue")
    a.add_argument("queue")
    a.set_defaults(func=cmd_queue_clear)

    lg = sub.add_parser("log", help="the conversion log")
    ls = lg.add_subparsers(dest="log_action", metavar="ACTION")
    ls.required = True
    a = ls.add_parser("tail", help="print the last records readably")
    a.add_argument("--config", "-c", type=Path)
    a.add_argument("--data-dir", type=Path)
    a.add_argument("-n", type=int, default=20, help="how many records (default 20)")
    a.add_argument("-f", "--follow", action="store_true", help="keep printing new records")
    a.add_argument("--json", action="store_true", help="print the JSON lines as they are")
    a.set_defaults(func=cmd_log_tail)


def _data_dir(args: argparse.Namespace) -> Path:
    if getattr(args, "data_dir", None) is not None:
        return Path(args.data_dir)
    return Path(load_config(getattr(args, "config", None)).data_dir)


# -- validate / reload -------------------------------------------------------------------------------


def _validate_config(path: Path) -> GatewayConfig | None:
    """Prints the configuration's problems (None) or what it allows."""
    try:
        cfg = load_config(path)
        users = {name: parse_hash(stored) for name, stored in cfg.broker.users.items()}
        if cfg.broker.password_file is not None:
            users.update(read_password_file(cfg.broker.password_file))
        acl = read_acl(cfg.broker.acl_file) if cfg.broker.acl_file is not None else None
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return None
    except AuthFileError as exc:
        for line in exc.problems:
            print(line, file=sys.stderr)
        return None
    print(f"{path}: OK, {len(users)} users")
    if acl is not None:
        print(f"  acl {acl.source}: rules for {len(acl.users)} users, {len(acl.patterns)} patterns; everything "
              "else is refused" + ("" if users else " (no users: every client gets the anonymous rules)"))
    for lst in cfg.broker.listeners:
        if lst.tls is not None and lst.tls.use_identity_as_username:
            print(f"  listener {lst.label()}: the user name is the client certificate's CN")
            continue
        anonymous = "allowed" if cfg.broker.anonymous_allowed(lst) else "refused"
        print(f"  listener {lst.label()}: anonymous clients {anonymous}")
    return cfg


def cmd_validate(args: argparse.Namespace) -> int:
    rules_path = args.rules
    if args.config is not None:
        cfg = _validate_config(args.config)
        if cfg is None:
            return 1
        rules_path = rules_path or cfg.rules
    elif rules_path is None:
        print("mqbridge validate: give a rules file, or -c CONFIG", file=sys.stderr)
        return 2
    try:
        rules = load_rules(rules_path)
    except RulesError as exc:
        for line in exc.problems:
            print(line, file=sys.stderr)
        return 1
    if args.config is not None and cfg.broker.acl_file is not None:
        problems = route_acl_problems(rules, read_acl(cfg.broker.acl_file))   # read above: valid
        for line in problems:
            print(line, file=sys.stderr)
        if problems:
            return 1
    if any(getattr(c, "client", None) == "native" for c in rules.connectors.values()):
        problems = native_problems(rules)   # starts a JVM in this process: only for native connectors
        for line in problems:
            print(f"{rules_path}: {line}", file=sys.stderr)
        if problems:
            return 1
    print(f"{rules_path or '<embedded default rules>'}: OK, {len(rules.connectors)} connectors, "
          f"{len(rules.routes)} routes")
    for r in rules.routes:
        print(f"  {r.name}: {_describe(r.source)} -> {_describe(r.target)}{'' if r.enabled else ' (disabled)'}")
    return 0


def _describe(ep: object) -> str:
    if isinstance(ep, MqttEndpoint):
        return f"mqtt {ep.mqtt}" + (f" (client {ep.client_id})" if ep.client_id else "")
    if getattr(ep, "reply_to", False):   # the envelope's JMSDestination within allow, else the fallback
        fallback = f", else {ep.destination}" if ep.destination else ""  # type: ignore[attr-defined]
        return f"{ep.connector} reply_to ({', '.join(ep.allow)}{fallback})"  # type: ignore[attr-defined]
    return f"{ep.connector} {ep.destination}"  # type: ignore[attr-defined]


def cmd_reload(args: argparse.Namespace) -> int:
    try:
        query = urllib.parse.urlencode([("discard", name) for name in args.discard])
        code, body = admin_request(args, "POST", "/reload" + (f"?{query}" if query else ""))
    except AdminUnavailable as exc:
        print(f"mqbridge: {exc}", file=sys.stderr)
        return 3
    if code != 200:
        errors = body.get("error", body) if isinstance(body, dict) else body
        for line in errors if isinstance(errors, list) else [errors]:
            print(line, file=sys.stderr)
        return 1
    print("reloaded: " + (", ".join(body["reloaded"]) or "no change"))
    return 0


# -- queue --------------------------------------------------------------------------------------------


def _store(args: argparse.Namespace) -> QueueStore:
    """The embedded store, with the queue definitions of -c CONFIG (a put "as queue default" resolves them)."""
    cfg = load_config(getattr(args, "config", None))
    data_dir = Path(args.data_dir) if getattr(args, "data_dir", None) is not None else Path(cfg.data_dir)
    return QueueStore(default_path(data_dir), definition=cfg.embedded.definition).open()


def cmd_queue_list(args: argparse.Namespace) -> int:
    store = _store(args)
    rows = store.queues()
    store.close()
    if args.json:
        print(json.dumps([{"queue": q, "depth": d, "oldest": t} for q, d, t in rows]))
        return 0
    if not rows:
        print("no messages on any queue")
        return 0
    print(f"{'QUEUE':<48} {'DEPTH':>8}  OLDEST")
    for q, d, t in rows:
        oldest = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "-"
        print(f"{q:<48} {d:>8}  {oldest}")
    return 0


def _print_message(data: bytes, as_json: bool, header: str) -> None:
    try:
        msg = decode_message(data)
    except MappingError as exc:
        print(f"{header}: cannot decode: {exc}")
        return
    if as_json:
        print(json.dumps({"header": header, "message": message_as_dict(msg)}, default=str))
    else:
        print(header)
        print(render(data))


def cmd_queue_browse(args: argparse.Namespace) -> int:
    store = _store(args)
    msgs = store.browse(args.queue, args.limit)
    store.close()
    if not msgs:
        print(f"queue {args.queue} is empty", file=sys.stderr)
        return 0
    for m in msgs:
        _print_message(m.data, args.json, f"--- message {m.seq} on {m.queue} (MsgId {m.msg_id.hex()}, "
                                           f"{len(m.data)} bytes, backout count {m.backout_count})")
    return 0


def cmd_queue_get(args: argparse.Namespace) -> int:
    store = _store(args)
    m = store.get(args.queue)
    store.close()
    if m is None:
        print(f"queue {args.queue} is empty (MQRC_NO_MSG_AVAILABLE)", file=sys.stderr)
        return 4
    if args.out:
        args.out.write_bytes(m.data)
    _print_message(m.data, args.json, f"--- message on {m.queue} (MsgId {m.msg_id.hex()}, {len(m.data)} bytes)")
    return 0


def cmd_queue_put(args: argparse.Namespace) -> int:
    if args.file is not None:
        try:
            data = args.file.read_bytes()
        except OSError as exc:
            print(f"mqbridge: {args.file}: {exc.strerror}", file=sys.stderr)
            return 2
        try:
            decode_message(data)
        except MappingError as exc:
            print(f"mqbridge: {args.file} is not an MQ message: {exc}", file=sys.stderr)
            return 2
    else:
        persistence = C.MQPER_PERSISTENT if args.persistent else C.MQPER_NOT_PERSISTENT
        body = args.payload.encode("utf-8")
        if args.topic:
            rfh = Rfh2(folders=(RfhFolder("mqps", (RfhElement("Top", args.topic),)),))
            msg = build_message(Mqmd(persistence=persistence, coded_char_set_id=C.CCSID_UTF8), (rfh,), body,
                                body_format=C.MQFMT_STRING, body_ccsid=C.CCSID_UTF8)
        else:
            msg = build_message(Mqmd(persistence=persistence, coded_char_set_id=C.CCSID_UTF8), (), body,
                                body_format=C.MQFMT_STRING, body_ccsid=C.CCSID_UTF8)
        data = encode_message(msg)
    store = _store(args)
    msg_id = store.put(args.queue, data)
    store.close()
    print(f"put {len(data)} bytes on {args.queue}, MsgId {msg_id.hex()}")
    return 0


def cmd_queue_clear(args: argparse.Namespace) -> int:
    store = _store(args)
    n = store.clear(args.queue)
    store.close()
    print(f"cleared {n} messages from {args.queue}")
    return 0


# -- log tail -------------------------------------------------------------------------------------------


def _format_record(line: str) -> str:
    try:
        r = json.loads(line)
    except ValueError:
        return f"(malformed) {line.rstrip()[:200]}"
    arrow = "<-" if r.get("direction") == "ingress" else "->"
    parts = [r.get("event_time", "?"), f"{r.get('route', '?'):<16}", arrow,
             f"{r.get('source_protocol')}:{r.get('source_type')}",
             f"-> {r.get('target_protocol')}:{r.get('target_type') or '-'}",
             f"{r.get('status', '?').upper():<7}", f"key={r.get('message_key')}",
             f"qos={r.get('qos')}", f"{r.get('source_size')}B"]
    if r.get("latency_us") is not None:
        parts.append(f"{r['latency_us']}us")
    if r.get("destination"):
        parts.append(f"dest={r['destination']}")
    if r.get("reason"):
        parts.append(f"reason={r['reason']!r}")
    for f in r.get("findings") or []:
        parts.append(f"[{f.get('change')} {f.get('name')}: {f.get('detail')}]")
    return " ".join(str(p) for p in parts)


def cmd_log_tail(args: argparse.Namespace) -> int:
    try:
        cfg = load_config(args.config)
    except ConfigError as exc:
        print(f"mqbridge: {exc}", file=sys.stderr)
        return 2
    data_dir = args.data_dir or cfg.data_dir
    directory = cfg.convlog.directory or Path(data_dir) / "convlog"
    files = log_files(directory)
    lines: list[str] = []
    for f in reversed(files):
        lines = f.read_text(encoding="utf-8", errors="replace").splitlines() + lines
        if len(lines) >= args.n:
            break
    for line in lines[-args.n:] if args.n else []:
        print(line if args.json else _format_record(line))
    if not args.follow:
        return 0
    current = files[-1] if files else None
    pos = current.stat().st_size if current else 0
    try:
        while True:
            files = log_files(directory)
            if files and files[-1] != current:
                current, pos = files[-1], 0
            if current is not None and current.stat().st_size > pos:
                with open(current, "rb") as fh:
                    fh.seek(pos)
                    lines, used = complete_lines(fh.read())
                    pos += used   # a line the writer has not finished is read again next time
                for line in lines:
                    print(line if args.json else _format_record(line), flush=True)
            time.sleep(0.5)
    except KeyboardInterrupt:
        return 0


def complete_lines(chunk: bytes) -> tuple[list[str], int]:
    """The whole lines of ``chunk`` (the log writer may be in the middle of one) and how many bytes they
    take; the rest waits for its newline."""
    end = chunk.rfind(b"\n") + 1
    return chunk[:end].decode("utf-8", errors="replace").splitlines(), end

"""`mqbridge inspect` (dump MQ message bytes) and `mqbridge convert` (run one mapping by hand)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bridge.cli.mapping_input import HEADER_STRUC_IDS, ConvertResult, InputError, data_context, mq_message_bytes
from bridge.cli.mapping_table import describe, known_families, load_convert_table
from bridge.cli.mq_dump import as_json, hex_lines, render
from mappings.errors import MappingError

EXIT_OK = 0
EXIT_CONVERSION = 1   # the input was read but could not be decoded or converted (MappingError)
EXIT_USAGE = 2        # bad arguments, unreadable file, unsupported pair, unusable description


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("inspect", help="decode MQ message bytes (MQMD, headers, folders, body)",
                       description="Decode an MQ message file (MQMD followed by the message data), a hex "
                       "dump of one, or a JSON/YAML message description, and print it with byte offsets.")
    p.add_argument("input", metavar="FILE", help="message file, or - for standard input")
    p.add_argument("--json", action="store_true", help="print JSON instead of the readable dump")
    g = p.add_argument_group("message data without an MQMD (found automatically when the data starts "
                             "with an RFH/MDE/DLH header)")
    g.add_argument("--no-mqmd", action="store_true",
                   help="the input is binary message data only (no hex or description parsing)")
    g.add_argument("--format", help="Format of the data (default: guessed from its first header)")
    g.add_argument("--encoding", type=int, help="Encoding of the data: 273 big-endian, 546 little-endian "
                   "(default: guessed from the first header's Version)")
    g.add_argument("--ccsid", type=int, help="CodedCharSetId of the data (default 1208)")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("convert", help="convert one message between MQTT, MQ and JMS",
                       description="Convert a message described in JSON/YAML (or raw payload bytes for MQTT, "
                       "or MQ message bytes) and print the result and what was lost or coerced.")
    p.add_argument("--from", dest="source", required=True, metavar="FAMILY", help="mqtt | mq | jms")
    p.add_argument("--to", dest="target", required=True, metavar="FAMILY", help="mqtt | mq | jms")
    p.add_argument("input", metavar="INPUT", help="input file, or - for standard input")
    p.add_argument("--out", type=Path, help="write the result (bytes, or JSON when the result has no bytes)")
    p.add_argument("--json", action="store_true", help="print one JSON document (result + report)")
    table = load_convert_table(p)
    p.epilog = describe(table)
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.set_defaults(func=cmd_convert, convert_table=table)


def _read_input(name: str) -> bytes:
    if name == "-":
        return sys.stdin.buffer.read()
    try:
        return Path(name).read_bytes()
    except OSError as exc:
        raise InputError(f"{name}: cannot read: {exc.strerror}") from None


def as_json_text(doc: dict[str, Any]) -> str:
    return json.dumps(doc, indent=2, ensure_ascii=False)


def _error(message: str) -> None:
    print(f"mqbridge: error: {message}", file=sys.stderr)


def cmd_inspect(args: argparse.Namespace) -> int:
    try:
        raw = _read_input(args.input)
        data = raw if args.no_mqmd else mq_message_bytes(raw, args.input)
    except InputError as exc:
        _error(str(exc))
        return EXIT_USAGE
    except MappingError as exc:
        _error(f"{args.input}: {exc}")
        return EXIT_CONVERSION
    context = None
    if args.no_mqmd or data[:4] in HEADER_STRUC_IDS:
        context = data_context(data, fmt=args.format, encoding=args.encoding, ccsid=args.ccsid)
    try:
        if args.json:
            print(as_json_text(as_json(data, context)))
        else:
            sys.stdout.write(render(data, context))
    except MappingError as exc:
        _error(f"{args.input}: {exc}")
        return EXIT_CONVERSION
    return EXIT_OK


def _print_result(result: ConvertResult, args: argparse.Namespace) -> None:
    findings = result.report.as_list()
    if args.json:
        doc: dict[str, object] = {"result": result.document, "report": findings}
        if result.data is not None:
            doc["hex"] = result.data.hex().upper()
        if result.notes:
            doc["notes"] = list(result.notes)
        print(as_json_text(doc))
        return
    readable_document = result.document is not None and (result.data is None or result.data_is_payload)
    if result.data is not None and args.out is None and not result.data_is_payload:
        print(f"{len(result.data)} bytes:")
        print("\n".join(hex_lines(result.data)))
    elif readable_document and (args.out is None or result.data is not None):
        print(as_json_text(result.document))  # type: ignore[arg-type]
    if result.data is not None and args.out is not None:
        print(f"wrote {len(result.data)} bytes to {args.out}")
    for note in result.notes:
        print(f"note: {note}")
    if findings:
        print("report:")
        for f in findings:
            detail = f" ({f['detail']})" if f["detail"] else ""
            print(f"  {f['change']:<9} {f['name']}{detail}")
    else:
        print("report: nothing lost or coerced")


def cmd_convert(args: argparse.Namespace) -> int:
    table = args.convert_table
    entry = table.get((args.source, args.target))
    if entry is None:
        supported = ", ".join(f"{s}->{t}" for s, t in sorted(table))  # details: convert --help
        families = " | ".join(known_families(table))
        _error(f"no converter from {args.source!r} to {args.target!r} (families: {families}; "
               f"available: {supported})")
        return EXIT_USAGE
    try:
        raw = _read_input(args.input)
        result = entry.run(raw, args.input, args)
    except InputError as exc:
        _error(str(exc))
        return EXIT_USAGE
    except MappingError as exc:
        _error(f"{args.input}: {exc}")
        return EXIT_CONVERSION
    if args.out is not None:
        payload = result.data if result.data is not None else (
            json.dumps(result.document, indent=2, ensure_ascii=False) + "\n").encode()
        try:
            args.out.write_bytes(payload)
        except OSError as exc:
            _error(f"{args.out}: cannot write: {exc.strerror}")
            return EXIT_USAGE
    _print_result(result, args)
    return EXIT_OK

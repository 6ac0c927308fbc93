"""`mqbridge convert --from jms --to mq` and `--from mq --to jms`: the JMS <-> MQ entries of the convert table.

JMS messages are read and written in the JMS message JSON form (mappings.jms.message_json, docs/json-forms.md);
MQ messages as message files, hex dumps or JSON/YAML descriptions (bridge.cli.mapping_input.read_mq_message).
The mapping is mappings.conversions.jms_mq (IBM MQ docs "Mapping JMS fields onto IBM MQ fields"; docs/jms-mq.md).
"""
from __future__ import annotations

import argparse
from collections.abc import Iterable

from bridge.cli.mapping_input import ConvertEntry, ConvertResult, InputError, load_description, now_ms, read_mq_message
from mappings.conversions.jms_mq import JmsToMqOptions, MqToJmsOptions, jms_to_mq, mq_to_jms
from mappings.jms.message_json import message_from_dict, message_to_dict
from mappings.mq import constants as C
from mappings.mq.message import encode_message, message_as_dict


def _jms_to_mq(raw: bytes, name: str, args: argparse.Namespace) -> ConvertResult:
    data, _text = load_description(raw, name)
    if not isinstance(data, dict):
        raise InputError(f"{name}: expected a JSON/YAML object describing the JMS message "
                         "(headers, properties, body)")
    message = message_from_dict(data)
    options = JmsToMqOptions(encoding=getattr(args, "jms_mq_encoding", C.MQENC_NORMAL),
                             body_ccsid=getattr(args, "jms_mq_body_ccsid", C.CCSID_UTF8),
                             priority_as_q_def=bool(getattr(args, "priority_as_q_def", False)),
                             with_rfh2=not getattr(args, "no_rfh2", False))
    msg, report = jms_to_mq(message, now_ms=now_ms(args), options=options)
    return ConvertResult(report=report, data=encode_message(msg), document=message_as_dict(msg))


def _mq_to_jms(raw: bytes, name: str, args: argparse.Namespace) -> ConvertResult:
    msg = read_mq_message(raw, name)
    jms, report = mq_to_jms(msg, now_ms=now_ms(args), options=MqToJmsOptions())
    return ConvertResult(report=report, document=message_to_dict(jms), notes=msg.notes)


def _add(group: argparse._ArgumentGroup, parser: argparse.ArgumentParser, flag: str, **kw: object) -> None:
    if flag not in parser._option_string_actions:   # another family may already define a shared flag
        group.add_argument(flag, **kw)  # type: ignore[arg-type]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("JMS <-> MQ (IBM MQ docs \"Mapping JMS fields onto IBM MQ fields\"; docs/jms-mq.md)")
    _add(g, parser, "--now-ms", type=int, metavar="MS",
         help="epoch milliseconds used as the put/receive time (JMSExpiration <-> MQMD.Expiry); "
              "default: the system clock")
    _add(g, parser, "--jms-mq-encoding", type=int, choices=[273, 546], default=C.MQENC_NORMAL,
         help="JMS -> MQ: MQMD/RFH2 Encoding (273 big-endian, as IBM MQ classes for JMS write)")
    _add(g, parser, "--jms-mq-body-ccsid", type=int, default=C.CCSID_UTF8, metavar="CCSID",
         help="JMS -> MQ: CCSID of Text/Map/Stream bodies (default 1208)")
    _add(g, parser, "--priority-as-q-def", action="store_true",
         help="JMS -> MQ: JMSPriority 4 (the JMS default) becomes MQPRI_PRIORITY_AS_Q_DEF")
    _add(g, parser, "--no-rfh2", action="store_true",
         help="JMS -> MQ: no MQRFH2, the MQMD alone (WMQ_TARGET_CLIENT=MQ); what only the RFH2 carries is reported")


def entries() -> Iterable[ConvertEntry]:
    return [
        ConvertEntry("jms", "mq", _jms_to_mq, "JMS message JSON -> MQ message bytes (MQMD + RFH2 mcd/jms/usr, §6.2)"),
        ConvertEntry("mq", "jms", _mq_to_jms, "MQ message -> JMS message JSON (RFH2 wins over MQMD, §6.3)"),
    ]

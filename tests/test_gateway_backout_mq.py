"""A poison MQ message through a running gateway keeps its MQ identity on the backout destination, as IBM
MQ's backout requeue does: MsgId, CorrelId, ReplyToQ, Persistence and its RFH2 folders byte for byte, with
the reason in a ``mqbridge`` folder; on SYSTEM.DEAD.LETTER.QUEUE the reason is an MQDLH (Reason, DestQName,
PutApplName) that DLQ handlers and `mqbridge inspect` read."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from bridge.connectors.embedded import QueueStore, default_path
from mappings.mq import constants as C
from mappings.mq.headers import Mqdlh
from mappings.mq.message import decode_message
from mappings.mq.mqmd import Mqmd, encode_mqmd
from mappings.mq.rfh2 import Rfh2
from tests.support.gateway import GatewayProcess, wait_for

RULES = """\
routes:
  - name: out-rfh2
    from: {queue: OUT.A}
    to: {mqtt: "{topic}"}
  - name: out-dlq
    from: {queue: OUT.B}
    to: {mqtt: "{topic}"}
    options: {backout_destination: {queue: SYSTEM.DEAD.LETTER.QUEUE}}
  - name: out-own-dlq
    from: {queue: OUT.C}
    to: {mqtt: "{topic}"}
    options: {backout_destination: {queue: QM1.DLQ}, backout_dead_letter: true}
"""
CORREL = bytes(range(1, 25))


def _forged(topic: str) -> tuple[bytes, bytes]:
    """An MQ message the route refuses (a '$' topic from a route is never published), with an identity, and
    an RFH2 as an MQ tool may write it (an empty element `<e/>`, single quotes, blank padding); returns the
    message and that usr folder's bytes."""
    usr = b"<usr><e/><n dt='i4'>5</n></usr>"
    usr += b" " * (-len(usr) % 4)
    mqps = f"<mqps><Top>{topic}</Top></mqps>".encode()
    mqps += b" " * (-len(mqps) % 4)
    folders = b"".join(len(f).to_bytes(4, "little") + f for f in (mqps, usr))
    rfh = (b"RFH " + (2).to_bytes(4, "little") + (36 + len(folders)).to_bytes(4, "little")
           + (546).to_bytes(4, "little") + (1208).to_bytes(4, "little") + C.MQFMT_NONE.encode()
           + (0).to_bytes(4, "little") + (1208).to_bytes(4, "little") + folders)
    md = Mqmd(encoding=546, format=C.MQFMT_RF_HEADER_2, persistence=C.MQPER_PERSISTENT, correl_id=CORREL,
              reply_to_q="REPLY.Q", reply_to_q_mgr="QM9", msg_type=C.MQMT_REQUEST)
    return encode_mqmd(md) + rfh + b"payload", usr


def _gateway(gateway_factory: Callable[..., GatewayProcess], tmp_path: Path) -> GatewayProcess:
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    return gateway_factory({"rules": str(rules)})


def test_backout_keeps_the_mq_identity_and_the_folders_bytes(gateway_factory, tmp_path) -> None:
    gw = _gateway(gateway_factory, tmp_path)
    data, extra = _forged("$SYS/broker/uptime")
    assert decode_message(data).rfh2_folder("usr") is not None      # a well-formed message
    store = QueueStore(default_path(gw.data_dir)).open()
    try:
        msg_id = store.put("OUT.A", data)
        wait_for(lambda: store.depth("BACKOUT.out_rfh2") == 1, 15, what="the message on the backout queue")
        backed_raw = store.browse("BACKOUT.out_rfh2")[0].data
    finally:
        store.close()
    backed = decode_message(backed_raw)
    md = backed.md
    assert (md.msg_id, md.correl_id, md.persistence, md.msg_type) == (msg_id, CORREL, C.MQPER_PERSISTENT,
                                                                     C.MQMT_REQUEST)
    assert (md.reply_to_q.strip(), md.reply_to_q_mgr.strip()) == ("REPLY.Q", "QM9")
    assert extra in backed_raw                                      # the folder's bytes as they were
    assert backed.rfh2_folder("mqps").value("Top") == "$SYS/broker/uptime"
    reason = backed.rfh2_folder("mqbridge")
    assert reason is not None and reason.value("Route") == "out-rfh2" and "'$'" in (reason.value("Reason") or "")
    assert backed.body == b"payload"


@pytest.mark.parametrize(("source", "dlq"), [("OUT.B", "SYSTEM.DEAD.LETTER.QUEUE"), ("OUT.C", "QM1.DLQ")])
def test_backout_to_the_dead_letter_queue_has_an_mqdlh(gateway_factory, tmp_path, source, dlq) -> None:
    gw = _gateway(gateway_factory, tmp_path)
    data, extra = _forged("$SYS/forged")
    store = QueueStore(default_path(gw.data_dir)).open()
    try:
        msg_id = store.put(source, data)
        wait_for(lambda: store.depth(dlq) == 1, 15, what="the message on the DLQ")
        backed_raw = store.browse(dlq)[0].data
    finally:
        store.close()
    backed = decode_message(backed_raw)
    assert backed.md.format == C.MQFMT_DEAD_LETTER_HEADER and backed.md.msg_id == msg_id
    assert backed.md.correl_id == CORREL and backed.md.reply_to_q.strip() == "REPLY.Q"
    dlh = backed.headers[0]
    assert isinstance(dlh, Mqdlh)
    assert dlh.reason == 2110 and dlh.put_appl_name.strip() == "mqbridge"   # MQRC_FORMAT_ERROR: not convertible
    assert dlh.dest_q_name.strip() == source and dlh.format == C.MQFMT_RF_HEADER_2   # where a RETRY puts it
    assert len(dlh.put_date.strip()) == 8 and dlh.put_date.strip().isdigit()
    assert isinstance(backed.headers[1], Rfh2) and extra in backed_raw and backed.body == b"payload"
    path = tmp_path / "dlq.bin"
    path.write_bytes(backed_raw)
    out = gw.cli("inspect", str(path))
    assert out.returncode == 0, out.stderr
    assert "MQDLH" in out.stdout and "2110" in out.stdout and "mqbridge" in out.stdout


def test_a_message_past_the_backout_threshold_reaches_the_dead_letter_queue_with_reason_2362(
        gateway_factory, tmp_path) -> None:
    """An MQ application got the message under syncpoint and backed it out three times (the route's default
    backout_threshold): the route sends it on to the dead-letter queue with MQRC_BACKOUT_THRESHOLD_REACHED."""
    gw = _gateway(gateway_factory, tmp_path)
    data, _ = _forged("fine/topic")                  # convertible: only its BackoutCount makes it poison
    store = QueueStore(default_path(gw.data_dir)).open()
    try:
        msg_id = store.put("HELD.B", data)           # no route reads HELD.B
        for _ in range(3):
            (got,) = store.get_locked("HELD.B")
            store.backout([got.seq])
        store.move(got.seq, "OUT.B")
        wait_for(lambda: store.depth("SYSTEM.DEAD.LETTER.QUEUE") == 1, 15, what="the message on the DLQ")
        backed = decode_message(store.browse("SYSTEM.DEAD.LETTER.QUEUE")[0].data)
    finally:
        store.close()
    dlh = backed.headers[0]
    assert isinstance(dlh, Mqdlh) and backed.md.msg_id == msg_id
    assert (dlh.reason, dlh.dest_q_name.strip()) == (2362, "OUT.B")   # MQRC_BACKOUT_THRESHOLD_REACHED
    assert backed.md.backout_count == 3 and backed.body == b"payload"

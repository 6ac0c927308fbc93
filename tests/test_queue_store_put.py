"""What a put to the embedded queue store changes in the message, in either byte order: MsgId when MQMI_NONE,
Priority and Persistence "as queue default" from each queue's own definition, PutDate and PutTime; every other
byte as given (IBM MQ docs "MQMD - Priority", "MQMD - Persistence", "MQMD - MsgId")."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from bridge.connectors.embedded import QueueStore, QueueStoreError
from mappings.mq import constants as C
from mappings.mq.message import build_message, decode_message, encode_message
from mappings.mq.mqmd import Mqmd

DEFINITIONS = {"A": (6, True), "B": (2, False)}


@pytest.mark.parametrize("encoding", [C.MQENC_NATIVE, 0x111])   # little-endian (x86), big-endian integers
def test_a_put_stamps_the_msg_id_the_queue_defaults_and_the_put_time(tmp_path: Path, encoding: int) -> None:
    store = QueueStore(tmp_path / "q.sqlite3", definition=lambda queue: DEFINITIONS[queue]).open()
    try:
        as_queue = encode_message(build_message(Mqmd(encoding=encoding, priority=C.MQPRI_PRIORITY_AS_Q_DEF,
                                                     persistence=C.MQPER_PERSISTENCE_AS_Q_DEF), (), b"body"))
        own = encode_message(build_message(Mqmd(encoding=encoding, priority=9, persistence=C.MQPER_NOT_PERSISTENT,
                                                msg_id=b"given".ljust(24, b"\0")), (), b"body"))
        before = time.gmtime()
        for _ in range(2):   # the second time from what the store remembers of each queue's defaults
            for queue in ("A", "B"):
                store.put_many([(queue, as_queue), (queue, own)])
        for queue in ("A", "B"):
            raw = [store.get(queue).data for _ in range(4)]   # type: ignore[union-attr]
            for data, given in zip(raw, (as_queue, own, as_queue, own), strict=True):
                # every byte as given but Priority, Persistence, MsgId (40-72) and PutDate, PutTime (304-320)
                assert len(data) == len(given) and data[:40] == given[:40]
                assert data[72:304] == given[72:304] and data[320:] == given[320:]
            got = [decode_message(data) for data in raw]
            priority, persistent = DEFINITIONS[queue]
            for md in (got[0].md, got[2].md):
                assert (md.priority, md.persistence) == (priority, int(persistent))
                assert md.msg_id.startswith(b"AMQ ") and md.msg_id != C.MQMI_NONE
            assert got[0].md.msg_id != got[2].md.msg_id
            for md in (got[1].md, got[3].md):
                assert (md.priority, md.persistence, md.msg_id) == (9, C.MQPER_NOT_PERSISTENT,
                                                                     b"given".ljust(24, b"\0"))
            for message in got:
                assert message.md.put_date >= time.strftime("%Y%m%d", before) and len(message.md.put_time) == 8
                assert message.body == b"body" and message.md.encoding == encoding
    finally:
        store.close()


def test_a_put_of_what_is_not_an_mq_message_is_refused(tmp_path: Path) -> None:
    store = QueueStore(tmp_path / "q.sqlite3").open()
    try:
        with pytest.raises(QueueStoreError, match="must start with an MQMD"):
            store.put("A", b"XX" + encode_message(build_message(Mqmd(), (), b"body"))[2:])
        assert store.depth("A") == 0
    finally:
        store.close()

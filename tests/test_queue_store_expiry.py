"""The embedded queue store counts MQMD Expiry down as a queue manager does: a get or browse returns what remains
(tenths), and a message whose Expiry has passed is discarded when a get reaches it (IBM MQ docs "MQMD - Expiry")."""
from __future__ import annotations

import time
from pathlib import Path

from bridge.connectors.embedded import QueueStore, _as_got
from mappings.mq import constants as C
from mappings.mq.message import build_message, decode_message, encode_message
from mappings.mq.mqmd import Mqmd


def _data(expiry: int, encoding: int = C.MQENC_NATIVE) -> bytes:
    return encode_message(build_message(Mqmd(expiry=expiry, encoding=encoding), (), b"x"))


def test_remaining_expiry_in_either_byte_order_and_unlimited_untouched() -> None:
    for encoding in (C.MQENC_NATIVE, 0x111):          # little-endian (x86), big-endian integers
        row = (1, "Q", b"id", _data(100, encoding), 1000.0, 0)
        got = _as_got(row, 1003.05)                     # 3.05 s waited: 30 whole tenths gone
        assert got is not None and decode_message(got.data).md.expiry == 70
        assert _as_got(row, 1009.95) is not None and _as_got(row, 1010.0) is None
    unlimited = (2, "Q", b"id", _data(C.MQEI_UNLIMITED), 1000.0, 0)
    got = _as_got(unlimited, 1e9)
    assert got is not None and got.data == unlimited[3]


def test_get_browse_and_get_locked_skip_and_discard_expired(tmp_path: Path) -> None:
    store = QueueStore(tmp_path / "q.sqlite3").open()
    try:
        for queue in ("A", "B"):
            store.put(queue, _data(1))                  # 0.1 s to live
            store.put(queue, _data(600))
        time.sleep(0.3)
        (browsed,) = store.browse("A")                  # browse does not return the expired one
        assert 590 <= decode_message(browsed.data).md.expiry < 600
        got = store.get("A")
        assert got is not None and 590 <= decode_message(got.data).md.expiry < 600
        assert store.depth("A") == 0                    # the expired message was discarded, not left behind
        (locked,) = store.get_locked("B", 10)
        assert 590 <= decode_message(locked.data).md.expiry < 600
        store.confirm([locked.seq])
        assert store.depth("B") == 0
    finally:
        store.close()

"""Reading a running gateway's embedded queue store from a test: the JMS view of a queue's messages."""
from __future__ import annotations

from pathlib import Path

from bridge.connectors.embedded import QueueStore, default_path
from mappings.conversions.jms_mq import mq_bytes_to_jms
from mappings.jms.model import JmsMessage


def jms_messages(data_dir: Path, queue: str) -> list[JmsMessage]:
    """Each message on ``queue`` (up to 100, oldest first) as IBM MQ classes for JMS would read it."""
    store = QueueStore(default_path(data_dir)).open()
    try:
        raws = [m.data for m in store.browse(queue)]
    finally:
        store.close()
    return [mq_bytes_to_jms(raw, now_ms=0)[0] for raw in raws]

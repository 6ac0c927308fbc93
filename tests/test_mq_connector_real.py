"""The IBM MQ connector against a real queue manager, when MQBRIDGE_TEST_QMGR is set to
``conname/channel/qmgr`` (e.g. ``localhost(1414)/DEV.APP.SVRCONN/QM1`` with ``docker compose up mq``;
user/password from MQBRIDGE_TEST_QMGR_USER/_PASSWORD, queue from MQBRIDGE_TEST_QUEUE), skipped with
that reason otherwise."""
from __future__ import annotations

import os

import pytest

import bridge.connectors.mq  # noqa: F401 - registers connector type "mq"
from bridge.connectors.base import Outbound
from bridge.connectors.mq.connection import MqConnection, MqSourceSpec
from bridge.connectors.mq.endpoints import MqSource, MqTarget
from mappings.mq.message import decode_message
from mappings.rules.model import MqConnector
from tests.mq_fake import (
    msg_file,
    run_async,
    usr_n,
)
from tests.mq_support import usr_message

REAL = os.environ.get("MQBRIDGE_TEST_QMGR")
real_qmgr = pytest.mark.skipif(
    not REAL, reason="no IBM MQ queue manager here: set MQBRIDGE_TEST_QMGR=conname/channel/qmgr "
                     "(e.g. localhost(1414)/DEV.APP.SVRCONN/QM1 after `docker compose up mq`)")


def _real_config() -> MqConnector:
    assert REAL
    conname, channel, qmgr = REAL.split("/")
    return MqConnector(type="mq", queue_manager=qmgr, channel=channel, conname=conname,
                       user=os.environ.get("MQBRIDGE_TEST_QMGR_USER", "app"),
                       password=os.environ.get("MQBRIDGE_TEST_QMGR_PASSWORD", "passw0rd"))


@real_qmgr
def test_real_queue_manager_put_get_backout_commit() -> None:
    queue = os.environ.get("MQBRIDGE_TEST_QUEUE", "DEV.QUEUE.1")
    config = _real_config()
    target = MqTarget(MqConnection("real-put", config), {})
    source = MqSource(MqConnection("real-get", config), MqSourceSpec(queue, None, "", {}))
    original = msg_file("jms_text_big_endian")

    async def go() -> None:
        await target.send([Outbound("a", original, queue)])
        first = await source.receive(1)
        await source.backout(first)
        again = await source.receive(1)
        assert again[0].redelivery_count == first[0].redelivery_count + 1
        await source.confirm(again)
        got = decode_message(again[0].message)  # type: ignore[arg-type]
        sent = decode_message(original)
        assert got.body == sent.body and got.md.format == sent.md.format
        assert got.rfh2_folder("jms") is not None
        await source.close()
        await target.close()

    run_async(go())


@real_qmgr
def test_real_queue_manager_selection_string() -> None:
    """The queue manager itself evaluates the route's selector (MQOD SelectionString, MQ V7+)."""
    queue = os.environ.get("MQBRIDGE_TEST_QUEUE", "DEV.QUEUE.1")
    config = _real_config()
    target = MqTarget(MqConnection("real-put", config), {})
    source = MqSource(MqConnection("real-sel", config),
                         MqSourceSpec(queue, None, "", {}, "region = 'eu' AND n > 1"))
    drain = MqSource(MqConnection("real-drain", config), MqSourceSpec(queue, None, "", {}))

    async def go() -> tuple[list[int], list[int]]:
        await target.send([Outbound(str(i), usr_message(i, r), queue) for i, r in enumerate(["eu", "us", "eu"])])
        got = await source.receive(10)
        await source.confirm(got)
        rest = await drain.receive(10)
        await drain.confirm(rest)
        for c in (source, drain, target):
            await c.close()
        return [usr_n(i) for i in got], [usr_n(i) for i in rest]

    assert run_async(go()) == ([2], [0, 1])

"""The native JMS connector's link state (bridge/connectors/jms_native/provider.py): what `mqbridge status`
shows, and that an ExceptionListener of a connection already replaced is not heard (it marked a fresh
connection lost, and a source then never came back)."""
from __future__ import annotations

from bridge.connectors.jms_native.provider import LinkStatus


def test_down_then_up_counts_one_reconnect_and_keeps_the_outage_start() -> None:
    status = LinkStatus()
    first = status.retire()
    status.up()
    assert status.as_dict()["state"] == "up" and status.as_dict()["reconnects"] == 0
    status.lost("provider connection lost: EOF", first)
    since = status.as_dict()["since"]
    status.down("JMS provider: Connection refused")   # the retries while it is away
    shown = status.as_dict()
    assert shown["state"] == "down" and shown["since"] == since and shown["error"] == "JMS provider: Connection refused"
    assert status.broken == "provider connection lost: EOF"
    status.retire()
    status.up()
    shown = status.as_dict()
    assert shown["state"] == "up" and shown["reconnects"] == 1 and shown["error"] is None and status.broken is None


def test_a_listener_of_a_replaced_connection_is_not_heard() -> None:
    status = LinkStatus()
    old = status.retire()
    status.up()
    status.retire()            # the endpoint dropped that connection (and makes another)
    new = status.retire()
    status.up()
    status.lost("late news about the old connection", old)
    assert status.broken is None and status.as_dict()["state"] == "up"
    status.lost("this one", new)
    assert status.broken == "this one" and status.as_dict()["state"] == "down"

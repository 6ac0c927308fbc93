"""The broker's hot path (bridge/mqtt/publish.py) builds Message by position: the parameter order it assumes is
held here, and a publication built that way is the one the keyword form builds."""
from __future__ import annotations

import inspect

from bridge.mqtt.message import Message


def test_message_s_parameters_are_in_the_order_the_publish_path_assumes():
    assert list(inspect.signature(Message).parameters) == [
        "topic", "payload", "qos", "retain", "origin", "store_id", "username", "key_id", "redelivery", "packet_id",
        "props", "expires", "user_via", "items"]


def test_the_positional_form_equals_the_keyword_form():
    props, items = {3: "text/plain"}, b"\x03\x00\x0atext/plain"
    by_name = Message("a/b", b"p", 1, True, "c1", username="u", user_via="password", packet_id=7, props=props,
                      expires=123.5, items=items)
    by_position = Message("a/b", b"p", 1, True, "c1", None, "u", None, 0, 7, props, 123.5, "password", items)
    slots = [s for s in Message.__slots__ if s != "ts"]   # the time it was taken in differs
    assert [getattr(by_position, s) for s in slots] == [getattr(by_name, s) for s in slots]

"""Hot paths build Inbound (and the usual MqttPublication) by position for speed: publication_inbound
(bridge/connectors/mqtt_internal.py) must give exactly what the keyword form gives, for every kind of broker
message (none, MQTT 5 properties, an expiry, retained, re-sent, QoS 0, checked and claimed user names); and the
field order those callers (and the embedded queue's source) assume is held here."""
from __future__ import annotations

import dataclasses
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from bridge.connectors.base import Inbound
from bridge.connectors.mqtt5_fields import publication_fields
from bridge.connectors.mqtt_internal import publication_inbound
from bridge.mqtt import identity
from bridge.mqtt import properties as PR
from bridge.mqtt.message import Message
from mappings.mqtt.publication import MqttPublication


def keyword_form(msg: Message | None, topic: str, payload: bytes, qos: int, retain: bool, dup: bool,
                 pid: int | None, key: str, now: float) -> Inbound:
    """The publication and Inbound with every field named, as the function built them before."""
    origin = msg.origin if msg is not None else None
    own = msg.packet_id if msg is not None else None
    fields = publication_fields(msg, now) if msg is not None else {}
    pub = MqttPublication(topic=topic, payload=payload, qos=qos, retain=retain or (msg is not None and msg.retain),
                          dup=dup, packet_id=(own or pid) if qos else None, client_id=origin,
                          username=msg.username if msg is not None else None,
                          user_authenticated=msg is not None and identity.checked(msg.user_via), **fields)
    return Inbound(key=key, protocol="mqtt", message=pub, source_type="publish", size=len(payload),
                   destination=topic, received=msg.ts if msg is not None else now, client_id=origin,
                   redelivery_count=(msg.redelivery if msg is not None else 0) + (1 if dup else 0), qos=qos,
                   handle=pid)


PROPS = st.one_of(st.none(), st.just({}), st.fixed_dictionaries({}, optional={
    PR.CONTENT_TYPE: st.text(max_size=5), PR.RESPONSE_TOPIC: st.text(min_size=1, max_size=5),
    PR.CORRELATION_DATA: st.binary(max_size=4), PR.PAYLOAD_FORMAT_INDICATOR: st.sampled_from([0, 1]),
    PR.USER_PROPERTY: st.lists(st.tuples(st.text(max_size=3), st.text(max_size=3)), min_size=1, max_size=2)}))


@settings(max_examples=300, deadline=None)
@given(has_msg=st.booleans(), qos=st.sampled_from([0, 1, 2]), retain=st.booleans(), msg_retain=st.booleans(),
       dup=st.booleans(), own_id=st.one_of(st.none(), st.integers(1, 65535)),
       pid=st.one_of(st.none(), st.integers(1, 65535)), origin=st.one_of(st.none(), st.text(max_size=4)),
       username=st.one_of(st.none(), st.text(max_size=4)),
       via=st.sampled_from([None, identity.PASSWORD, identity.CERTIFICATE, identity.ROUTE, identity.CLAIMED]),
       props=PROPS, expires_in=st.one_of(st.none(), st.integers(1, 10_000)), redelivery=st.integers(0, 3))
def test_the_positional_form_equals_the_keyword_form(has_msg: bool, qos: int, retain: bool, msg_retain: bool,
                                                     dup: bool, own_id: int | None, pid: int | None,
                                                     origin: str | None, username: str | None, via: str | None,
                                                     props: dict[int, object] | None, expires_in: int | None,
                                                     redelivery: int) -> None:
    now = time.time()
    msg = None
    if has_msg:
        msg = Message("a/b", b"payload", qos, msg_retain, origin, 3, username, redelivery=redelivery,
                      packet_id=own_id, props=props, expires=None if expires_in is None else now + expires_in + 0.5,
                      user_via=via)
    got = publication_inbound(msg, "a/b", b"payload", qos, retain, dup, pid, "mqtt:3")
    want = keyword_form(msg, "a/b", b"payload", qos, retain, dup, pid, "mqtt:3", now)
    # (an expiry half a second past a whole second: the remaining seconds, rounded up, are the same at both calls)
    if msg is None:   # its receive time is the call's own
        assert now <= got.received <= time.time()
        got.received = want.received
    assert got == want


def test_inbound_s_fields_are_in_the_order_positional_callers_assume():
    """publication_inbound and EmbeddedSource.get pass Inbound's first 13 fields by position."""
    assert [f.name for f in dataclasses.fields(Inbound)][:13] == [
        "key", "protocol", "message", "source_type", "size", "destination", "received", "client_id",
        "redelivery_count", "qos", "persistent", "priority", "handle"]

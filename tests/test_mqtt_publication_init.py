"""MqttPublication's hand-written __init__ (mappings/mqtt/publication.py) stays the dataclass's: every field, in
order, with its default, set by it; the instance stays frozen, hashable and comparable."""
from __future__ import annotations

import dataclasses
import inspect
import pickle

import pytest

from mappings.mqtt.publication import MqttPublication

FIELDS = dataclasses.fields(MqttPublication)


def test_the_signature_is_the_fields_in_order_with_their_defaults() -> None:
    params = list(inspect.signature(MqttPublication.__init__).parameters.values())[1:]
    assert [p.name for p in params] == [f.name for f in FIELDS]
    for p, f in zip(params, FIELDS, strict=True):
        default = f.default if f.default is not dataclasses.MISSING else (
            f.default_factory() if f.default_factory is not dataclasses.MISSING else inspect.Parameter.empty)
        assert p.default == default, p.name


def test_every_field_is_set_positionally_and_by_keyword() -> None:
    values = [object() for _ in FIELDS]
    by_position = MqttPublication(*values)  # type: ignore[arg-type]
    by_keyword = MqttPublication(**{f.name: v for f, v in zip(FIELDS, values, strict=True)})  # type: ignore[arg-type]
    for f, v in zip(FIELDS, values, strict=True):
        assert getattr(by_position, f.name) is v and getattr(by_keyword, f.name) is v


def test_defaults_and_the_dataclass_behaviour_stay() -> None:
    pub = MqttPublication("a/b")
    assert (pub.payload, pub.qos, pub.retain, pub.user_properties, pub.packet_id) == (b"", 0, False, (), None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        pub.qos = 1  # type: ignore[misc]
    other = MqttPublication("a/b", user_properties=(("k", "v"),))
    assert dataclasses.replace(other, qos=1) == MqttPublication("a/b", qos=1, user_properties=(("k", "v"),))
    assert hash(other) == hash(MqttPublication("a/b", user_properties=(("k", "v"),))) and other != pub
    assert pickle.loads(pickle.dumps(other)) == other
    with pytest.raises(TypeError):
        MqttPublication()  # type: ignore[call-arg]

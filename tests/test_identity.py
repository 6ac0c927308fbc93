"""How a user name was established decides whose ACL rules a client or session gets (bridge/mqtt/identity.py):
a certificate's CN and a route's acl_user always count, a password-checked name where a password database
exists, a claimed one never; and which certificate subjects name a user."""
from __future__ import annotations

from pathlib import Path

import pytest

from bridge.config import BrokerConfig
from bridge.mqtt import identity
from bridge.mqtt.auth import Authenticator
from bridge.mqtt.passwords import make_hash

ACL = "topic read public/#\nuser alice\ntopic read plant/alice/#\n"


def authenticator(tmp_path: Path, *, users: bool) -> Authenticator:
    acl = tmp_path / "acl"
    acl.write_text(ACL, encoding="utf-8")
    cfg: dict[str, object] = {"acl_file": str(acl), "listeners": [{"host": "127.0.0.1", "port": 0}]}
    if users:
        cfg["users"] = {"alice": make_hash(b"pw").encode()}
    return Authenticator(BrokerConfig.model_validate(cfg))


@pytest.mark.parametrize(("users", "via", "alices"), [
    (True, identity.PASSWORD, True), (False, identity.CERTIFICATE, True), (True, identity.CERTIFICATE, True),
    (False, identity.ROUTE, True), (True, identity.CLAIMED, False), (False, identity.CLAIMED, False),
    (True, None, True), (False, None, False),   # stored before user_via: as then
])
def test_whose_rules_a_user_name_gets(tmp_path, users, via, alices):
    grants = authenticator(tmp_path, users=users).grants("c1", "alice", via)
    assert grants is not None
    assert grants.may_read("plant/alice/x") is alices
    assert grants.may_read("public/x") is not alices      # else the anonymous rules


@pytest.mark.parametrize(("subject", "user", "why"), [
    (((("organizationName", "plant"),), (("commonName", "alice"),)), "alice", ""),
    (((("organizationName", "plant"),),), None, "has no CN"),
    (((("commonName", "a"),), (("commonName", "b"),)), None, "has 2 CNs"),
    (((("commonName", "al\nice"),),), None, "control characters"),
    (((("commonName", ""),),), None, "empty"),
])
def test_which_certificate_subjects_name_a_user(subject, user, why):
    got, reason = identity.certificate_user({"subject": subject})
    assert got == user and why in reason
    assert identity.certificate_user(None) == (None, "no client certificate")

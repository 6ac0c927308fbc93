"""The broker's own counters ($SYS values, admin status); per-session counters are ``SessionStats``."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(slots=True)
class BrokerStats:
    started: float = 0.0
    received: int = 0
    sent_qos0: int = 0
    connections_total: int = 0
    protocol_errors: int = 0
    dropped: int = 0
    # a persistent publisher's QoS 1 re-sends (DUP=1, same packet id and digest as the last one stored):
    # routed again as redeliveries under the first one's message key
    resends_recognised: int = 0
    # connections closed for leaving more than max_inbound_qos2 (or max_queued_bytes of) QoS 2 unreleased
    inbound_qos2_refused: int = 0
    # ACL (acl.py): publications not routed, subscriptions refused
    acl_denied_publish: int = 0
    acl_denied_subscribe: int = 0
    # QoS 2 deliveries of shared subscriptions sent to a member whose session ended before its PUBREC: MQTT 5.0
    # §4.8.2 forbids sending them to another member (Publisher.reassign)
    shared_qos2_lost: int = 0
    # MQTT 5 clients closed for more unacknowledged QoS 1/2 publications than the Receive Maximum announced
    receive_maximum_exceeded: int = 0

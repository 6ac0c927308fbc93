"""The gateway end to end on its embedded defaults: MQTT -> MQ queue (MQ Telemetry Tables 1-3), MQ queue ->
MQTT (Tables 4-5), poison messages to the backout queue, the conversion log, reload, and a SIGKILL."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable
from pathlib import Path

from bridge.connectors.embedded import QueueStore, default_path
from bridge.convlog import log_files
from bridge.mqtt import packets as P
from mappings.mq import constants as C
from mappings.mq.message import MqMessage, build_message, decode_message, encode_message
from mappings.mq.mqmd import Mqmd
from mappings.mq.rfh2 import Rfh2, RfhElement, RfhFolder
from tests.mq_support import topic_message
from tests.support.gateway import GatewayProcess, wait_for
from tests.support.mqtt_clients import PahoClient, RawClient


def _queue(gw: GatewayProcess) -> QueueStore:
    return QueueStore(default_path(gw.data_dir)).open()


def _records(gw: GatewayProcess) -> list[dict[str, object]]:
    out = []
    for f in log_files(gw.data_dir / "convlog"):
        out.extend(json.loads(line) for line in f.read_text().splitlines() if line)
    return out


def test_mqtt_publication_becomes_mq_message_on_queue(
    gateway: GatewayProcess, clients: Callable[..., PahoClient]
) -> None:
    pub = clients(gateway.port, "sensor-7", username="alice").connect()
    pub.publish("mq/plant/temp", b"21.5", qos=1)
    pub.publish("mq/plant/flag", b"", qos=0)
    store = _queue(gateway)
    wait_for(lambda: store.depth("MQTT.IN") == 2, 10, what="two messages on MQTT.IN")
    msgs = store.browse("MQTT.IN")
    store.close()
    first = decode_message(msgs[0].data)
    # Table 1: Format MQHRF2, UserIdentifier = client id, Priority AS_Q_DEF, Persistence from QoS; the store,
    # as a queue manager at MQPUT, resolved AS_Q_DEF to the queue's default priority (DEFPRTY, 0)
    assert first.md.format.strip() == "MQHRF2"
    assert first.md.user_identifier.strip() == "sensor-7"
    assert first.md.priority == 0
    assert first.md.persistence == C.MQPER_PERSISTENT
    assert first.md.msg_id != C.MQMI_NONE  # the store gave it a MsgId, as a QM does
    # Table 2: mqtt/clientId, qos, msgid (QoS 1/2 only); mqps/Top; no mcd folder
    mqtt = first.rfh2_folder("mqtt")
    assert mqtt is not None and mqtt.value("clientId") == "sensor-7" and mqtt.value("qos") == "1"
    assert mqtt.value("msgid") is not None
    assert first.rfh2_folder("mqps").value("Top") == "mq/plant/temp"  # type: ignore[union-attr]
    assert first.rfh2_folder("mcd") is None
    assert first.body == b"21.5"  # Table 3
    second = decode_message(msgs[1].data)
    assert second.md.persistence == C.MQPER_NOT_PERSISTENT
    assert second.rfh2_folder("mqtt").value("msgid") is None  # type: ignore[union-attr]
    assert second.body == b""


def test_mq_message_on_queue_is_published_to_its_topic(
    gateway: GatewayProcess, clients: Callable[..., PahoClient]
) -> None:
    sub = clients(gateway.port).connect()
    sub.subscribe("alerts/#", 2)
    r = gateway.cli(
        "queue",
        "--data-dir",
        str(gateway.data_dir),
        "put",
        "MQTT.OUT",
        "--payload",
        "door open",
        "--topic",
        "alerts/door",
        "--persistent",
    )
    assert r.returncode == 0, r.stderr
    got = sub.wait_messages(1)
    assert got[0].topic == "alerts/door" and got[0].payload == b"door open"
    assert got[0].qos == 2  # Table 4: PERSISTENT -> 2, min with the subscriber's 2
    # the source is confirmed (removed) only after the broker committed the publication
    store = _queue(gateway)
    wait_for(lambda: store.depth("MQTT.OUT") == 0, 10, what="MQTT.OUT to drain")
    store.close()


def test_poison_message_goes_to_backout_queue_with_reason(
    gateway: GatewayProcess, clients: Callable[..., PahoClient]
) -> None:
    sub = clients(gateway.port).connect()
    sub.subscribe("#", 1)
    store = _queue(gateway)
    # an MQMD whose Format promises an MQRFH2 that is not there: the conversion must fail
    bad = bytearray(decode_and_encode_minimal())
    store.put("MQTT.OUT", bytes(bad))
    wait_for(lambda: store.depth("BACKOUT.mq_to_mqtt") == 1, 10, what="the poison message on the backout queue")
    backed = decode_message(store.browse("BACKOUT.mq_to_mqtt")[0].data)
    folder = backed.rfh2_folder("mqbridge")
    assert folder is not None and "conversion failed" in (folder.value("Reason") or "")
    assert folder.value("Route") == "mq-to-mqtt"
    # the original bytes, unchanged but for what the store set on put (Priority AS_Q_DEF resolved, MsgId,
    # PutDate, PutTime)
    assert len(backed.body) == len(bad) and backed.body[:40] == bad[:40] and backed.body[44:48] == bad[44:48]
    assert backed.body[40:44] == b"\x00\x00\x00\x00" and backed.body[324:] == bad[324:]
    # the route is not blocked: a good message after it still flows
    store.put("MQTT.OUT", topic_message("after/poison", b"ok"))
    got = sub.wait_messages(1)
    assert got[-1].topic == "after/poison"
    store.close()
    records = wait_for(
        lambda: [r for r in _records(gateway) if r["status"] == "backout"],
        10,
        what="a backout record in the conversion log",
    )
    assert "conversion failed" in str(records[0]["reason"])


def decode_and_encode_minimal() -> bytes:
    from mappings.mq.mqmd import Mqmd, encode_mqmd

    return encode_mqmd(Mqmd(format=C.MQFMT_RF_HEADER_2, persistence=C.MQPER_PERSISTENT)) + b"RFH \x00\x00"


def test_conversion_log_ties_ingress_to_egress(gateway: GatewayProcess, clients: Callable[..., PahoClient]) -> None:
    pub = clients(gateway.port, "logger").connect()
    for i in range(5):
        pub.publish(f"mq/log/{i}", f"m{i}".encode(), qos=1)
    recs = wait_for(lambda: len(_records(gateway)) >= 10 and _records(gateway), 10, what="10 log records")
    by_key: dict[str, list[dict[str, object]]] = {}
    for r in recs:
        by_key.setdefault(str(r["message_key"]), []).append(r)
    assert len(by_key) == 5
    for rs in by_key.values():
        assert sorted(str(r["direction"]) for r in rs) == ["egress", "ingress"]
        egress = next(r for r in rs if r["direction"] == "egress")
        assert egress["status"] == "ok" and egress["target_type"] == "MQHRF2"
        assert egress["destination"] == "MQTT.IN" and isinstance(egress["latency_us"], int)
    r = gateway.cli("log", "tail", "--data-dir", str(gateway.data_dir), "-n", "4")
    assert r.returncode == 0 and r.stdout.count("mqtt-to-mq") == 4


def test_reload_swaps_routes_without_restart(
    gateway_factory: Callable[..., GatewayProcess], tmp_path: Path, clients: Callable[..., PahoClient]
) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("routes:\n  - {name: one, from: {mqtt: 'a/#'}, to: {queue: QA}}\n")
    gw = gateway_factory({"rules": str(rules)})
    pub = clients(gw.port).connect()
    pub.publish("a/1", b"x", qos=1)
    store = _queue(gw)
    wait_for(lambda: store.depth("QA") == 1, 10, what="QA to get the first message")
    # an invalid file is refused and the running routes stay
    rules.write_text("routes:\n  - {name: one, from: {mqtt: 'a/#/x'}, to: {queue: QA}}\n")
    r = gw.cli("reload", "--admin", f"http://127.0.0.1:{gw.admin_port}")
    assert r.returncode == 1 and "'#' must be a whole last level" in r.stderr
    pub.publish("a/2", b"y", qos=1)
    wait_for(lambda: store.depth("QA") == 2, 10, what="the old route to keep working")
    # a valid change by SIGHUP
    rules.write_text("routes:\n  - {name: two, from: {mqtt: 'b/#'}, to: {queue: QB}}\n")
    assert gw.proc is not None
    gw.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "rules reloaded" in gw.log(), 10, what="the reload")
    pub.publish("b/1", b"z", qos=1)
    pub.publish("a/3", b"not routed any more", qos=1)
    wait_for(lambda: store.depth("QB") == 1, 10, what="QB to get a message")
    assert store.depth("QA") == 2
    store.close()


def test_validate_command_reports_file_line_and_field(tmp_path: Path, gateway: GatewayProcess) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "connectors:\n  amq: {type: jms}\nroutes:\n  - name: r1\n    from: {mqtt: 'x/#'}\n"
        "    to: {connector: nowhere, queue: Q}\n"
    )
    r = gateway.cli("validate", str(bad))
    assert r.returncode == 1
    assert f"{bad}:6: routes.0.to.connector: connector 'nowhere' is not defined" in r.stderr
    good = tmp_path / "good.yaml"
    good.write_text("routes:\n  - {name: r1, from: {mqtt: 'x/#'}, to: {queue: Q}}\n")
    r = gateway.cli("validate", str(good))
    assert r.returncode == 0 and "1 routes" in r.stdout


def test_sigkill_with_routes_loses_nothing_acknowledged(
    gateway: GatewayProcess, clients: Callable[..., PahoClient]
) -> None:
    pub = clients(gateway.port, "crash-pub", clean_session=False).connect()
    n = 300
    for i in range(n):
        pub.publish(f"mq/crash/{i}", f"{i}".encode(), qos=1, wait=False)
    store = _queue(gateway)
    wait_for(lambda: store.depth("MQTT.IN") >= 50, 20, what="some messages to reach the queue")
    gateway.kill()
    gateway.start()

    def bodies() -> set[bytes]:
        return {decode_message(m.data).body for m in store.browse("MQTT.IN", limit=100_000)}

    # paho retries every unacknowledged publication after the restart: all must arrive (duplicates allowed)
    expected = {f"{i}".encode() for i in range(n)}
    wait_for(lambda: bodies() >= expected, 60, what=f"all {n} messages on MQTT.IN after restart")
    got = bodies()
    store.close()
    assert got == expected


def test_user_identifier_from_user_name(gateway_factory: Callable[..., GatewayProcess], tmp_path: Path,
                                        clients: Callable[..., PahoClient]) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text("routes:\n  - {name: u, from: {mqtt: 'u/#'}, to: {queue: QU},"
                     " options: {user_identifier: user_name}}\n")
    gw = gateway_factory({"rules": str(rules)})
    pub = clients(gw.port, "device-99", username="alice").connect()
    pub.publish("u/1", b"x", qos=1)
    store = _queue(gw)
    wait_for(lambda: store.depth("QU") == 1, 10, what="the message on QU")
    msg = decode_message(store.browse("QU")[0].data)
    store.close()
    assert msg.md.user_identifier.strip() == "alice"          # MQ Telemetry Table 1: MqttConnectOptions.UserName
    assert msg.rfh2_folder("mqtt").value("clientId") == "device-99"   # type: ignore[union-attr]


def test_as_queue_default_is_resolved_at_put_from_the_queue_definition(
        gateway_factory: Callable[..., GatewayProcess], clients: Callable[..., PahoClient], tmp_path: Path) -> None:
    """Priority -1 and Persistence 2 mean "as the queue's definition": a queue manager resolves them at MQPUT,
    so a getter never sees them; the embedded store does the same, from ``embedded.queues`` (before: it kept
    -1 and 2, which MQ -> MQTT read as not persistent and MQ -> JMS as persistent)."""
    gw = gateway_factory({"embedded": {"queues": {"MQTT.IN": {"default_priority": 6, "default_persistence": True}}}})
    clients(gw.port, "sensor-8").connect().publish("mq/plant/p", b"x", qos=1)   # Priority AS_Q_DEF (Table 1)
    store = _queue(gw)
    wait_for(lambda: store.depth("MQTT.IN") == 1, 10, what="the message on MQTT.IN")
    assert decode_message(store.browse("MQTT.IN")[0].data).md.priority == 6
    store.close()
    # a message put by hand "as queue default" for both: the CLI reads the same definitions (-c)
    raw = tmp_path / "m.bin"
    raw.write_bytes(encode_message(MqMessage(Mqmd(format=C.MQFMT_STRING, priority=C.MQPRI_PRIORITY_AS_Q_DEF,
                                                  persistence=C.MQPER_PERSISTENCE_AS_Q_DEF), body=b"y")))
    put = gw.cli("queue", "-c", str(gw.config_path), "put", "MQTT.IN", "--file", str(raw))
    assert put.returncode == 0, put.stderr
    store = _queue(gw)
    md = decode_message(store.browse("MQTT.IN")[1].data).md
    store.close()
    assert (md.priority, md.persistence) == (6, C.MQPER_PERSISTENT)


def test_a_route_cannot_forge_a_dollar_topic(gateway: GatewayProcess, clients: Callable[..., PahoClient]) -> None:
    """An MQ message whose mqps/Top is $SYS/broker/uptime was delivered as a forged statistic: a route's
    publication to a '$' topic goes to the backout queue with the reason instead."""
    sub = clients(gateway.port).connect()
    sub.subscribe("$SYS/broker/uptime", 0)
    sub.subscribe("after/forgery", 1)
    store = _queue(gateway)
    store.put("MQTT.OUT", topic_message("$SYS/broker/uptime", b"forged 999999 seconds"))
    store.put("MQTT.OUT", topic_message("after/forgery", b"ok"))
    wait_for(lambda: any(m.topic == "after/forgery" for m in sub.messages), 10, what="the message after it")
    wait_for(lambda: store.depth("BACKOUT.mq_to_mqtt") == 1, 10, what="the forgery on the backout queue")
    folder = decode_message(store.browse("BACKOUT.mq_to_mqtt")[0].data).rfh2_folder("mqbridge")
    store.close()
    assert folder is not None and "'$'" in (folder.value("Reason") or "")
    assert not [m for m in sub.messages if m.payload == b"forged 999999 seconds"]


def test_mqtt_msgid_is_the_publishers_and_a_retained_publication_says_ret(gateway: GatewayProcess) -> None:
    """MQ Telemetry Table 2: mqtt/msgid is the publisher's MQTT message id (before: the route's own
    delivery id, so 4242 and 777 arrived as 3 and 4), and mqps/Ret=1 marks a retained publication
    (before: never written through the gateway)."""
    raw = RawClient(gateway.port)
    raw.connect("ids-pub")
    for pid, topic, retain in ((4242, "mq/ids/a", False), (777, "mq/ids/b", True)):
        raw.publish(topic, b"x", qos=1, packet_id=pid, retain=retain)
        assert raw.recv() == P.PacketIdOnly(P.PUBACK, pid)
    raw.publish("mq/ids/c", b"y", qos=0)
    store = _queue(gateway)
    wait_for(lambda: store.depth("MQTT.IN") == 3, 10, what="three messages on MQTT.IN")
    msgs = [decode_message(m.data) for m in store.browse("MQTT.IN")]
    store.close()
    by_topic = {m.rfh2_folder("mqps").value("Top"): m for m in msgs}   # type: ignore[union-attr]
    assert by_topic["mq/ids/a"].rfh2_folder("mqtt").value("msgid") == "4242"   # type: ignore[union-attr]
    assert by_topic["mq/ids/b"].rfh2_folder("mqtt").value("msgid") == "777"    # type: ignore[union-attr]
    assert by_topic["mq/ids/c"].rfh2_folder("mqtt").value("msgid") is None     # type: ignore[union-attr]
    assert by_topic["mq/ids/b"].rfh2_folder("mqps").value("Ret") == "1"        # type: ignore[union-attr]
    assert by_topic["mq/ids/a"].rfh2_folder("mqps").value("Ret") is None       # type: ignore[union-attr]


def test_a_delivery_from_mq_takes_the_msgid_packet_id_where_it_is_free(gateway: GatewayProcess) -> None:
    """MQ Telemetry Table 5: the MQTT message id of a QoS 1/2 delivery comes from the last two bytes of the MQ
    MsgId (before: the broker's own allocator numbered it); where the subscriber's session has that id in
    flight already, the session's next free id stands in."""
    def with_msg_id(topic: str, last: int) -> bytes:
        md = Mqmd(persistence=C.MQPER_PERSISTENT, msg_id=b"MQBRIDGE-TEST-ID" + bytes(6) + last.to_bytes(2, "big"))
        rfh = Rfh2(folders=(RfhFolder("mqps", (RfhElement("Top", topic),)),))
        return encode_message(build_message(md, (rfh,), b"t5"))

    raw = RawClient(gateway.port)
    raw.connect("t5-sub")
    raw.subscribe("t5/x", 1)
    store = _queue(gateway)
    store.put("MQTT.OUT", with_msg_id("t5/x", 0x1234))
    first = raw.recv()
    store.put("MQTT.OUT", with_msg_id("t5/x", 0x1234))   # the same id, still in flight: another one
    second = raw.recv()
    store.close()
    assert isinstance(first, P.Publish) and isinstance(second, P.Publish)
    assert first.packet_id == 0x1234 and second.packet_id not in (None, 0x1234)

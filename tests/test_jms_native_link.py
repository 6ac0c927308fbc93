"""The native JMS connector's link state (bridge/connectors/jms_native/provider.py): what `mqbridge status`
shows, and that an ExceptionListener of a connection already replaced is not heard (it marked a fresh
connection lost, and a source then never came back)."""
from __future__ import annotations

from bridge.connectors.jms_native.provider import LinkStatus, missing_class, missing_class_hint, provider_error


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


def test_the_listener_does_not_replace_the_failed_calls_own_reason() -> None:
    """ActiveMQ answers a wrong password twice: the connect call's JMSSecurityException, and then the
    ExceptionListener's vaguer "Force close due to SecurityException on connect"; the link keeps the first
    (seen in CI: the listener's came second and the status no longer named the password)."""
    status = LinkStatus()
    generation = status.retire()
    status.down("JMS provider: User name [app] or password is invalid.")
    status.lost("provider connection lost: Force close due to SecurityException on connect", generation)
    assert status.as_dict()["error"] == "JMS provider: User name [app] or password is invalid."
    assert status.broken is not None   # the connection is still dropped at the worker's next call


class _Throwable:
    """What provider.missing_class reads of a Java exception through JPype: class name, message, cause."""

    def __init__(self, cls: str, message: str | None, cause: _Throwable | None = None) -> None:
        self.cls, self.message, self.cause = cls, message, cause

    def getClass(self) -> _Throwable:  # noqa: N802 - Java's names
        return self

    def getName(self) -> str:  # noqa: N802
        return self.cls

    def getMessage(self) -> str | None:  # noqa: N802
        return self.message

    def getCause(self) -> _Throwable | None:  # noqa: N802
        return self.cause


def test_a_class_missing_from_the_jars_is_found_in_the_failure_and_names_the_jars_setting() -> None:
    wrapped = _Throwable("org.apache.activemq.ConnectionFailedException", "The JMS connection has failed: Unexpected "
                         "error occurred: java.lang.NoClassDefFoundError: org/fusesource/hawtbuf/UTF8Buffer")
    assert missing_class(wrapped) == "org.fusesource.hawtbuf.UTF8Buffer"
    caused = _Throwable("javax.jms.JMSException", "wrapped", _Throwable("java.lang.ClassNotFoundException", "a.B"))
    assert missing_class(caused) == "a.B"
    assert provider_error(wrapped, "connectors.amq").endswith(
        "(connectors.amq.jars: no jar holds class org.fusesource.hawtbuf.UTF8Buffer: a dependency jar left out?)")
    refused = _Throwable("javax.jms.JMSException", "Could not connect to broker URL: Connection refused")
    assert missing_class(refused) is None
    assert provider_error(refused, "connectors.amq") == f"JMS provider: {refused.message}"
    looped = _Throwable("javax.jms.JMSException", None)
    looped.cause = looped   # a cause chain that never ends is read a bounded number of steps
    assert missing_class(looped) is None and missing_class_hint(looped) == "javax.jms.JMSException"


def test_messages_without_a_jms_message_id_get_keys_of_their_own() -> None:
    """JMS lets a producer go without a JMSMessageID: such messages must not share one conversion-log key."""
    from bridge.connectors.jms_native.connector import NativeJmsSource
    from mappings.jms.model import JmsHeaders, JmsMessage, TextBody, TypedMap
    from mappings.rules.model import JmsConnector

    conn = JmsConnector(type="jms", client="native", jars=("client.jar",), connection_factory="a.Factory")
    source = NativeJmsSource(conn, "r", "q")
    without = JmsMessage(JmsHeaders(), TypedMap(what="property"), TextBody("x"))
    keys = {source._inbound(without).key for _ in range(2)}
    assert len(keys) == 2 and all(k.startswith("jms:none-") for k in keys), keys
    with_id = JmsMessage(JmsHeaders(message_id="ID:1"), TypedMap(what="property"), TextBody("x"))
    assert source._inbound(with_id).key == "jms:ID:1"


def test_a_failures_causes_say_what_its_own_message_does_not() -> None:
    """ActiveMQ's ExceptionListener gets IOException "Force close due to SecurityException on connect" whose cause
    is the SecurityException naming the password (seen in CI: status showed only the first); a cause whose
    message is already part of the text adds nothing."""
    security = _Throwable("java.lang.SecurityException", "User name [app] or password is invalid.")
    closed = _Throwable("javax.jms.JMSException", "Force close due to SecurityException on connect",
                        _Throwable("java.io.IOException", "Force close due to SecurityException on connect", security))
    assert provider_error(closed, "connectors.amq") == ("JMS provider: Force close due to SecurityException on "
                                                        "connect: User name [app] or password is invalid.")
    refused = _Throwable("javax.jms.JMSException", "Could not connect: Connection refused",
                         _Throwable("java.net.ConnectException", "Connection refused"))
    assert provider_error(refused, "connectors.amq") == "JMS provider: Could not connect: Connection refused"

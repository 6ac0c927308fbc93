"""The headers, properties and text of a whole batch of received messages, read in one call into the JVM.

Why: reading a message field by field took about 25 JPype calls (ten header getters, the property names one
by one, each value and its class), 70-100 µs a message in a bare loop and more in the gateway, where every call
hands the GIL to the event loop and waits to get it back; the STOMP source parses a frame in a fraction of that.
Like batch.py, the loop is composed from ``java.lang.invoke`` method handles when first needed (Java 9 or later:
``countedLoop``, ``arrayConstructor``, ``empty``), from JMS 1.1 calls only: the ``Message`` header getters,
``getPropertyNames`` and ``getObjectProperty``, and ``TextMessage.getText``. Needs the JVM running.
"""
from __future__ import annotations

import logging
import threading
from typing import Any

log = logging.getLogger("mqbridge.jms")
_lock = threading.Lock()
_built: dict[tuple[str, ...], Any] = {}   # JMSX names -> the reader once built; None when this JVM cannot

# the header getters, in a row's order (objects.to_row reads them so)
HEADERS = ("getJMSDestination", "getJMSDeliveryMode", "getJMSExpiration", "getJMSPriority", "getJMSTimestamp",
           "getJMSMessageID", "getJMSCorrelationID", "getJMSReplyTo", "getJMSType", "getJMSRedelivered")
NAMES, VALUES, JMSX_VALUES, TEXT, CORRELATION_BYTES = range(len(HEADERS), len(HEADERS) + 5)   # the other cells


class BatchRead:
    """``read(messages)``: one ``Object[]`` row per message: the HEADERS' values, then the property names
    (``Object[]`` of String), their values (``Object[]``), the values of ``jmsx`` (null where unset), the
    text of a TextMessage (null for other types: their bodies are read call by call) and the correlation id's
    byte[] form. A JMSException ends the
    call (the messages stay received: read them one by one)."""

    def __init__(self, jmsx: tuple[str, ...]) -> None:
        from jpype import JArray, JClass, JObject, JString

        handles, method_type = JClass("java.lang.invoke.MethodHandles"), JClass("java.lang.invoke.MethodType")
        lookup = handles.publicLookup()

        def cls(name: str) -> Any:
            return JClass(name).class_

        obj, objs, rows = cls("java.lang.Object"), cls("[Ljava.lang.Object;"), cls("[[Ljava.lang.Object;")
        message, messages, string = cls("javax.jms.Message"), cls("[Ljavax.jms.Message;"), cls("java.lang.String")
        void, int_, boolean = (JClass(f"java.lang.{n}").TYPE for n in ("Void", "Integer", "Boolean"))
        of_message = method_type.methodType(obj, message)

        def getter(name: str) -> Any:   # (Message)Object: a header getter, its value boxed
            return lookup.unreflect(message.getMethod(name)).asType(of_message)

        # values of names: (Message m, Object[] names) -> Object[] {m.getObjectProperty((String) names[j])}
        get_property = lookup.findVirtual(message, "getObjectProperty", method_type.methodType(obj, string))
        name_at = handles.arrayElementGetter(objs).asType(method_type.methodType(string, objs, int_))
        property_at = handles.collectArguments(get_property, 1, name_at)          # (m, names, j) -> value
        put = handles.collectArguments(handles.arrayElementSetter(objs), 2, property_at)   # (v, i, m, names, j)
        put = handles.permuteArguments(put, method_type.methodType(void, objs, int_, message, objs), 0, 1, 2, 3, 1)
        body = handles.foldArguments(handles.dropArguments(handles.identity(objs), 1, int_, message, objs), put)
        length = handles.arrayLength(objs)
        values = handles.countedLoop(handles.dropArguments(length, 0, message), handles.dropArguments(
            handles.filterReturnValue(length, handles.arrayConstructor(objs)), 0, message), body)   # (m, names)
        # the property names: Collections.list(m.getPropertyNames()).toArray()
        enumeration, array_list = cls("java.util.Enumeration"), cls("java.util.ArrayList")
        names = handles.filterReturnValue(handles.filterReturnValue(
            lookup.findVirtual(message, "getPropertyNames", method_type.methodType(enumeration)),
            lookup.findStatic(cls("java.util.Collections"), "list", method_type.methodType(array_list, enumeration))),
            lookup.findVirtual(array_list, "toArray", method_type.methodType(objs)))       # (m) -> Object[]
        properties = handles.permuteArguments(handles.collectArguments(values, 1, names),
                                              method_type.methodType(objs, message), 0, 0)   # (m) -> Object[]
        wanted = JArray(JObject)([JString(n) for n in jmsx])
        jmsx_values = handles.insertArguments(values, 1, JArray(JObject)([wanted]))         # (m) -> Object[]
        text_message = cls("javax.jms.TextMessage")
        is_text = lookup.findVirtual(cls("java.lang.Class"), "isInstance", method_type.methodType(boolean, obj)) \
            .bindTo(text_message).asType(method_type.methodType(boolean, message))
        text = handles.guardWithTest(is_text, lookup.findVirtual(text_message, "getText", method_type.methodType(
            string)).asType(of_message), handles.empty(of_message))                        # (m) -> String|null
        # getJMSCorrelationIDAsBytes, null where the provider refuses it (JMS 1.1 lets it throw): the id of a
        # provider that keeps a byte[] one only as bytes (objects.correlation_id reads it so, call by call)
        correlation_bytes = handles.catchException(
            getter("getJMSCorrelationIDAsBytes"), cls("javax.jms.JMSException"),
            handles.dropArguments(handles.empty(of_message), 0, cls("javax.jms.JMSException")))
        cells = [*(getter(h) for h in HEADERS), names.asType(of_message), properties.asType(of_message),
                 jmsx_values.asType(of_message), text, correlation_bytes]
        row = handles.filterArguments(handles.identity(objs).asCollector(objs, len(cells)), 0, *cells)
        row = handles.permuteArguments(row, method_type.methodType(objs, message), *([0] * len(cells)))
        # the batch: rows[i] = row(messages[i])
        row_at = handles.filterReturnValue(handles.arrayElementGetter(messages), row)    # (ms, i) -> Object[]
        put = handles.collectArguments(handles.arrayElementSetter(rows), 2, row_at)      # (v, i, ms, j)
        put = handles.permuteArguments(put, method_type.methodType(void, rows, int_, messages), 0, 1, 2, 1)
        body = handles.foldArguments(handles.dropArguments(handles.identity(rows), 1, int_, messages), put)
        count = handles.arrayLength(messages)
        self._handle = handles.countedLoop(count, handles.filterReturnValue(count, handles.arrayConstructor(rows)),
                                           body)                                         # (Message[]) -> Object[][]
        self._messages, self._args = JArray(JClass("javax.jms.Message")), JArray(JObject)

    def __call__(self, messages: list[Any]) -> Any:
        # one argument that is an array: wrapped, or invokeWithArguments would spread it as its varargs
        return self._handle.invokeWithArguments(self._args([self._messages(messages)]))


def batch_read(jmsx: tuple[str, ...]) -> BatchRead | None:
    """The JVM's BatchRead for these JMSX names, built once; None when it cannot be (a Java 8 JVM): the source
    then reads each message call by call."""
    with _lock:
        if jmsx not in _built:
            try:
                _built[jmsx] = BatchRead(jmsx)
            except Exception as exc:   # noqa: BLE001 - any failure leaves the call-by-call path, which works
                log.warning("JMS native: messages read call by call (the batch handle could not be built: %s)", exc)
                _built[jmsx] = None
        return _built[jmsx]


__all__ = ["CORRELATION_BYTES", "HEADERS", "JMSX_VALUES", "NAMES", "TEXT", "VALUES", "BatchRead", "batch_read"]

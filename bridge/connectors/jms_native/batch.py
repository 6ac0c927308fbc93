"""A whole batch of TextMessages created, given their properties and sent in one call into the JVM.

Why: every JPype call releases the GIL and takes it back, and taking it back waits while the event loop
holds it, so a target making four calls a message (create, two properties, send) waited far longer than
the JVM worked (bench/HISTORY.md, 2026-11-26 session 12: 314 µs a message in the gateway, 491 µs in a
bare loop beside a busy Python thread; 58 µs with this). The loop is composed from ``java.lang.invoke``
method handles (``MethodHandles.countedLoop``, Java 9 or later) when first needed: the JRE has all of it,
no class is compiled. The calls are the JMS 1.1 API's: ``Session.createTextMessage(String)``,
``Message.setObjectProperty`` (an objectified primitive keeps its type: JMS 1.1 §3.5.4) and
``MessageProducer.send(Message, int, int, long)``. Needs the JVM running.
"""
from __future__ import annotations

import logging
import threading
from typing import Any

log = logging.getLogger("mqbridge.jms")
_lock = threading.Lock()
_built: list[Any] = []   # [the batch handle] once built; [None] when this JVM cannot build it


class BatchSend:
    """``send(session, producers, texts, names, values, modes, priorities, ttls)``: message ``i`` is
    ``session.createTextMessage(texts[i])`` with property ``names[i][j]`` set to ``values[i][j]`` (boxed Java
    values), sent by ``producers[i]`` with ``modes[i]``, ``priorities[i]`` and ``ttls[i]``. A JMSException
    ends the call (the messages before it were sent in the session's transaction: roll it back)."""

    def __init__(self) -> None:
        from jpype import JArray, JClass, JInt, JLong, JObject, JString

        handles, method_type = JClass("java.lang.invoke.MethodHandles"), JClass("java.lang.invoke.MethodType")
        lookup = handles.publicLookup()

        def cls(name: str) -> Any:
            return JClass(name).class_

        obj, string, message = cls("java.lang.Object"), cls("java.lang.String"), cls("javax.jms.Message")
        session, producer = cls("javax.jms.Session"), cls("javax.jms.MessageProducer")
        void, int_, long_ = (JClass(f"java.lang.{n}").TYPE for n in ("Void", "Integer", "Long"))
        strings, objects, producers = cls("[Ljava.lang.String;"), cls("[Ljava.lang.Object;"), \
            cls("[Ljavax.jms.MessageProducer;")
        string_rows, object_rows, ints, longs = cls("[[Ljava.lang.String;"), cls("[[Ljava.lang.Object;"), \
            cls("[I"), cls("[J")
        at = handles.arrayElementGetter
        # properties: loop j over (Message m, String[] names, Object[] values): m.setObjectProperty(names[j], values[j])
        set_property = lookup.findVirtual(message, "setObjectProperty", method_type.methodType(void, string, obj))
        h = handles.collectArguments(set_property, 1, at(strings))    # (m, names, j, value)
        h = handles.collectArguments(h, 3, at(objects))               # (m, names, j, values, j)
        body = handles.permuteArguments(h, method_type.methodType(void, int_, message, strings, objects), 1, 2, 0, 3, 0)
        count = handles.dropArguments(handles.dropArguments(handles.arrayLength(strings), 0, message), 2, objects)
        properties = handles.countedLoop(count, None, body)          # (m, names, values)
        # one message: (producer, session, text, names, values, mode, priority, ttl): properties, then send
        send = lookup.findVirtual(producer, "send", method_type.methodType(void, message, int_, int_, long_))
        h = handles.foldArguments(handles.dropArguments(send, 2, strings, objects),
                                  handles.dropArguments(properties, 0, producer))
        create = lookup.findVirtual(session, "createTextMessage", method_type.methodType(
            cls("javax.jms.TextMessage"), string)).asType(method_type.methodType(message, session, string))
        h = handles.collectArguments(h, 1, create)                    # (p, s, text, names, values, mode, prio, ttl)
        # message i of the arrays: each argument taken at index i (the loop's counter, first)
        h = handles.collectArguments(h, 0, at(producers))             # (ps, i, s, text, names, values, mode, prio, ttl)
        h = handles.collectArguments(h, 3, at(strings))               # (ps, i, s, texts, i, names, ...)
        h = handles.collectArguments(h, 5, at(string_rows))           # (.., names[][], i, values, ...)
        h = handles.collectArguments(h, 7, at(object_rows))           # (.., values[][], i, mode, prio, ttl)
        h = handles.collectArguments(h, 9, at(ints))                  # (.., modes, i, prio, ttl)
        h = handles.collectArguments(h, 11, at(ints))                 # (.., prios, i, ttl)
        h = handles.collectArguments(h, 13, at(longs))                # (.., ttls, i)
        loop_type = method_type.methodType(void, int_, producers, session, strings, string_rows, object_rows, ints,
                                           ints, longs)
        body = handles.permuteArguments(h, loop_type, 1, 0, 2, 3, 0, 4, 0, 5, 0, 6, 0, 7, 0, 8, 0)
        count = handles.dropArguments(handles.arrayLength(producers), 1, session, strings, string_rows, object_rows,
                                      ints, ints, longs)
        self._handle = handles.countedLoop(count, None, body)
        self._producers = JArray(JClass("javax.jms.MessageProducer"))
        self._strings, self._objects = JArray(JString), JArray(JObject)
        self._string_rows, self._object_rows = JArray(JArray(JString)), JArray(JArray(JObject))
        self._ints, self._longs = JArray(JInt), JArray(JLong)

    def names(self, names: list[str]) -> Any:
        return self._strings(names)

    def values(self, values: list[Any]) -> Any:
        return self._objects(values)

    def __call__(self, session: Any, producers: list[Any], texts: list[str | None], names: list[Any],
                 values: list[Any], modes: list[int], priorities: list[int], ttls: list[int]) -> None:
        self._handle.invokeWithArguments(
            self._producers(producers), session, self._strings(texts), self._string_rows(names),
            self._object_rows(values), self._ints(modes), self._ints(priorities), self._longs(ttls))


def batch_send() -> BatchSend | None:
    """The JVM's BatchSend, built once; None when it cannot be (a Java 8 JVM has no countedLoop): the target
    then makes one call per step."""
    with _lock:
        if not _built:
            try:
                _built.append(BatchSend())
            except Exception as exc:   # noqa: BLE001 - any failure leaves the call-per-step path, which works
                log.warning("JMS native: one call per message (the batch handle could not be built: %s)", exc)
                _built.append(None)
        return _built[0]


__all__ = ["BatchSend", "batch_send"]

"""A fake of the pymqi/ibmmq class family for the mq connector's tests (no queue manager can run on this
machine: IBM MQ is not packaged by Debian): ``StandInMD`` (the MD class's names, defaults and native
packing, per IBM MQ docs "MQMD - Message descriptor") or IBM's own MD/OD/SD classes loaded from the
``ibmmq`` wheel without its C library, and ``FakeQueueManager`` with ``make_fake_mqi``: QueueManager,
Queue, Topic, Subscription, MD, GMO, PMO, SD, CD, SCO, CSP, MQMIError over an in-memory queue manager
with units of work. It models what the connector relies on (syncpoint, MQCMIT/MQBACK, BackoutCount,
MQRC_CONNECTION_BROKEN, MQRC_NO_MSG_AVAILABLE, MQRC_NOT_AUTHORIZED for set-identity), nothing more.
The test modules' fixtures ``qm`` and ``fake`` are :func:`new_queue_manager` and :func:`install_fake_mqi`."""
from __future__ import annotations

import asyncio
import contextlib
import importlib
import importlib.util
import struct
import sys
import threading
import time
import types
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import bridge.connectors.mq  # noqa: F401 - registers connector type "mq"
from bridge.connectors.base import Inbound
from bridge.connectors.mq import mqi
from bridge.connectors.mq.connection import MqConnection
from mappings.errors import MappingError
from mappings.mq import constants as C
from mappings.rules.model import MqConnector
from mappings.selector.compile import compile_selector
from mappings.selector.views import mq_view

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "messages"
LITTLE = sys.byteorder == "little"

# IBM MQMD field order, pack format and default (MQMD_DEFAULT, v2, native encoding)
MD_LAYOUT: tuple[tuple[str, str, object], ...] = (
    ("_StrucId", "4s", b"MD  "), ("Version", "i", 2), ("Report", "i", 0), ("MsgType", "i", 8),
    ("Expiry", "i", -1), ("Feedback", "i", 0), ("Encoding", "i", 546 if LITTLE else 273),
    ("CodedCharSetId", "i", 0), ("Format", "8s", b""), ("Priority", "i", -1), ("Persistence", "i", 2),
    ("MsgId", "24s", b""), ("CorrelId", "24s", b""), ("BackoutCount", "i", 0), ("ReplyToQ", "48s", b""),
    ("ReplyToQMgr", "48s", b""), ("UserIdentifier", "12s", b""), ("AccountingToken", "32s", b""),
    ("ApplIdentityData", "32s", b""), ("PutApplType", "i", 0), ("PutApplName", "28s", b""),
    ("PutDate", "8s", b""), ("PutTime", "8s", b""), ("ApplOriginData", "4s", b""), ("GroupId", "24s", b""),
    ("MsgSeqNumber", "i", 1), ("Offset", "i", 0), ("MsgFlags", "i", 0), ("OriginalLength", "i", -1),
)


class StandInMD:
    """Stand-in for pymqi.MD / ibmmq.MD when ibmmq is not installed: the same attribute names and
    defaults, packed in native byte order with NUL-padded strings as those classes do."""

    _fmt = struct.Struct("=" + "".join(f for _, f, _ in MD_LAYOUT))

    def __init__(self, **kw: object) -> None:
        for name, _f, default in MD_LAYOUT:
            setattr(self, name, default)
        for k, v in kw.items():
            if not any(k == n for n, _, _ in MD_LAYOUT):
                raise AttributeError(k)
            setattr(self, k, v)

    def pack(self) -> bytes:
        return self._fmt.pack(*(getattr(self, n) for n, _, _ in MD_LAYOUT))

    def unpack(self, buf: bytes) -> StandInMD:
        for (name, _f, _d), v in zip(MD_LAYOUT, self._fmt.unpack(buf), strict=True):
            setattr(self, name, v)
        return self


@contextlib.contextmanager
def isolated_imports() -> Iterator[None]:
    saved_modules, saved_path = dict(sys.modules), list(sys.path)
    try:
        yield
    finally:
        for name in set(sys.modules) - set(saved_modules):
            del sys.modules[name]
        sys.modules.update(saved_modules)
        sys.path[:] = saved_path


def ibmmq_python_layer() -> types.SimpleNamespace | None:
    """IBM's ibmmq MD, OD and SD classes and CMQC/CMQXC constants, loaded from the installed wheel without
    its C extension (which needs libmqm_r.so; OD asks it only for the MQOD version it was built with,
    which a stand-in module answers: 4, the MQ V7+ MQOD with SelectionString). None when ibmmq is not
    installed."""
    spec = importlib.util.find_spec("ibmmq")
    if spec is None or spec.origin is None:
        return None
    pkgdir = Path(spec.origin).parent
    with isolated_imports():
        pkg = types.ModuleType("ibmmq")
        pkg.__path__ = [str(pkgdir)]
        sys.modules["ibmmq"] = pkg
        sys.path.insert(0, str(pkgdir))
        pkg.CMQC = importlib.import_module("ibmmq.CMQC")  # type: ignore[attr-defined]
        pkg.CMQXC = importlib.import_module("ibmmq.CMQXC")  # type: ignore[attr-defined]
        c_ext = types.ModuleType("ibmmq.ibmmqc")
        c_ext.__strucversions__ = {"od": 4}  # type: ignore[attr-defined]
        pkg.ibmmqc = c_ext  # type: ignore[attr-defined]
        sys.modules["ibmmq.ibmmqc"] = sys.modules["ibmmqc"] = c_ext
        md_module = importlib.import_module("mqmd")
        return types.SimpleNamespace(MD=md_module.MD, OD=importlib.import_module("mqod").OD,
                                     SD=importlib.import_module("mqsd").SD,
                                     CMQC=pkg.CMQC, CMQXC=pkg.CMQXC)  # type: ignore[attr-defined]


IBMMQ = ibmmq_python_layer()


class FakeMQMIError(Exception):
    def __init__(self, comp: int, reason: int) -> None:
        super().__init__(f"MQI Error. Comp: {comp}, Reason {reason}")
        self.comp = comp
        self.reason = reason


@dataclass
class Stored:
    md: bytes          # the MD as the queue manager keeps it (packed native structure)
    data: bytes
    seq: int = 0       # arrival order: a backed-out message goes back to its place


def stored_view(md_class: Any, s: Stored) -> dict[str, Any]:  # noqa: ANN401
    """What an MQ V7+ selection string is evaluated against: the JMS view of the message as stored
    (IBM's packed MD + data), the MQMD/RFH2 -> JMS mapping of IBM MQ classes for JMS."""
    return mq_view(mqi.join_message(mqi.read_md(md_class().unpack(s.md)), s.data), time.time())


@dataclass
class FakeQueueManager:
    """In-memory queue manager: queues, topics with durable subscriptions, units of work."""

    md_class: Any
    queues: dict[str, deque[Stored]] = field(default_factory=dict)
    subs: dict[str, str] = field(default_factory=dict)             # subscription name -> topic string
    topic_objects: dict[str, str] = field(default_factory=dict)    # object name -> topic string
    setid_allowed: bool = True
    put_allowed: bool = True
    fail_connects: int = 0
    fail_put_after: int | None = None
    connects: list[dict[str, Any]] = field(default_factory=list)
    opens: list[tuple[str, str, int]] = field(default_factory=list)
    sub_calls: list[dict[str, Any]] = field(default_factory=list)
    selections: dict[str, str | None] = field(default_factory=dict)   # queue or subscription -> SelectionString
    closes: list[tuple[str, int]] = field(default_factory=list)
    commits: int = 0
    backouts: int = 0
    threads: dict[int, set[int]] = field(default_factory=dict)     # connection id -> MQI thread ids
    conns: list[FakeConn] = field(default_factory=list)
    counter: int = 0
    puts: int = 0

    def queue(self, name: str) -> deque[Stored]:
        return self.queues.setdefault(name, deque())

    def arrive(self, name: str, s: Stored) -> None:
        self.counter += 1
        s.seq = self.counter
        self.queue(name).append(s)

    def put_back(self, name: str, s: Stored) -> None:
        """A got message backed out: to its place by arrival order (selection may have skipped others)."""
        q = self.queue(name)
        at = next((i for i, other in enumerate(q) if other.seq > s.seq), len(q))
        q.insert(at, s)

    def preload(self, name: str, data: bytes, backout: int = 0) -> None:
        """A message as another application's committed MQPUT leaves it (MsgId assigned if none)."""
        md, body = mqi.split_message(data)
        values = mqi.md_values(md)
        values["BackoutCount"] = backout
        if md.msg_id == C.MQMI_NONE:
            self.counter += 1
            values["MsgId"] = b"AMQ FAKE        " + self.counter.to_bytes(8, "big")
        self.arrive(name, Stored(self.md_class(**values).pack(), body))

    def break_connections(self) -> None:
        """The network drops every connection: the QM backs out their units of work."""
        for c in self.conns:
            if c.alive:
                c.end_uow(commit=False)
                c.alive = False

    def depth(self, name: str) -> int:
        return len(self.queues.get(name, ()))


@dataclass
class FakeConn:
    qm: FakeQueueManager
    ident: int
    alive: bool = True
    uow_puts: list[tuple[str, Stored]] = field(default_factory=list)
    uow_gets: list[tuple[str, Stored]] = field(default_factory=list)

    def check(self) -> None:
        self.qm.threads.setdefault(self.ident, set()).add(threading.get_ident())
        if not self.alive:
            raise FakeMQMIError(2, mqi.MQRC_CONNECTION_BROKEN)

    def end_uow(self, commit: bool) -> None:
        if commit:
            for dest, s in self.uow_puts:
                if dest.startswith("topic:"):
                    for name, topic in self.qm.subs.items():
                        if topic == dest[6:]:
                            self.qm.arrive("SUBQ." + name, Stored(s.md, s.data))
                else:
                    self.qm.arrive(dest, s)
        else:   # gets go back to their place in their queue, BackoutCount + 1
            for dest, s in reversed(self.uow_gets):
                md = self.qm.md_class().unpack(s.md)
                md.BackoutCount += 1
                self.qm.put_back(dest, Stored(md.pack(), s.data, s.seq))
        self.uow_puts.clear()
        self.uow_gets.clear()


def make_fake_mqi(qm: FakeQueueManager, *, with_csp: bool = True) -> types.ModuleType:
    """A module with the pymqi/ibmmq names the connector uses; ``with_csp=False`` is the pymqi flavour
    (user/password keyword arguments), True the ibmmq flavour (an MQCSP structure)."""
    mod = types.ModuleType("fake_mqi")

    class _Opts:
        defaults: dict[str, object] = {}

        def __init__(self, **kw: object) -> None:
            for k, v in {**self.defaults, **kw}.items():
                setattr(self, k, v)

    class CD(_Opts):
        defaults = {"ChannelName": b"", "ConnectionName": b"", "ChannelType": 6, "TransportType": 2,
                    "SSLCipherSpec": b"", "Version": 6}

    class SCO(_Opts):
        defaults = {"KeyRepository": b""}

    class CSP(_Opts):
        defaults = {"AuthenticationType": 0, "CSPUserId": None, "CSPPassword": None}

    class PMO(_Opts):
        defaults = {"Options": 0}

    class GMO(_Opts):
        defaults = {"Options": 0, "WaitInterval": 0}

    class SD(_Opts):
        defaults = {"Options": 0, "ObjectName": b""}

        def set_vs(self, name: str, value: bytes, vs_offset: int = 0, vs_buffer_size: int = 0,
                   vs_ccsid: int = 0) -> None:
            assert isinstance(value, bytes)
            setattr(self, name, value)
            setattr(self, name + "VSCCSID", vs_ccsid)

    class StandInOD(_Opts):
        """Used only where ibmmq is absent; otherwise the fake is given IBM's own OD class."""

        defaults = {"Version": 1, "ObjectName": b"", "SelectionStringVSCCSID": 0}

        def set_vs(self, name: str, value: bytes, vs_offset: int = 0, vs_buffer_size: int = 0,
                   vs_ccsid: int = 0) -> None:
            assert isinstance(value, bytes)
            setattr(self, "_" + name, value)
            setattr(self, name + "VSCCSID", vs_ccsid)

        def get_vs(self, name: str) -> bytes | None:
            return getattr(self, "_" + name, None)

    def _selection(value: bytes | None, ccsid: int) -> str | None:
        """MQOPEN/MQSUB checks of a SelectionString: it must parse (else MQRC_SELECTOR_SYNTAX_ERROR)."""
        if not value:
            return None
        assert ccsid == 1208, "the connector passes its selection string as UTF-8"
        text = value.decode("utf-8")
        try:
            compile_selector(text)
        except MappingError:
            raise FakeMQMIError(2, mqi.MQRC_SELECTOR_SYNTAX_ERROR) from None
        return text

    class QueueManager:
        def __init__(self, name: object) -> None:
            assert name is None   # connect later, with options
            self.conn: FakeConn | None = None

        def connect_with_options(self, name: str, **kw: Any) -> None:
            qm.connects.append({"name": name, **kw, "thread": threading.get_ident()})
            if qm.fail_connects:
                qm.fail_connects -= 1
                raise FakeMQMIError(2, mqi.MQRC_HOST_NOT_AVAILABLE)
            self.conn = FakeConn(qm, len(qm.conns))
            qm.conns.append(self.conn)

        def _c(self) -> FakeConn:
            assert self.conn is not None
            self.conn.check()
            return self.conn

        def commit(self) -> None:
            self._c().end_uow(commit=True)
            qm.commits += 1

        def backout(self) -> None:
            self._c().end_uow(commit=False)
            qm.backouts += 1

        def disconnect(self) -> None:
            if self.conn is not None and self.conn.alive:
                self.conn.end_uow(commit=False)   # MQDISC without MQCMIT backs out
                self.conn.alive = False

    def _stamp(conn: FakeConn, md: Any, pmo: Any) -> Stored:  # noqa: ANN401
        assert pmo.Options & mqi.MQPMO_SYNCPOINT
        if qm.fail_put_after is not None and qm.puts >= qm.fail_put_after:
            raise FakeMQMIError(2, 2053)   # MQRC_Q_FULL
        qm.puts += 1
        stored = qm.md_class().unpack(md.pack())
        if stored.MsgId in (b"", bytes(24)):
            qm.counter += 1
            stored.MsgId = b"AMQ FAKE        " + qm.counter.to_bytes(8, "big")
        if not pmo.Options & mqi.MQPMO_SET_IDENTITY_CONTEXT:
            stored.UserIdentifier = b"app".ljust(12)
        stored.PutDate, stored.PutTime = b"20261122", b"04000000"
        md.MsgId = stored.MsgId
        return Stored(stored.pack(), b"")

    def _get(conn: FakeConn, qname: str, md: Any, gmo: Any, selection: str | None = None) -> bytes:  # noqa: ANN401
        """The first message on the queue, or with a selection string the first that matches it; the
        others stay where they are."""
        assert gmo.Options & mqi.MQGMO_SYNCPOINT and gmo.Options & mqi.MQGMO_PROPERTIES_FORCE_MQRFH2
        q = qm.queue(qname)
        sel = compile_selector(selection) if selection is not None else None
        at = next((i for i, s in enumerate(q) if sel is None or sel.matches(stored_view(qm.md_class, s))), None)
        if at is None:
            raise FakeMQMIError(2, mqi.MQRC_NO_MSG_AVAILABLE)
        s = q[at]
        del q[at]
        conn.uow_gets.append((qname, s))
        md.unpack(s.md)
        return s.data

    class Queue:
        def __init__(self, qmgr: QueueManager, desc: str | Any, opts: int) -> None:  # noqa: ANN401
            conn = qmgr._c()
            self.selection: str | None = None
            if isinstance(desc, str):
                name = desc
            else:   # an MQOD: MQ V7+ (Version 4) for a SelectionString, which needs MQOO_INPUT_*
                name = bytes(desc.ObjectName).rstrip(b"\x00 ").decode()
                value = desc.get_vs("SelectionString")
                if value:
                    assert desc.Version >= 4 and opts & mqi.MQOO_INPUT_AS_Q_DEF
                self.selection = _selection(value, desc.SelectionStringVSCCSID)
            qm.opens.append(("queue", name, opts))
            qm.selections[name] = self.selection
            if opts & mqi.MQOO_OUTPUT and not qm.put_allowed or (
                    opts & mqi.MQOO_SET_IDENTITY_CONTEXT and not qm.setid_allowed):
                raise FakeMQMIError(2, mqi.MQRC_NOT_AUTHORIZED)
            self.conn, self.name = conn, name

        def put(self, msg: bytes, md: Any, pmo: Any) -> None:  # noqa: ANN401
            self.conn.check()
            s = _stamp(self.conn, md, pmo)
            self.conn.uow_puts.append((self.name, Stored(s.md, msg)))

        def get(self, max_length: object, md: Any, gmo: Any) -> bytes:  # noqa: ANN401
            assert max_length is None   # whole message, however long
            self.conn.check()
            return _get(self.conn, self.name, md, gmo, self.selection)

        def close(self, options: int = 0) -> None:
            qm.closes.append((self.name, options))

    class Topic:
        def __init__(self, qmgr: QueueManager, topic_name: bytes | str | None = None,
                     topic_string: bytes | str | None = None) -> None:
            self.conn = qmgr._c()
            self.name, self.string = topic_name, topic_string

        def open(self, open_opts: int) -> None:
            base = qm.topic_objects.get(self.name, "") if self.name else ""
            rest = self.string or ""
            self.full = f"{base}/{rest}" if base and rest else base or rest
            qm.opens.append(("topic", f"{self.name}|{self.string}", open_opts))

        def pub(self, msg: bytes, md: Any, pmo: Any) -> None:  # noqa: ANN401
            self.conn.check()
            s = _stamp(self.conn, md, pmo)
            self.conn.uow_puts.append(("topic:" + self.full, Stored(s.md, msg)))

        def close(self, options: int = 0) -> None:
            qm.closes.append((f"topic {self.full}", options))

    class Subscription:
        def __init__(self, qmgr: QueueManager) -> None:
            self.conn = qmgr._c()

        def sub(self, sub_desc: Any) -> None:  # noqa: ANN401
            self.conn.check()
            name = sub_desc.SubName.decode()
            obj = sub_desc.ObjectName.decode() if sub_desc.ObjectName else ""
            base = qm.topic_objects.get(obj, "")
            rest = getattr(sub_desc, "ObjectString", b"").decode()
            self.selection = _selection(getattr(sub_desc, "SelectionString", None),
                                        getattr(sub_desc, "SelectionStringVSCCSID", 0))
            qm.sub_calls.append({"name": name, "options": sub_desc.Options, "object": obj, "string": rest})
            qm.subs[name] = f"{base}/{rest}" if base and rest else base or rest
            qm.selections[name] = self.selection
            self.name = name

        def get(self, max_length: object, md: Any, gmo: Any) -> bytes:  # noqa: ANN401
            self.conn.check()
            return _get(self.conn, "SUBQ." + self.name, md, gmo, self.selection)

        def close(self, sub_close_options: int = 0, close_sub_queue: bool = False) -> None:
            qm.closes.append((f"sub {self.name}", sub_close_options))

    for obj in (CD, SCO, PMO, GMO, SD, QueueManager, Queue, Topic, Subscription):
        setattr(mod, obj.__name__, obj)
    mod.OD = IBMMQ.OD if IBMMQ is not None else StandInOD  # type: ignore[attr-defined]
    if with_csp:
        mod.CSP = CSP  # type: ignore[attr-defined]
    mod.MD = qm.md_class  # type: ignore[attr-defined]
    mod.MQMIError = FakeMQMIError  # type: ignore[attr-defined]
    return mod


MD_CLASS = IBMMQ.MD if IBMMQ is not None else StandInMD   # the fake keeps MDs as IBM's class packs them


def new_queue_manager() -> FakeQueueManager:
    """What the ``qm`` fixture of the test modules gives: a queue manager with the topic object SENSORS."""
    return FakeQueueManager(MD_CLASS, topic_objects={"SENSORS": "sensors"})


def install_fake_mqi(qm: FakeQueueManager, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """What the ``fake`` fixture gives: the fake MQI of ``qm``, which the connector loads from now on."""
    mod = make_fake_mqi(qm)
    monkeypatch.setattr(mqi, "_loaded", mod)   # what load_mqi() returns from now on
    return mod


CONFIG = MqConnector(type="mq", queue_manager="QM1", channel="DEV.APP.SVRCONN", conname="mq(1414)",
                     user="app", password="passw0rd")


def fake_conn(fake: types.ModuleType, config: MqConnector = CONFIG, name: str = "t") -> MqConnection:
    return MqConnection(name, config, mqi_loader=lambda: fake)


def msg_file(name: str = "mqtt_qos1_retained") -> bytes:
    return (FIXTURES / f"{name}.bin").read_bytes()


def run_async(coro: Any) -> Any:  # noqa: ANN401
    return asyncio.run(asyncio.wait_for(coro, 30))


def usr_n(item: Inbound | Stored) -> int:
    """The usr property ``n`` of a received or a still-queued message."""
    if isinstance(item, Inbound):
        data = item.message
    else:
        data = mqi.join_message(mqi.read_md(MD_CLASS().unpack(item.md)), item.data)
    return int(mq_view(data, time.time())["n"])  # type: ignore[arg-type]

"""The IBM MQ connector (bridge/connectors/mq/).

No queue manager can run on this machine (IBM MQ is not packaged by Debian and nothing outside the
package registries can be fetched), so this module tests in three layers:

(a) Our MQ message bytes <-> (MQMD structure, data) against hand-built golden bytes, and against the
    MD class of IBM's ``ibmmq`` package for real when it is installed (its pure-Python layer is loaded
    from the wheel without its C library; pymqi cannot be installed here because it compiles against
    the MQ client headers). Where ibmmq is absent, ``StandInMD`` - the same field names, defaults and
    native packing, written here from mq-wire-facts.md §2 - takes its place, and the golden bytes check
    the stand-in too.
(b) The connector's control flow against ``FakeMqi``, a fake of the pymqi/ibmmq class family
    (QueueManager, Queue, Topic, Subscription, MD, GMO, PMO, SD, CD, SCO, CSP, MQMIError) over an
    in-memory queue manager with units of work. A fake is used ONLY because no real queue manager
    can run here; it models what the connector relies on (syncpoint, MQCMIT/MQBACK, BackoutCount,
    MQRC_CONNECTION_BROKEN, MQRC_NO_MSG_AVAILABLE, MQRC_NOT_AUTHORIZED for set-identity), nothing more.
(c) ``test_real_queue_manager_*`` run against a real queue manager when MQBRIDGE_TEST_QMGR is set to
    ``conname/channel/qmgr`` (e.g. ``localhost(1414)/DEV.APP.SVRCONN/QM1`` with ``docker compose up mq``;
    user/password from MQBRIDGE_TEST_QMGR_USER/_PASSWORD, queue from MQBRIDGE_TEST_QUEUE), skipped with
    that reason otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import importlib.util
import os
import struct
import subprocess
import sys
import threading
import time
import types
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

import bridge.connectors.mq  # noqa: F401 - registers connector type "mq"
from bridge.config import BrokerConfig
from bridge.connectors.base import ConnectorError, Inbound, Outbound, Target
from bridge.connectors.embedded import QueueStore
from bridge.connectors.mq import connection as mq_connection
from bridge.connectors.mq import mqi
from bridge.connectors.mq.connection import MqConnection, MqSourceSpec
from bridge.connectors.mq.endpoints import MqSource, MqTarget
from bridge.connectors.mqtt_internal import route_client_id
from bridge.connectors.registry import CONNECTOR_FACTORIES, RouteSetupError
from bridge.mqtt.broker import Broker
from bridge.mqtt.store import Store
from bridge.routing.router import Router, backout_queue_name
from mappings.conversions.mqtt_mq import subscription_name
from mappings.errors import MappingError
from mappings.mq import constants as C
from mappings.mq.message import decode_message
from mappings.rules.model import MqConnector, parse_rules
from mappings.selector.compile import compile_selector
from mappings.selector.views import mq_view
from tests.mq_support import usr_message

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "messages"
LITTLE = sys.byteorder == "little"


# ---------------------------------------------------------------------------------------------------
# (a) golden bytes, IBM's MD class, the stand-in
# ---------------------------------------------------------------------------------------------------


def _be(v: int) -> bytes:
    return struct.pack(">i", v)


def _le(v: int) -> bytes:
    return struct.pack("<i", v)


MSG_ID = b"AMQ QM1         " + bytes.fromhex("65a1b2c3000012ab")
CORREL_ID = bytes(range(1, 25))
GROUP_ID = b"GROUP-1".ljust(24, b"\x00")


def golden_mqmd(pack: Callable[[int], bytes], encoding: int, *, v2: bool) -> bytes:
    """An MQMD written field by field from the mq-wire-facts.md §2 table (not with our codec)."""
    b = b"MD  " + pack(2 if v2 else 1)
    b += pack(0) + pack(C.MQMT_REQUEST) + pack(600) + pack(0) + pack(encoding) + pack(1208)
    b += b"MQHRF2  " + pack(4) + pack(1)
    b += MSG_ID + CORREL_ID + pack(0)
    b += b"REPLY.Q".ljust(48) + b"QM2".ljust(48) + b"app".ljust(12)
    b += bytes(32) + b"".ljust(32) + pack(28) + b"demo.jar".ljust(28) + b"20231114" + b"22132012" + b"    "
    assert len(b) == 324
    if v2:
        b += GROUP_ID + pack(3) + pack(0) + pack(C.MQMF_MSG_IN_GROUP) + pack(-1)
        assert len(b) == 364
    return b


# the field values an MD structure carries for golden_mqmd (IBM names, as pymqi/ibmmq's MD has them)
GOLDEN_VALUES: dict[str, int | bytes] = {
    "Version": 2, "Report": 0, "MsgType": 1, "Expiry": 600, "Feedback": 0, "CodedCharSetId": 1208,
    "Format": b"MQHRF2  ", "Priority": 4, "Persistence": 1, "MsgId": MSG_ID, "CorrelId": CORREL_ID,
    "BackoutCount": 0, "ReplyToQ": b"REPLY.Q".ljust(48), "ReplyToQMgr": b"QM2".ljust(48),
    "UserIdentifier": b"app".ljust(12), "AccountingToken": bytes(32), "ApplIdentityData": b" " * 32,
    "PutApplType": 28, "PutApplName": b"demo.jar".ljust(28), "PutDate": b"20231114", "PutTime": b"22132012",
    "ApplOriginData": b"    ",
}
V1_TAIL = {"GroupId": bytes(24), "MsgSeqNumber": 1, "Offset": 0, "MsgFlags": 0, "OriginalLength": -1}
V2_TAIL = {"GroupId": GROUP_ID, "MsgSeqNumber": 3, "Offset": 0, "MsgFlags": C.MQMF_MSG_IN_GROUP, "OriginalLength": -1}
DATA = b"RFH \x00\x00\x00\x02 and the rest of the message data, untouched"

# IBM MQMD field order, pack format and default (MQMD_DEFAULT, v2, native encoding)
_MD_LAYOUT: tuple[tuple[str, str, object], ...] = (
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

    _fmt = struct.Struct("=" + "".join(f for _, f, _ in _MD_LAYOUT))

    def __init__(self, **kw: object) -> None:
        for name, _f, default in _MD_LAYOUT:
            setattr(self, name, default)
        for k, v in kw.items():
            if not any(k == n for n, _, _ in _MD_LAYOUT):
                raise AttributeError(k)
            setattr(self, k, v)

    def pack(self) -> bytes:
        return self._fmt.pack(*(getattr(self, n) for n, _, _ in _MD_LAYOUT))

    def unpack(self, buf: bytes) -> StandInMD:
        for (name, _f, _d), v in zip(_MD_LAYOUT, self._fmt.unpack(buf), strict=True):
            setattr(self, name, v)
        return self


@contextlib.contextmanager
def _isolated_imports() -> Iterator[None]:
    saved_modules, saved_path = dict(sys.modules), list(sys.path)
    try:
        yield
    finally:
        for name in set(sys.modules) - set(saved_modules):
            del sys.modules[name]
        sys.modules.update(saved_modules)
        sys.path[:] = saved_path


def _ibmmq_python_layer() -> types.SimpleNamespace | None:
    """IBM's ibmmq MD, OD and SD classes and CMQC/CMQXC constants, loaded from the installed wheel without
    its C extension (which needs libmqm_r.so; OD asks it only for the MQOD version it was built with,
    which a stand-in module answers: 4, the MQ V7+ MQOD with SelectionString). None when ibmmq is not
    installed."""
    spec = importlib.util.find_spec("ibmmq")
    if spec is None or spec.origin is None:
        return None
    pkgdir = Path(spec.origin).parent
    with _isolated_imports():
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


IBMMQ = _ibmmq_python_layer()
MD_CLASSES = [pytest.param(StandInMD, id="stand-in")] + (
    [pytest.param(IBMMQ.MD, id="ibmmq.MD")] if IBMMQ is not None
    else [pytest.param(None, id="ibmmq.MD", marks=pytest.mark.skip(reason="ibmmq is not installed"))])


def test_split_message_gives_the_md_fields_and_the_data_untouched() -> None:
    for pack, encoding in ((_be, C.MQENC_NORMAL), (_le, C.MQENC_REVERSED)):
        md, data = mqi.split_message(golden_mqmd(pack, encoding, v2=False) + DATA)
        assert data == DATA
        assert mqi.md_values(md) == {**GOLDEN_VALUES, "Encoding": encoding, **V1_TAIL}
        md2, data2 = mqi.split_message(golden_mqmd(pack, encoding, v2=True) + DATA)
        assert data2 == DATA
        assert mqi.md_values(md2) == {**GOLDEN_VALUES, "Encoding": encoding, **V2_TAIL}


def test_md_fields_are_the_ibm_names_in_wire_order() -> None:
    assert list(mqi.MD_FIELDS) == [n for n, _, _ in _MD_LAYOUT[1:]]


@pytest.mark.parametrize("md_class", MD_CLASSES)
def test_md_class_packs_our_little_endian_mqmd_byte_for_byte(md_class: Any) -> None:
    if not LITTLE:
        pytest.skip("the MD classes pack in native order; this golden MQMD is little-endian")
    golden = golden_mqmd(_le, C.MQENC_REVERSED, v2=True)
    md, _ = mqi.split_message(golden + DATA)
    assert mqi.make_md(types.SimpleNamespace(MD=md_class), md).pack() == golden  # type: ignore[arg-type]
    # and IBM's class unpacks the golden bytes into the values we expect
    unpacked = md_class().unpack(golden)
    assert {n: getattr(unpacked, n) for n in mqi.MD_FIELDS} == {**GOLDEN_VALUES, "Encoding": 546, **V2_TAIL}


@pytest.mark.parametrize("md_class", MD_CLASSES)
@pytest.mark.parametrize("v2", [False, True], ids=["v1", "v2"])
@pytest.mark.parametrize("order", ["big", "little"])
def test_md_class_round_trip_rebuilds_our_bytes_exactly(md_class: Any, v2: bool, order: str) -> None:
    """What MQPUT + MQGET do to the MQMD: our bytes -> MD -> native structure -> MD -> our bytes."""
    pack, encoding = (_be, C.MQENC_NORMAL) if order == "big" else (_le, C.MQENC_REVERSED)
    original = golden_mqmd(pack, encoding, v2=v2) + DATA
    md, data = mqi.split_message(original)
    native = md_class(**mqi.md_values(md)).pack()
    assert len(native) == 364
    got = md_class()
    got.unpack(native)
    assert mqi.join_message(mqi.read_md(got), data) == original


@pytest.mark.parametrize("md_class", MD_CLASSES)
def test_md_as_c_fills_it_nul_padded_reads_as_blank_padded(md_class: Any) -> None:
    """An MD straight from the library has NUL-padded MQCHARs (b'' packs as NULs); our bytes use blanks."""
    raw = md_class().pack()
    md = mqi.read_md(md_class().unpack(raw))
    assert md.version == 1 and md.format == "        " and md.reply_to_q == ""
    out = mqi.join_message(md, b"")
    assert out[32:40] == b"        " and out[100:148] == b" " * 48 and out[48:72] == bytes(24)


def test_constants_match_ibm_cmqc() -> None:
    if IBMMQ is None:
        pytest.skip("ibmmq is not installed: its CMQC/CMQXC are the reference for these values")
    names = [n for n in dir(mqi) if n.startswith(("MQOO_", "MQPMO_", "MQGMO_", "MQSO_", "MQCO_", "MQCNO_", "MQRC_",
                                                   "MQCSP_", "MQCD_", "MQCHT_", "MQXPT_"))]
    assert len(names) >= 40
    for name in names:
        ref = getattr(IBMMQ.CMQC, name, None)
        if ref is None:
            ref = getattr(IBMMQ.CMQXC, name)
        assert getattr(mqi, name) == ref, name


# ---------------------------------------------------------------------------------------------------
# (b) the fake MQI (no queue manager can run here) and the control flow
# ---------------------------------------------------------------------------------------------------


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


def _stored_view(md_class: Any, s: Stored) -> dict[str, Any]:  # noqa: ANN401
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
        at = next((i for i, s in enumerate(q) if sel is None or sel.matches(_stored_view(qm.md_class, s))), None)
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


@pytest.fixture
def qm() -> FakeQueueManager:
    return FakeQueueManager(MD_CLASS, topic_objects={"SENSORS": "sensors"})


@pytest.fixture
def fake(qm: FakeQueueManager, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    mod = make_fake_mqi(qm)
    monkeypatch.setattr(mqi, "_loaded", mod)   # what load_mqi() returns from now on
    return mod


CONFIG = MqConnector(type="mq", queue_manager="QM1", channel="DEV.APP.SVRCONN", conname="mq(1414)",
                     user="app", password="passw0rd")


def _conn(fake: types.ModuleType, config: MqConnector = CONFIG, name: str = "t") -> MqConnection:
    return MqConnection(name, config, mqi_loader=lambda: fake)


def _message(name: str = "mqtt_qos1_retained") -> bytes:
    return (FIXTURES / f"{name}.bin").read_bytes()


def _run(coro: Any) -> Any:  # noqa: ANN401
    return asyncio.run(asyncio.wait_for(coro, 30))


def test_target_puts_under_syncpoint_and_commits_the_batch(qm: FakeQueueManager, fake: types.ModuleType) -> None:
    msgs = [_message("mqtt_qos1_retained"), _message("jms_text_big_endian"), _message("mqtt_qos0_empty")]
    target = MqTarget(_conn(fake), {})

    async def go() -> None:
        await target.send([Outbound(f"k{i}", m, "DEV.QUEUE.1") for i, m in enumerate(msgs)])
        await target.close()

    _run(go())
    assert qm.commits == 1 and qm.depth("DEV.QUEUE.1") == 3
    assert qm.opens[0] == ("queue", "DEV.QUEUE.1",
                           mqi.MQOO_OUTPUT | mqi.MQOO_FAIL_IF_QUIESCING | mqi.MQOO_SET_IDENTITY_CONTEXT)
    for stored, original in zip(qm.queues["DEV.QUEUE.1"], msgs, strict=True):
        md_sent, data_sent = mqi.split_message(original)
        assert stored.data == data_sent   # headers + body exactly as the mapping library made them
        got = mqi.read_md(MD_CLASS().unpack(stored.md))
        if md_sent.msg_id == C.MQMI_NONE:
            assert got.msg_id.startswith(b"AMQ FAKE")   # the queue manager gave it a MsgId
        else:
            assert got.msg_id == md_sent.msg_id
        assert (got.encoding, got.coded_char_set_id, got.format, got.persistence, got.user_identifier) == (
            md_sent.encoding, md_sent.coded_char_set_id, md_sent.format, md_sent.persistence,
            md_sent.user_identifier)
    conn = qm.connects[0]
    assert conn["name"] == "QM1" and conn["cd"].ChannelName == b"DEV.APP.SVRCONN"
    assert conn["cd"].ConnectionName == b"mq(1414)" and "sco" not in conn
    assert conn["csp"].CSPUserId == "app" and conn["csp"].CSPPassword == "passw0rd"


def test_failed_put_backs_out_the_whole_batch(qm: FakeQueueManager, fake: types.ModuleType) -> None:
    qm.fail_put_after = 1
    target = MqTarget(_conn(fake), {})
    with pytest.raises(ConnectorError, match="2053"):
        _run(target.send([Outbound("a", _message(), "Q"), Outbound("b", _message(), "Q")]))
    assert qm.depth("Q") == 0 and qm.commits == 0 and qm.backouts == 1
    qm.fail_put_after = None
    _run(target.send([Outbound("a", _message(), "Q"), Outbound("b", _message(), "Q")]))
    assert qm.depth("Q") == 2 and qm.commits == 1
    _run(target.close())


def test_pymqi_flavour_gets_user_and_password_and_tls_goes_in_cd_and_sco(qm: FakeQueueManager) -> None:
    fake = make_fake_mqi(qm, with_csp=False)
    config = MqConnector(type="mq", queue_manager="QM1", user="u", password="p",
                         cipher="ANY_TLS12_OR_HIGHER", key_repository="/etc/mqm/key")
    target = MqTarget(_conn(fake, config), {})
    _run(target.send([Outbound("a", _message(), "Q")]))
    _run(target.close())
    conn = qm.connects[0]
    assert conn["user"] == "u" and conn["password"] == "p" and "csp" not in conn
    assert conn["cd"].SSLCipherSpec == b"ANY_TLS12_OR_HIGHER" and conn["cd"].Version >= 7
    assert conn["sco"].KeyRepository == b"/etc/mqm/key"


def test_without_setid_authority_the_put_still_goes_with_default_context(
        qm: FakeQueueManager, fake: types.ModuleType, caplog: pytest.LogCaptureFixture) -> None:
    qm.setid_allowed = False
    target = MqTarget(_conn(fake), {})
    _run(target.send([Outbound("a", _message(), "Q")]))
    _run(target.send([Outbound("b", _message(), "Q")]))
    _run(target.close())
    assert qm.depth("Q") == 2
    assert mqi.read_md(MD_CLASS().unpack(qm.queues["Q"][0].md)).user_identifier == "app"
    assert "+setid" in caplog.text and caplog.text.count("no authority") == 1   # warned once, then cached


def test_no_put_authority_is_a_connector_error_not_a_fallback(qm: FakeQueueManager, fake: types.ModuleType) -> None:
    qm.put_allowed = False
    conn = _conn(fake)
    target = MqTarget(conn, {})
    with pytest.raises(ConnectorError, match="2035"):
        _run(target.send([Outbound("a", _message(), "Q")]))
    assert not conn._no_identity   # the set-identity fallback was tried and did not stick
    assert [o[2] & mqi.MQOO_SET_IDENTITY_CONTEXT for o in qm.opens] == [mqi.MQOO_SET_IDENTITY_CONTEXT, 0]
    _run(target.close())


def test_bytes_that_are_not_an_mq_message_put_nothing_and_are_not_retried(
        qm: FakeQueueManager, fake: types.ModuleType) -> None:
    """Not a ConnectorError (which the router retries forever): the router backs the batch out instead."""
    target = MqTarget(_conn(fake), {})
    with pytest.raises(MappingError, match="StrucId"):
        _run(target.send([Outbound("a", _message(), "Q"), Outbound("b", b"XX" * 200, "Q")]))
    with pytest.raises(TypeError, match="not MQ bytes"):
        _run(target.send([Outbound("c", "text", "Q")]))
    assert qm.connects == [] and qm.depth("Q") == 0
    _run(target.close())


def test_topic_target_opens_the_nearest_admin_topic_object(qm: FakeQueueManager, fake: types.ModuleType) -> None:
    qm.subs["S1"] = "sensors/hall/temp"
    target = MqTarget(_conn(fake), {"SENSORS": "sensors"})
    _run(target.send([Outbound("a", _message(), "topic:sensors/hall/temp"),
                      Outbound("b", _message(), "topic:{topic}")]))   # template: from the RFH2 mqps.Top
    _run(target.close())
    assert [o[1] for o in qm.opens] == ["SENSORS|hall/temp"]   # one open: the template renders the same topic
    assert qm.depth("SUBQ.S1") == 2


def test_topic_object_split() -> None:
    admin = {"SENSORS": "sensors", "HALL": "sensors/hall"}
    assert mq_connection.topic_object(admin, "sensors/hall/temp") == ("HALL", "temp")
    assert mq_connection.topic_object(admin, "sensors/yard") == ("SENSORS", "yard")
    assert mq_connection.topic_object(admin, "sensors") == ("SENSORS", "")
    assert mq_connection.topic_object(admin, "sensorsX/a") == ("", "sensorsX/a")   # level boundaries only
    assert mq_connection.topic_object({}, "a/b") == ("", "a/b")                     # SYSTEM.BASE.TOPIC


def test_source_gets_under_syncpoint_rebuilds_bytes_and_commits(qm: FakeQueueManager, fake: types.ModuleType) -> None:
    originals = [_message("jms_text_big_endian"), _message("mqtt_qos1_retained"), _message("mq_plain_string")]
    for m in originals:
        qm.preload("IN", m)
    source = MqSource(_conn(fake), MqSourceSpec("IN", None, "", {}))

    async def go() -> list[Inbound]:
        items = await source.receive(2)
        assert qm.depth("IN") == 1 and qm.commits == 0   # taken, not yet committed
        await source.confirm(items)
        rest = await source.receive(10)
        await source.confirm(rest)
        await source.close()
        return items + rest

    items = _run(go())
    assert len(items) == 3
    for item, original in zip(items, originals, strict=True):
        md_o, data_o = mqi.split_message(original)
        md_g, data_g = mqi.split_message(item.message)  # type: ignore[arg-type]
        assert data_g == data_o
        if md_o.msg_id == C.MQMI_NONE:
            assert md_g.msg_id.startswith(b"AMQ FAKE")
            md_o = dataclasses.replace(md_o, msg_id=md_g.msg_id)
        if md_o.version == 1:   # byte for byte, the MQMD in its own byte order (LE and BE fixtures)
            assert item.message == mqi.join_message(md_o, data_o)
        else:                   # a v2 MQMD whose v2 fields are defaults comes back as the v1 MQMD
            assert md_g == dataclasses.replace(md_o, version=1)
        assert item.key == f"mq:{md_g.msg_id.hex()}" and item.source_type == md_o.format.strip()
    first = items[0]
    assert first.redelivery_count == 0 and first.destination == "IN" and first.protocol == "mq"
    assert qm.depth("IN") == 0 and qm.commits == 2


def test_backout_raises_backout_count_and_redelivers(qm: FakeQueueManager, fake: types.ModuleType) -> None:
    qm.preload("IN", _message())
    source = MqSource(_conn(fake), MqSourceSpec("IN", None, "", {}))

    async def go() -> list[int]:
        counts = []
        for _ in range(3):
            items = await source.receive(5)
            counts.append(items[0].redelivery_count)
            await source.backout(items)
        await source.close()
        return counts

    assert _run(go()) == [0, 1, 2]
    assert qm.depth("IN") == 1 and qm.backouts >= 3


def test_all_mqi_calls_of_a_connection_run_on_its_one_thread(qm: FakeQueueManager, fake: types.ModuleType) -> None:
    qm.preload("IN", _message())
    source = MqSource(_conn(fake, name="s"), MqSourceSpec("IN", None, "", {}))
    target = MqTarget(_conn(fake, name="t"), {})

    async def go() -> None:
        items = await source.receive(5)
        await target.send([Outbound("a", items[0].message, "OUT")])  # type: ignore[arg-type]
        await source.confirm(items)
        await source.close()
        await target.close()

    _run(go())
    main = threading.get_ident()
    assert len(qm.threads) == 2
    thread_sets = list(qm.threads.values())
    assert all(len(t) == 1 and main not in t for t in thread_sets)
    assert thread_sets[0] != thread_sets[1]
    assert qm.depth("OUT") == 1 and qm.depth("IN") == 0


def test_connection_broken_reconnects_and_redelivers(
        qm: FakeQueueManager, fake: types.ModuleType, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setattr(mq_connection, "RECONNECT_MIN", 0.01)
    qm.preload("IN", _message())
    conn = _conn(fake)
    conn.delay = 0.01
    source = MqSource(conn, MqSourceSpec("IN", None, "", {}))

    async def go() -> tuple[int, int]:
        items = await source.receive(5)
        qm.break_connections()                  # e.g. the queue manager restarts
        await source.confirm(items)             # cannot commit: the QM backed the get out
        assert "deliver" in caplog.text and qm.depth("IN") == 1
        again = await source.receive(5)         # 2009 on the old handle, reconnect, get again
        await source.confirm(again)
        await source.close()
        return again[0].redelivery_count, conn.generation

    redelivered, generation = _run(go())
    assert redelivered == 1 and generation == 2 and qm.depth("IN") == 0 and len(qm.connects) == 2


def test_target_reconnects_after_broken_connection(qm: FakeQueueManager, fake: types.ModuleType) -> None:
    target = MqTarget(_conn(fake), {})
    _run(target.send([Outbound("a", _message(), "Q")]))
    qm.break_connections()
    with pytest.raises(ConnectorError, match="reconnecting"):
        _run(target.send([Outbound("b", _message(), "Q")]))
    _run(target.send([Outbound("b", _message(), "Q")]))   # the router retries the batch: new connection
    _run(target.close())
    assert qm.depth("Q") == 2 and len(qm.connects) == 2


def test_connect_failures_back_off(qm: FakeQueueManager, fake: types.ModuleType) -> None:
    now = [100.0]
    conn = MqConnection("t", CONFIG, mqi_loader=lambda: fake, clock=lambda: now[0])
    qm.fail_connects = 2
    target = MqTarget(conn, {})
    with pytest.raises(ConnectorError, match="MQCONNX to QM1 over DEV.APP.SVRCONN at mq\\(1414\\) failed"):
        _run(target.send([Outbound("a", _message(), "Q")]))
    with pytest.raises(ConnectorError, match="next attempt in 0.5s"):   # no MQCONNX inside the backoff
        _run(target.send([Outbound("a", _message(), "Q")]))
    assert len(qm.connects) == 1
    now[0] += 0.5
    with pytest.raises(ConnectorError, match="failed"):
        _run(target.send([Outbound("a", _message(), "Q")]))
    assert conn.retry_at == pytest.approx(101.5)   # 0.5 s, then 1 s
    now[0] += 1.0
    _run(target.send([Outbound("a", _message(), "Q")]))
    _run(target.close())
    assert len(qm.connects) == 3 and qm.depth("Q") == 1 and conn.delay == mq_connection.RECONNECT_MIN


def test_topic_source_is_a_durable_subscription_named_client_id_colon_topic(
        qm: FakeQueueManager, fake: types.ModuleType) -> None:
    rules = parse_rules("""
connectors:
  qm1: {type: mq, queue_manager: QM1}
routes:
  - name: from-mq-topic
    from: {connector: qm1, topic: sensors/hall/temp}
    to: {mqtt: "plant/{topic}"}
    options: {admin_topics: {SENSORS: sensors}}
""")
    route = rules.routes[0]
    source = CONNECTOR_FACTORIES["mq"](rules, route, route.source, "source")
    assert isinstance(source, MqSource)
    expected = subscription_name(route_client_id("from-mq-topic"), "sensors/hall/temp")
    assert source.spec.subscription == expected and expected.endswith(":sensors/hall/temp")
    target = MqTarget(_conn(fake, name="pub"), {})

    async def go() -> Inbound:
        task = asyncio.ensure_future(source.receive(5))   # subscribes, then waits
        while not qm.sub_calls:
            await asyncio.sleep(0.01)
        await target.send([Outbound("a", _message(), "topic:sensors/hall/temp")])
        items = await task
        await source.confirm(items)
        await source.close()
        await target.close()
        return items[0]

    item = _run(go())
    call = qm.sub_calls[0]
    assert call["name"] == expected and call["object"] == "SENSORS" and call["string"] == "hall/temp"
    want = mqi.MQSO_CREATE | mqi.MQSO_RESUME | mqi.MQSO_DURABLE | mqi.MQSO_MANAGED
    assert call["options"] & want == want
    assert (f"sub {expected}", mqi.MQCO_KEEP_SUB) in qm.closes   # the durable subscription outlives us
    assert item.destination == "topic:sensors/hall/temp"


def test_router_sends_a_message_past_the_backout_threshold_to_the_backout_queue(
        qm: FakeQueueManager, fake: types.ModuleType, tmp_path: Path) -> None:
    """MQBACK raises BackoutCount each time the route fails the batch; at the threshold the router puts
    the message on the backout queue with the reason and commits it off the MQ queue."""
    rules = parse_rules("""
connectors:
  qm1: {type: mq, queue_manager: QM1}
routes:
  - name: mq-in
    from: {connector: qm1, queue: IN}
    to: {mqtt: "out/{topic}"}
    options: {backout_threshold: 2}
""")
    qm.preload("IN", _message())
    BACKOUT = backout_queue_name("mq-in")   # noqa: N806
    store = QueueStore(tmp_path / "q.sqlite3").open()
    executor = ThreadPoolExecutor(2)
    router = Router(None, store, None, "gw", executor)  # type: ignore[arg-type]

    class Broken(Target):
        calls = 0

        async def start(self) -> None:
            return None

        async def send(self, items: list[Outbound]) -> None:
            Broken.calls += 1
            raise RuntimeError("a bug in the target")   # not a ConnectorError: the batch is backed out

    async def go() -> None:
        worker = router.build(rules, rules.routes[0])
        worker.target = Broken()
        await worker.start()
        for _ in range(500):
            if store.depth(BACKOUT) and qm.commits:   # on the backout queue, and committed off IN
                break
            await asyncio.sleep(0.02)
        await worker.stop()

    try:
        _run(go())
        assert Broken.calls == 2 and store.depth(BACKOUT) == 1 and qm.depth("IN") == 0
        backed = decode_message(store.browse(BACKOUT)[0].data)
        assert "backout threshold 2" in (backed.rfh2_folder("mqbridge").value("Reason") or "")  # type: ignore[union-attr]
        assert backed.body.startswith(b"MD  ")   # the original MQ message, whole
    finally:
        store.close()
        executor.shutdown()


def test_backout_destination_on_the_queue_manager(qm: FakeQueueManager, fake: types.ModuleType) -> None:
    """A message already past the threshold goes to an MQ backout queue (put + commit there, then the
    get is committed); stopping the route closes the backout connection too."""
    rules = parse_rules("""
connectors:
  qm1: {type: mq, queue_manager: QM1}
routes:
  - name: mq-in
    from: {connector: qm1, queue: IN}
    to: {mqtt: "out/{topic}"}
    options:
      backout_threshold: 3
      backout_destination: {connector: qm1, queue: DEV.DEAD.LETTER.QUEUE}
""")
    qm.preload("IN", _message(), backout=3)
    executor = ThreadPoolExecutor(1)
    router = Router(None, None, None, "gw", executor)  # type: ignore[arg-type]

    async def go() -> MqTarget:
        worker = router.build(rules, rules.routes[0])
        assert isinstance(worker.backout, MqTarget)
        await worker.start()
        for _ in range(500):
            if qm.depth("DEV.DEAD.LETTER.QUEUE") and qm.commits >= 2:
                break
            await asyncio.sleep(0.02)
        await worker.stop()
        return worker.backout

    try:
        backout = _run(go())
    finally:
        executor.shutdown()
    assert qm.depth("DEV.DEAD.LETTER.QUEUE") == 1 and qm.depth("IN") == 0
    stored = qm.queues["DEV.DEAD.LETTER.QUEUE"][0]
    md = mqi.read_md(MD_CLASS().unpack(stored.md))
    backed = decode_message(mqi.join_message(md, stored.data))
    assert "backout threshold 3" in (backed.rfh2_folder("mqbridge").value("Reason") or "")  # type: ignore[union-attr]
    assert backout.conn._executor is None and backout.conn.qmgr is None   # closed with the route
    assert all(not c.alive for c in qm.conns)


def _n(item: Inbound | Stored) -> int:
    """The usr property ``n`` of a received or a still-queued message."""
    if isinstance(item, Inbound):
        data = item.message
    else:
        data = mqi.join_message(mqi.read_md(MD_CLASS().unpack(item.md)), item.data)
    return int(mq_view(data, time.time())["n"])  # type: ignore[arg-type]


def test_selector_is_the_mqod_selection_string_and_the_rest_stay_in_order(
        qm: FakeQueueManager, fake: types.ModuleType) -> None:
    """MQ V7+ message selection: the queue manager hands out only the matching messages; the others stay
    on the queue, in order, for other consumers. The fake evaluates the SelectionString on the message
    as stored (IBM's packed MD + data) with mappings.selector.compile."""
    for i, region in enumerate(["us", "eu", "eu", "us", "eu", "us"]):
        qm.preload("IN", usr_message(i, region))
    selector = "region = 'eu' AND n > 1"
    source = MqSource(_conn(fake), MqSourceSpec("IN", None, "", {}, selector))

    async def go() -> tuple[list[int], list[int]]:
        first = await source.receive(10)
        await source.backout(first)               # MQBACK: back to their places, BackoutCount 1
        again = await source.receive(10)
        await source.confirm(again)
        await source.close()
        return [_n(i) for i in first], [i.redelivery_count for i in again]

    got, counts = _run(go())
    assert got == [2, 4] and counts == [1, 1]
    assert [_n(s) for s in qm.queues["IN"]] == [0, 1, 3, 5]     # untouched, in arrival order
    assert qm.selections["IN"] == selector
    assert qm.opens[0] == ("queue", "IN", mqi.MQOO_INPUT_AS_Q_DEF | mqi.MQOO_FAIL_IF_QUIESCING)
    if IBMMQ is not None:
        assert fake.OD is IBMMQ.OD     # IBM's own MQOD took our SelectionString (Version 4, UTF-8)


def test_without_a_selector_the_queue_is_opened_by_name(qm: FakeQueueManager, fake: types.ModuleType) -> None:
    qm.preload("IN", usr_message(1, "us"))
    source = MqSource(_conn(fake), MqSourceSpec("IN", None, "", {}))

    async def go() -> int:
        items = await source.receive(5)
        await source.confirm(items)
        await source.close()
        return len(items)

    assert _run(go()) == 1 and qm.selections["IN"] is None


def test_a_selection_string_the_queue_manager_refuses_names_the_selector(
        qm: FakeQueueManager, fake: types.ModuleType) -> None:
    conn = _conn(fake)
    spec = MqSourceSpec("IN", None, "", {}, "region = ")   # the rules file would refuse it first
    with pytest.raises(ConnectorError) as info:
        _run(conn.call(conn._sync_get, spec, 5))
    assert "refused the route's selector 'region = '" in str(info.value) and "2459" in str(info.value)
    _run(conn.close())


def test_route_selector_reaches_the_queue_and_the_subscription(qm: FakeQueueManager, fake: types.ModuleType) -> None:
    rules = parse_rules("""
connectors:
  qm1: {type: mq, queue_manager: QM1}
routes:
  - name: from-q
    from: {connector: qm1, queue: IN}
    to: {mqtt: "out/{topic}"}
    options: {selector: "JMSPriority >= 5"}
  - name: from-topic
    from: {connector: qm1, topic: sensors/hall}
    to: {mqtt: "hall"}
    options: {selector: "region = 'eu'", admin_topics: {SENSORS: sensors}}
""")
    q_route, t_route = rules.routes
    q_source = CONNECTOR_FACTORIES["mq"](rules, q_route, q_route.source, "source")
    t_source = CONNECTOR_FACTORIES["mq"](rules, t_route, t_route.source, "source")
    assert isinstance(q_source, MqSource) and isinstance(t_source, MqSource)
    assert q_source.spec.selector == "JMSPriority >= 5" and t_source.spec.selector == "region = 'eu'"
    qm.preload("IN", usr_message(1, "us", priority=4))
    qm.preload("IN", usr_message(2, "us", priority=7))
    target = MqTarget(_conn(fake, name="pub"), {})

    async def go() -> tuple[list[int], list[int]]:
        from_q = await q_source.receive(10)
        await q_source.confirm(from_q)
        task = asyncio.ensure_future(t_source.receive(10))   # subscribes, then waits
        while not qm.sub_calls:
            await asyncio.sleep(0.01)
        await target.send([Outbound("a", usr_message(3, "us"), "topic:sensors/hall"),
                           Outbound("b", usr_message(4, "eu"), "topic:sensors/hall")])
        from_t = await task
        await t_source.confirm(from_t)
        for c in (q_source, t_source, target):
            await c.close()
        return [_n(i) for i in from_q], [_n(i) for i in from_t]

    from_q, from_t = _run(go())
    assert from_q == [2] and [_n(s) for s in qm.queues["IN"]] == [1]
    assert from_t == [4] and qm.selections[t_route.source.subscription or qm.sub_calls[0]["name"]] == "region = 'eu'"
    assert [_n(s) for s in qm.queues["SUBQ." + qm.sub_calls[0]["name"]]] == [3]   # stays on the managed queue


def test_missing_library_is_one_clear_error() -> None:
    def nothing(name: str) -> types.ModuleType:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)

    with pytest.raises(mqi.MqUnavailable) as err:
        mqi.load_mqi(nothing)
    text = str(err.value)
    assert "pymqi is not installed; ibmmq is not installed" in text
    assert "pip install 'mqbridge[mq]'" in text and "libmqic" in text

    def no_client(name: str) -> types.ModuleType:
        if name == "pymqi":
            raise ModuleNotFoundError("No module named 'pymqi'", name="pymqi")
        try:
            raise ImportError("libmqm_r.so: cannot open shared object file: No such file or directory")
        except ImportError:
            raise ModuleNotFoundError("No module named 'ibmmqc'", name="ibmmqc") from None

    # ibmmq retries a failed relative import, hiding the first error: the missing library is what is shown
    with pytest.raises(mqi.MqUnavailable, match="ibmmq is installed but cannot load: libmqm_r.so: cannot open"):
        mqi.load_mqi(no_client)


def test_missing_client_library_for_real_and_route_setup_names_it(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    """This machine has no MQ client library: the real import fails and the route is refused with the hint."""
    monkeypatch.setattr(mqi, "_loaded", None)
    try:
        mod = mqi.load_mqi()
    except mqi.MqUnavailable as exc:
        text = str(exc)
    else:
        pytest.skip(f"an MQI library loads here ({mod.__name__}): nothing is missing")
    assert "pymqi" in text and "ibmmq" in text and "libmqic" in text
    if IBMMQ is not None:
        assert "libmqm_r.so" in text   # ibmmq is installed, its C client library is not
    rules = parse_rules("""
connectors:
  qm1: {type: mq, queue_manager: QM1}
routes:
  - {name: r, from: {mqtt: "a/#"}, to: {connector: qm1, queue: Q}}
""")
    broker = Broker(BrokerConfig(), Store(tmp_path / "broker.sqlite3"))  # the route's MQTT source reads its limits
    router = Router(broker, None, None, "gw", None)  # type: ignore[arg-type]
    with pytest.raises(RouteSetupError, match="route r: connector 'qm1': IBM MQ is not available"):
        router.build(rules, rules.routes[0])


def test_gateway_imports_no_mqi_library_unless_used() -> None:
    code = ("import sys, bridge.app, bridge.connectors.registry as r; assert 'mq' in r.CONNECTOR_FACTORIES; "
            "print(sorted(m for m in ('pymqi', 'ibmmq') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parent.parent)
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------------------------
# (c) a real queue manager, when one is reachable
# ---------------------------------------------------------------------------------------------------

REAL = os.environ.get("MQBRIDGE_TEST_QMGR")
real_qmgr = pytest.mark.skipif(
    not REAL, reason="no IBM MQ queue manager here: set MQBRIDGE_TEST_QMGR=conname/channel/qmgr "
                     "(e.g. localhost(1414)/DEV.APP.SVRCONN/QM1 after `docker compose up mq`)")


def _real_config() -> MqConnector:
    assert REAL
    conname, channel, qmgr = REAL.split("/")
    return MqConnector(type="mq", queue_manager=qmgr, channel=channel, conname=conname,
                       user=os.environ.get("MQBRIDGE_TEST_QMGR_USER", "app"),
                       password=os.environ.get("MQBRIDGE_TEST_QMGR_PASSWORD", "passw0rd"))


@real_qmgr
def test_real_queue_manager_put_get_backout_commit() -> None:
    queue = os.environ.get("MQBRIDGE_TEST_QUEUE", "DEV.QUEUE.1")
    config = _real_config()
    target = MqTarget(MqConnection("real-put", config), {})
    source = MqSource(MqConnection("real-get", config), MqSourceSpec(queue, None, "", {}))
    original = _message("jms_text_big_endian")

    async def go() -> None:
        await target.send([Outbound("a", original, queue)])
        first = await source.receive(1)
        await source.backout(first)
        again = await source.receive(1)
        assert again[0].redelivery_count == first[0].redelivery_count + 1
        await source.confirm(again)
        got = decode_message(again[0].message)  # type: ignore[arg-type]
        sent = decode_message(original)
        assert got.body == sent.body and got.md.format == sent.md.format
        assert got.rfh2_folder("jms") is not None
        await source.close()
        await target.close()

    _run(go())


@real_qmgr
def test_real_queue_manager_selection_string() -> None:
    """The queue manager itself evaluates the route's selector (MQOD SelectionString, MQ V7+)."""
    queue = os.environ.get("MQBRIDGE_TEST_QUEUE", "DEV.QUEUE.1")
    config = _real_config()
    target = MqTarget(MqConnection("real-put", config), {})
    source = MqSource(MqConnection("real-sel", config),
                         MqSourceSpec(queue, None, "", {}, "region = 'eu' AND n > 1"))
    drain = MqSource(MqConnection("real-drain", config), MqSourceSpec(queue, None, "", {}))

    async def go() -> tuple[list[int], list[int]]:
        await target.send([Outbound(str(i), usr_message(i, r), queue) for i, r in enumerate(["eu", "us", "eu"])])
        got = await source.receive(10)
        await source.confirm(got)
        rest = await drain.receive(10)
        await drain.confirm(rest)
        for c in (source, drain, target):
            await c.close()
        return [_n(i) for i in got], [_n(i) for i in rest]

    assert _run(go()) == ([2], [0, 1])

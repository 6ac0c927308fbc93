"""The IBM MQ connector: client connections through pymqi (or IBM's successor package ``ibmmq``),
MQPUT of the mapping library's message bytes under syncpoint and MQCMIT per batch, MQGET under
syncpoint with MQCMIT/MQBACK as the router confirms or backs out, durable subscriptions to MQ topics
named ``ClientIdentifier:Topic``, and reconnection with backoff. Registers connector type "mq".

Our MQ message bytes are MQMD + data (headers + body), exactly what `bridge.connectors.embedded`
stores. On MQPUT the MQMD part travels as the MD structure and the rest as the message data; on MQGET
the two are joined again. The MQMD's own integers are written in the byte order of MQMD.Encoding
(mq-wire-facts.md §1), so a message keeps its bytes through the queue manager.

pymqi/ibmmq are imported on first use only, so the gateway runs without them unless an mq connector
is configured. MQI handles are bound to the thread that made them: each connection owns one thread
and every MQI call of that connection runs there."""
from __future__ import annotations

import asyncio
import importlib
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, TypeVar

from bridge.connectors.base import ConnectorError, Inbound, Outbound, Source, Target
from bridge.connectors.mqtt_internal import route_client_id
from bridge.connectors.registry import CONNECTOR_FACTORIES, RouteSetupError
from mappings.conversions.mqtt_mq import TopicObjectIndex, subscription_name
from mappings.errors import MappingError
from mappings.mq import constants as MQC
from mappings.mq.message import decode_message
from mappings.mq.mqmd import FIELD_TABLE, Mqmd, decode_mqmd, encode_mqmd
from mappings.rules.model import MqConnector, QueueEndpoint, Route, RulesFile, render_topic

log = logging.getLogger("mqbridge.mq")

T = TypeVar("T")

INSTALL_HINT = (
    "the mq connector needs pymqi (pip install 'mqbridge[mq]') or IBM's ibmmq package (pip install ibmmq), "
    "and the IBM MQ C client library (libmqic/libmqm_r: install the IBM MQ redistributable client and put "
    "its lib64 directory on LD_LIBRARY_PATH, or use the Docker image from this project's Dockerfile)")

# MQI constants used here (values from IBM's cmqc.h / cmqxc.h; tests compare them with the ibmmq
# package's CMQC when it is installed). Kept local so the connector needs no library to be built.
MQOO_INPUT_AS_Q_DEF = 0x00000001
MQOO_OUTPUT = 0x00000010
MQOO_SET_IDENTITY_CONTEXT = 0x00000400
MQOO_FAIL_IF_QUIESCING = 0x00002000
MQPMO_SYNCPOINT = 0x00000002
MQPMO_SET_IDENTITY_CONTEXT = 0x00000400
MQPMO_FAIL_IF_QUIESCING = 0x00002000
MQGMO_NO_WAIT = 0x00000000
MQGMO_WAIT = 0x00000001
MQGMO_SYNCPOINT = 0x00000002
MQGMO_FAIL_IF_QUIESCING = 0x00002000
MQGMO_PROPERTIES_FORCE_MQRFH2 = 0x02000000
MQSO_CREATE = 0x00000002
MQSO_RESUME = 0x00000004
MQSO_DURABLE = 0x00000008
MQSO_MANAGED = 0x00000020
MQSO_FAIL_IF_QUIESCING = 0x00002000
MQCO_NONE = 0x00000000
MQCO_KEEP_SUB = 0x00000004
MQCNO_HANDLE_SHARE_BLOCK = 0x00000040
MQCHT_CLNTCONN = 6
MQXPT_TCP = 2
MQCD_VERSION_7 = 7
MQCSP_AUTH_USER_ID_AND_PWD = 1
MQOD_VERSION_4 = 4          # the first MQOD with a SelectionString (MQ V7)
SELECTOR_CCSID = 1208       # the selection string is passed as UTF-8

MQRC_BACKED_OUT = 2003
MQRC_CONNECTION_BROKEN = 2009
MQRC_HCONN_ERROR = 2018
MQRC_NO_MSG_AVAILABLE = 2033
MQRC_NOT_AUTHORIZED = 2035
MQRC_Q_MGR_NOT_AVAILABLE = 2059
MQRC_Q_MGR_QUIESCING = 2161
MQRC_Q_MGR_STOPPING = 2162
MQRC_UNEXPECTED_ERROR = 2195
MQRC_CONNECTION_QUIESCING = 2202
MQRC_CONNECTION_STOPPING = 2203
MQRC_CHANNEL_NOT_AVAILABLE = 2537
MQRC_HOST_NOT_AVAILABLE = 2538
MQRC_RECONNECT_FAILED = 2548
MQRC_CALL_INTERRUPTED = 2549
MQRC_CONNECTION_ERROR = 2273
MQRC_SELECTOR_SYNTAX_ERROR = 2459
MQRC_SELECTOR_ALWAYS_FALSE = 2504
MQRC_SELECTOR_INVALID_FOR_TYPE = 2516
MQRC_SELECTION_STRING_ERROR = 2519
MQRC_SELECTION_NOT_AVAILABLE = 2551

#: Reason codes with which the queue manager refuses a selection string (MQOPEN/MQSUB).
SELECTOR_REASONS = frozenset({
    MQRC_SELECTOR_SYNTAX_ERROR, MQRC_SELECTOR_ALWAYS_FALSE, MQRC_SELECTOR_INVALID_FOR_TYPE,
    MQRC_SELECTION_STRING_ERROR, MQRC_SELECTION_NOT_AVAILABLE,
})

#: Reason codes after which the connection is dropped and made again (with backoff).
RECONNECT_REASONS = frozenset({
    MQRC_CONNECTION_BROKEN, MQRC_HCONN_ERROR, MQRC_Q_MGR_NOT_AVAILABLE, MQRC_Q_MGR_QUIESCING,
    MQRC_Q_MGR_STOPPING, MQRC_UNEXPECTED_ERROR, MQRC_CONNECTION_QUIESCING, MQRC_CONNECTION_STOPPING,
    MQRC_CHANNEL_NOT_AVAILABLE, MQRC_HOST_NOT_AVAILABLE, MQRC_RECONNECT_FAILED, MQRC_CALL_INTERRUPTED,
    MQRC_CONNECTION_ERROR,
})

GET_WAIT_MS = 500           # MQGMO_WAIT interval of the first get of a batch: short, so stop is prompt
RECONNECT_MIN = 0.5
RECONNECT_MAX = 30.0
TOPIC_PREFIX = "topic:"     # QueueEndpoint.destination of a topic


class MqUnavailable(ConnectorError):
    """Neither pymqi nor ibmmq can be imported here, or the MQ C client library is missing."""


# -- loading the MQI library ------------------------------------------------------------------------------

_PACKAGES = ("pymqi", "ibmmq")
_loaded: ModuleType | None = None


def load_mqi(import_module: Callable[[str], ModuleType] = importlib.import_module) -> ModuleType:
    """Import pymqi, else ibmmq (same class family: QueueManager, Queue, Topic, Subscription, MD, ...).
    Raises MqUnavailable naming what to install. ``import_module`` is replaceable for tests."""
    global _loaded
    if _loaded is not None and import_module is importlib.import_module:
        return _loaded
    problems = []
    for name in _PACKAGES:
        try:
            mod = import_module(name)
        except ImportError as exc:   # includes "libmqm_r.so: cannot open shared object file"
            if getattr(exc, "name", None) == name and exc.__context__ is None:
                problems.append(f"{name} is not installed")
            else:
                problems.append(f"{name} is installed but cannot load: {_root_cause(exc)}")
            continue
        except OSError as exc:        # some builds raise OSError from ctypes/dlopen instead
            problems.append(f"{name} is installed but cannot load: {exc}")
            continue
        if import_module is importlib.import_module:
            _loaded = mod
        return mod
    raise MqUnavailable(f"IBM MQ is not available: {'; '.join(problems)}. {INSTALL_HINT}")


def _root_cause(exc: BaseException) -> str:
    """The most telling message in an import failure's chain: the missing shared library if there is
    one (ibmmq retries a failed ``from . import ibmmqc`` as ``import ibmmqc``, hiding the first error)."""
    chain = []
    cur: BaseException | None = exc
    while cur is not None and len(chain) < 10:
        chain.append(str(cur))
        cur = cur.__cause__ or cur.__context__
    for text in chain:
        if ".so" in text or ".dll" in text or ".dylib" in text or "shared object" in text:
            return text
    return chain[-1]


# -- our MQ message bytes <-> MQMD structure + data ---------------------------------------------------------

#: IBM MQMD field names (as the MD classes of pymqi/ibmmq name them) -> (attribute, kind, length).
MD_FIELDS: dict[str, tuple[str, str, int]] = {
    name: (attr, kind, length) for attr, (_off, name, kind, length) in FIELD_TABLE.items() if attr != "struc_id"
}


def split_message(data: bytes) -> tuple[Mqmd, bytes]:
    """Our MQ message bytes -> (MQMD, message data = headers + body). The data starts right after
    the MQMD's 324 or 364 bytes, as its Version says."""
    md = decode_mqmd(data)
    return md, bytes(data[md.length:])


def md_values(md: Mqmd) -> dict[str, int | bytes]:
    """The MQMD as the values an MD structure of pymqi/ibmmq carries: MQLONG fields as int, MQCHARn
    blank padded to n bytes, MQBYTEn as is. Always version 2 (v1 values leave the v2 tail at its
    defaults, which is what MQ assumes for a v1 MQMD)."""
    out: dict[str, int | bytes] = {}
    for name, (attr, kind, length) in MD_FIELDS.items():
        value = getattr(md, attr)
        if kind == "char":
            value = value.encode("latin-1").ljust(length, b" ")
        out[name] = value
    out["Version"] = MQC.MQMD_VERSION_2
    return out


def _char(value: object, length: int) -> str:
    if isinstance(value, str):
        value = value.encode("latin-1", "replace")
    if not isinstance(value, bytes | bytearray):
        raise MappingError(f"expected bytes, got {type(value).__name__}", structure="MQMD")
    raw = bytes(value)[:length]
    cut = raw.find(b"\x00")           # C strings: everything from a NUL on is padding (wire facts §2)
    if cut >= 0:
        raw = raw[:cut]
    return raw.decode("latin-1").rstrip(" ")


def _binary(value: object, length: int) -> bytes:
    if isinstance(value, str):
        value = value.encode("latin-1", "replace")
    if not isinstance(value, bytes | bytearray):
        raise MappingError(f"expected bytes, got {type(value).__name__}", structure="MQMD")
    return bytes(value)[:length].ljust(length, b"\x00")


def mqmd_from_values(values: Callable[[str], object]) -> Mqmd:
    """Inverse of :func:`md_values`: read each field by IBM name (``values(name)``, e.g. getattr on an
    MD). The result is version 1 unless a version-2 field differs from its default."""
    kwargs: dict[str, Any] = {}
    for name, (attr, kind, length) in MD_FIELDS.items():
        if name == "Version":
            continue
        value = values(name)
        if kind == "long":
            kwargs[attr] = int(value)  # type: ignore[call-overload]
        elif kind == "char":
            kwargs[attr] = _char(value, length)
        else:
            kwargs[attr] = _binary(value, length)
    md = Mqmd(version=MQC.MQMD_VERSION_1, **kwargs)
    if md.has_v2_values():
        md = Mqmd(version=MQC.MQMD_VERSION_2, **kwargs)
    return md


def join_message(md: Mqmd, data: bytes) -> bytes:
    """MQMD + data -> our MQ message bytes (the MQMD's integers in the order of its Encoding)."""
    return encode_mqmd(md) + bytes(data)


def make_md(mqi: ModuleType, md: Mqmd) -> Any:  # noqa: ANN401 - pymqi.MD / ibmmq.MD
    return mqi.MD(**md_values(md))


def read_md(md: object) -> Mqmd:
    return mqmd_from_values(lambda name: getattr(md, name))


# -- one connection, one thread -------------------------------------------------------------------------------


def _reason(exc: BaseException) -> int | None:
    reason = getattr(exc, "reason", None)
    return reason if isinstance(reason, int) else None


def _is_mqi_error(mqi: ModuleType, exc: BaseException) -> bool:
    err = getattr(mqi, "MQMIError", None)
    return isinstance(err, type) and isinstance(exc, err)


@dataclass
class MqConnection:
    """One client connection to a queue manager. Its blocking methods (``_sync_*``) run on its own
    thread only; ``call`` schedules them there. After a connection-class failure the handles are
    dropped and the next call reconnects, no sooner than the backoff allows."""

    name: str
    config: MqConnector
    mqi_loader: Callable[[], ModuleType] = load_mqi
    clock: Callable[[], float] = time.monotonic
    qmgr: Any = None
    generation: int = 0                 # counts successful connects; items carry the one they came from
    retry_at: float = 0.0
    delay: float = RECONNECT_MIN
    last_error: str | None = None
    _mqi: ModuleType | None = None
    _executor: ThreadPoolExecutor | None = None
    _queues: dict[tuple[str, int], Any] = field(default_factory=dict)
    _subs: dict[str, Any] = field(default_factory=dict)
    _no_identity: set[str] = field(default_factory=set)

    @property
    def mqi(self) -> ModuleType:
        if self._mqi is None:
            self._mqi = self.mqi_loader()
        return self._mqi

    async def call(self, fn: Callable[..., T], *args: object) -> T:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"mq-{self.name}")
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    async def close(self) -> None:
        if self._executor is None:
            return
        await self.call(self._sync_disconnect)
        self._executor.shutdown(wait=True)
        self._executor = None

    # -- everything below runs on the connection's thread ------------------------------------------------

    def _fail(self, what: str, exc: BaseException) -> ConnectorError:
        """Turn an MQI failure into a ConnectorError; drop the connection when the reason says so."""
        reason = _reason(exc)
        text = f"queue manager {self.config.queue_manager} ({self.config.conname}): {what}: {exc}"
        if reason in RECONNECT_REASONS:
            self._drop()
            text += "; reconnecting"
        self.last_error = text
        return ConnectorError(text)

    def _drop(self) -> None:
        """Forget every handle (the queue manager backs out what was not committed)."""
        qmgr, self.qmgr = self.qmgr, None
        self._queues.clear()
        self._subs.clear()
        if qmgr is not None:
            try:
                qmgr.disconnect()
            except Exception:   # already broken: nothing more to release
                pass

    def _sync_connect(self) -> Any:  # noqa: ANN401
        if self.qmgr is not None:
            return self.qmgr
        now = self.clock()
        if now < self.retry_at:
            raise ConnectorError(f"queue manager {self.config.queue_manager}: not connected "
                                 f"({self.last_error}); next attempt in {self.retry_at - now:.1f}s")
        mqi = self.mqi
        cfg = self.config
        cd = mqi.CD()
        cd.ChannelName = cfg.channel.encode()
        cd.ConnectionName = cfg.conname.encode()
        cd.ChannelType = MQCHT_CLNTCONN
        cd.TransportType = MQXPT_TCP
        kwargs: dict[str, Any] = {"cd": cd, "opts": MQCNO_HANDLE_SHARE_BLOCK}
        if cfg.cipher:
            cd.SSLCipherSpec = cfg.cipher.encode()
            if getattr(cd, "Version", MQCD_VERSION_7) < MQCD_VERSION_7:
                cd.Version = MQCD_VERSION_7
            sco = mqi.SCO()
            if cfg.key_repository:
                sco.KeyRepository = cfg.key_repository.encode()
            kwargs["sco"] = sco
        if cfg.user is not None:
            if hasattr(mqi, "CSP"):     # ibmmq: the MQCSP structure itself
                csp = mqi.CSP()
                csp.AuthenticationType = MQCSP_AUTH_USER_ID_AND_PWD
                csp.CSPUserId = cfg.user
                csp.CSPPassword = cfg.password or ""
                kwargs["csp"] = csp
            else:                       # pymqi builds the MQCSP from these
                kwargs["user"] = cfg.user
                kwargs["password"] = cfg.password or ""
        qmgr = mqi.QueueManager(None)
        try:
            qmgr.connect_with_options(cfg.queue_manager, **kwargs)
        except Exception as exc:
            if not _is_mqi_error(mqi, exc):
                raise
            self.retry_at = self.clock() + self.delay
            self.delay = min(self.delay * 2, RECONNECT_MAX)
            self.last_error = f"MQCONNX to {cfg.queue_manager} over {cfg.channel} at {cfg.conname} failed: {exc}"
            raise ConnectorError(self.last_error) from exc
        self.qmgr = qmgr
        self.generation += 1
        self.delay = RECONNECT_MIN
        self.retry_at = 0.0
        self.last_error = None
        log.info("connected to queue manager %s over %s at %s (%s)", cfg.queue_manager, cfg.channel,
                 cfg.conname, getattr(self.mqi, "__name__", "mqi"))
        return qmgr

    def _sync_disconnect(self) -> None:
        for sub in list(self._subs.values()):
            try:
                sub.close(sub_close_options=MQCO_KEEP_SUB, close_sub_queue=True)
            except Exception:   # closing is best effort; the durable subscription stays either way
                pass
        self._subs.clear()
        for q in list(self._queues.values()):
            try:
                q.close()
            except Exception:
                pass
        self._queues.clear()
        if self.qmgr is not None:
            try:
                self.qmgr.backout()     # nothing uncommitted survives a close: it goes back to the queue
            except Exception:
                pass
        self._drop()

    def _open_output(self, dest: str, topics: Mapping[str, str]) -> tuple[Any, bool]:
        """Open a queue or topic for output (cached). Returns (object, identity context allowed)."""
        mqi = self.mqi
        qmgr = self.qmgr
        identity = dest not in self._no_identity
        key = (dest, 1 if identity else 0)
        if key in self._queues:
            return self._queues[key], identity
        opts = MQOO_OUTPUT | MQOO_FAIL_IF_QUIESCING
        try:
            obj = self._open(mqi, qmgr, dest, topics, opts | (MQOO_SET_IDENTITY_CONTEXT if identity else 0))
        except Exception as exc:
            if not (identity and _is_mqi_error(mqi, exc) and _reason(exc) == MQRC_NOT_AUTHORIZED):
                raise
            obj = self._open(mqi, qmgr, dest, topics, opts)   # a 2035 here is about output itself: raised
            # put allowed, set-identity not: the queue manager sets UserIdentifier from the connection
            log.warning("%s: no authority to set identity context on %s; UserIdentifier will be the "
                        "connection's user (grant +setid to keep seed Table 1's UserIdentifier)",
                        self.config.queue_manager, dest)
            self._no_identity.add(dest)
            identity = False
            key = (dest, 0)
        self._queues[key] = obj
        return obj, identity

    @staticmethod
    def _open(mqi: ModuleType, qmgr: object, dest: str, topics: Mapping[str, str], opts: int) -> Any:  # noqa: ANN401
        if dest.startswith(TOPIC_PREFIX):
            name, rest = topic_object(topics, dest[len(TOPIC_PREFIX):])
            topic = mqi.Topic(qmgr, topic_name=name or None, topic_string=rest or None)
            topic.open(open_opts=opts)
            return topic
        return mqi.Queue(qmgr, dest, opts)

    def _sync_put(self, items: list[tuple[str, Mqmd, bytes]], topics: Mapping[str, str]) -> None:
        """MQPUT every (destination, MQMD, data) under syncpoint, then MQCMIT: on return all are committed."""
        mqi = self.mqi
        self._sync_connect()
        try:
            for dest, md, body in items:
                obj, identity = self._open_output(dest, topics)
                pmo = mqi.PMO()
                pmo.Options = (MQPMO_SYNCPOINT | MQPMO_FAIL_IF_QUIESCING
                               | (MQPMO_SET_IDENTITY_CONTEXT if identity else 0))
                if dest.startswith(TOPIC_PREFIX):
                    obj.pub(body, make_md(mqi, md), pmo)
                else:
                    obj.put(body, make_md(mqi, md), pmo)
            self.qmgr.commit()
        except Exception as exc:
            if not _is_mqi_error(mqi, exc):
                self._try_backout()
                raise
            self._try_backout()
            raise self._fail(f"put of a batch of {len(items)}", exc) from exc

    def _try_backout(self) -> None:
        if self.qmgr is not None:
            try:
                self.qmgr.backout()
            except Exception as exc:
                if _is_mqi_error(self.mqi, exc) and _reason(exc) in RECONNECT_REASONS:
                    self._drop()

    def _input(self, source: MqSourceSpec) -> Any:  # noqa: ANN401
        """The object to MQGET from: the queue, or the managed queue of the durable subscription. A
        route's selector goes to the queue manager as the SelectionString of the MQOD (queue) or MQSD
        (subscription): MQ V7+ message selection, which takes the JMS header names and evaluates them
        on the MQMD/RFH2 as IBM MQ classes for JMS map them, so a message that does not match stays on
        the queue for other consumers."""
        mqi = self.mqi
        qmgr = self.qmgr
        if source.queue is not None:
            key = (source.queue, -1)
            if key not in self._queues:
                desc: Any = source.queue
                if source.selector:
                    desc = mqi.OD()
                    desc.ObjectName = source.queue.encode()
                    desc.Version = max(int(getattr(desc, "Version", MQOD_VERSION_4)), MQOD_VERSION_4)
                    desc.set_vs("SelectionString", source.selector.encode("utf-8"), vs_ccsid=SELECTOR_CCSID)
                self._queues[key] = mqi.Queue(qmgr, desc, MQOO_INPUT_AS_Q_DEF | MQOO_FAIL_IF_QUIESCING)
            return self._queues[key]
        name = source.subscription
        if name not in self._subs:
            sd = mqi.SD()
            sd.Options = (MQSO_CREATE | MQSO_RESUME | MQSO_DURABLE | MQSO_MANAGED | MQSO_FAIL_IF_QUIESCING)
            sd.set_vs("SubName", name.encode("utf-8"))
            obj, rest = topic_object(source.topics, source.topic or "")
            if obj:
                sd.ObjectName = obj.encode()
            if rest:
                sd.set_vs("ObjectString", rest.encode("utf-8"))
            if source.selector:
                sd.set_vs("SelectionString", source.selector.encode("utf-8"), vs_ccsid=SELECTOR_CCSID)
            sub = mqi.Subscription(qmgr)
            sub.sub(sub_desc=sd)
            self._subs[name] = sub
        return self._subs[name]

    def _sync_get(self, source: MqSourceSpec, max_items: int) -> tuple[int, list[tuple[Mqmd, bytes]]]:
        """MQGET under syncpoint: wait briefly for the first message, then take what is there, up to
        ``max_items``. Returns (connection generation, [(MQMD, data)]); nothing is committed."""
        mqi = self.mqi
        self._sync_connect()
        out: list[tuple[Mqmd, bytes]] = []
        try:
            obj = self._input(source)
            while len(out) < max_items:
                md = mqi.MD()
                gmo = mqi.GMO()
                gmo.Options = (MQGMO_SYNCPOINT | MQGMO_FAIL_IF_QUIESCING | MQGMO_PROPERTIES_FORCE_MQRFH2
                               | (MQGMO_WAIT if not out else MQGMO_NO_WAIT))
                gmo.WaitInterval = GET_WAIT_MS if not out else 0
                try:
                    data = obj.get(None, md, gmo)
                except Exception as exc:
                    if _is_mqi_error(mqi, exc) and _reason(exc) == MQRC_NO_MSG_AVAILABLE:
                        break
                    raise
                out.append((read_md(md), bytes(data)))
        except Exception as exc:
            if not _is_mqi_error(mqi, exc):
                raise
            self._try_backout()
            what = f"get from {source.describe()}"
            if _reason(exc) in SELECTOR_REASONS:
                what += f" (the queue manager refused the route's selector {source.selector!r})"
            raise self._fail(what, exc) from exc
        return self.generation, out

    def _sync_end(self, generation: int, commit: bool) -> bool:
        """MQCMIT (or MQBACK) the unit of work of ``generation``. False when that connection is gone:
        the queue manager backed its work out and will deliver the messages again."""
        if self.qmgr is None or generation != self.generation:
            return False
        try:
            if commit:
                self.qmgr.commit()
            else:
                self.qmgr.backout()
        except Exception as exc:
            if not _is_mqi_error(self.mqi, exc):
                raise
            err = self._fail("MQCMIT" if commit else "MQBACK", exc)
            log.warning("%s", err)
            return False
        return True


def topic_object(admin_topics: Mapping[str, str], topic: str) -> tuple[str, str]:
    """(topic object name, remaining topic string) for an MQOPEN/MQSUB of ``topic``: the nearest
    administrative topic object of the route (option admin_topics: object -> topic string) and the
    levels below its topic string; the queue manager joins them with '/'. Without a nearer object it is
    SYSTEM.BASE.TOPIC, whose topic string is empty: ('', whole topic)."""
    index = TopicObjectIndex({s: obj for obj, s in admin_topics.items()})
    name = index.nearest(topic)
    if name == index.default or name not in admin_topics:
        return "", topic
    return name, topic[len(admin_topics[name]):].lstrip("/")


# -- source and target ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MqSourceSpec:
    queue: str | None
    topic: str | None
    subscription: str
    topics: Mapping[str, str]
    selector: str | None = None         # the route's selector: the SelectionString of the MQOD/MQSD

    def describe(self) -> str:
        return f"queue {self.queue}" if self.queue is not None else \
            f"subscription {self.subscription} on topic {self.topic}"


@dataclass(slots=True)
class _Handle:
    generation: int


class MqTarget(Target):
    protocol = "mq"

    def __init__(self, conn: MqConnection, topics: Mapping[str, str]) -> None:
        self.conn = conn
        self.topics = topics

    async def start(self) -> None:
        return None   # connects on the first send, so a queue manager that is down does not stop the gateway

    async def send(self, items: list[Outbound]) -> None:
        """Put the batch and commit it. Bytes that are not an MQ message raise TypeError/MappingError,
        not ConnectorError: retrying cannot help, so the router backs the batch out at its source
        (and past the threshold moves the message to the backout destination)."""
        batch = []
        for item in items:
            if not isinstance(item.message, bytes | bytearray):
                raise TypeError(f"mq target: message {item.key} is {type(item.message).__name__}, not MQ bytes")
            md, data = split_message(bytes(item.message))   # before any MQI call: a bad message puts nothing
            batch.append((self._destination(item), md, data))
        await self.conn.call(self.conn._sync_put, batch, self.topics)

    @staticmethod
    def _destination(item: Outbound) -> str:
        dest = item.destination
        if dest.startswith(TOPIC_PREFIX) and "{" in dest:   # topic template: fill from the RFH2 mqps.Top
            try:                                             # (and mqtt.clientId: seed Table 2)
                msg = decode_message(bytes(item.message))  # type: ignore[arg-type]
                mqps, mqtt = msg.rfh2_folder("mqps"), msg.rfh2_folder("mqtt")
            except MappingError:
                mqps = mqtt = None
            top = (mqps.value("Top") if mqps is not None else None) or ""
            client = (mqtt.value("clientId") if mqtt is not None else None) or ""
            dest = TOPIC_PREFIX + render_topic(dest[len(TOPIC_PREFIX):], topic=top, client=client)
        return dest

    async def close(self) -> None:
        await self.conn.close()


class MqSource(Source):
    def __init__(self, conn: MqConnection, spec: MqSourceSpec) -> None:
        self.conn = conn
        self.spec = spec
        self._warned: str | None = None

    async def start(self) -> None:
        return None

    async def receive(self, max_items: int) -> list[Inbound]:
        while True:
            try:
                generation, got = await self.conn.call(self.conn._sync_get, self.spec, max_items)
            except ConnectorError as exc:
                if str(exc) != self._warned:
                    log.warning("mq source %s: %s", self.spec.describe(), exc)
                    self._warned = str(exc)
                await asyncio.sleep(min(max(self.conn.retry_at - self.conn.clock(), RECONNECT_MIN),
                                        RECONNECT_MAX))
                continue
            self._warned = None
            if got:
                return [self._inbound(md, data, generation) for md, data in got]

    def _inbound(self, md: Mqmd, data: bytes, generation: int) -> Inbound:
        raw = join_message(md, data)
        persistent = md.persistence == MQC.MQPER_PERSISTENT
        return Inbound(
            key=f"mq:{md.msg_id.hex()}", protocol="mq", message=raw,
            source_type=md.format.strip() or "NONE", size=len(raw),
            destination=self.spec.queue if self.spec.queue is not None else f"{TOPIC_PREFIX}{self.spec.topic}",
            received=time.time(), redelivery_count=md.backout_count,
            qos=1 if persistent else 0, persistent=persistent,
            priority=md.priority if 0 <= md.priority <= 9 else None,
            handle=_Handle(generation))

    async def _end(self, items: list[Inbound], commit: bool) -> None:
        if not items:
            return
        generation = items[0].handle.generation if isinstance(items[0].handle, _Handle) else -1
        ok = await self.conn.call(self.conn._sync_end, generation, commit)
        if not ok and commit:
            log.warning("mq source %s: %d messages were not committed (connection lost); the queue manager "
                        "delivers them again, so the target may see them twice", self.spec.describe(),
                        len(items))

    async def confirm(self, items: list[Inbound]) -> None:
        await self._end(items, commit=True)

    async def backout(self, items: list[Inbound]) -> None:
        await self._end(items, commit=False)

    async def close(self) -> None:
        await self.conn.close()


# -- factory -----------------------------------------------------------------------------------------------------


def make_connector(rules: RulesFile, route: Route, endpoint: QueueEndpoint, role: str) -> Source | Target:
    """CONNECTOR_FACTORIES["mq"]: one connection (and thread) per route endpoint, so a route's
    unit of work is never mixed with another's. Fails early, with what to install, when the MQI
    library cannot load."""
    config = rules.connector(endpoint.connector)
    if not isinstance(config, MqConnector):
        raise ConnectorError(f"connector {endpoint.connector!r} is not an mq connector")
    try:
        load_mqi()
    except MqUnavailable as exc:
        raise RouteSetupError(f"route {route.name}: connector {endpoint.connector!r}: {exc}") from None
    conn = MqConnection(f"{route.name}.{role}", config)
    topics = dict(route.options.admin_topics)
    if role == "target":
        return MqTarget(conn, topics)
    sub = endpoint.subscription
    if endpoint.topic is not None and sub is None:
        sub = subscription_name(route_client_id(route.name), endpoint.topic)
    selector = route.options.selector if route.options.selector and route.options.selector.strip() else None
    return MqSource(conn, MqSourceSpec(endpoint.queue, endpoint.topic, sub or "", topics, selector))


def register() -> None:
    CONNECTOR_FACTORIES.setdefault("mq", make_connector)


register()

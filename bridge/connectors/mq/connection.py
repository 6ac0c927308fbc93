"""One client connection to a queue manager with its own thread (MQI handles are bound to the thread
that made them, so every MQI call of a connection runs there): connect with backoff, MQPUT under
syncpoint and MQCMIT per batch, MQGET from a queue or a durable subscription's managed queue, MQCMIT or
MQBACK as the router confirms or backs out."""
from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, TypeVar

from bridge.connectors.base import BATCH_BYTES, ConnectorError
from bridge.connectors.mq.mqi import (
    MQCD_VERSION_7,
    MQCHT_CLNTCONN,
    MQCNO_HANDLE_SHARE_BLOCK,
    MQCO_KEEP_SUB,
    MQCSP_AUTH_USER_ID_AND_PWD,
    MQGMO_FAIL_IF_QUIESCING,
    MQGMO_NO_WAIT,
    MQGMO_PROPERTIES_FORCE_MQRFH2,
    MQGMO_SYNCPOINT,
    MQGMO_WAIT,
    MQOD_VERSION_4,
    MQOO_FAIL_IF_QUIESCING,
    MQOO_INPUT_AS_Q_DEF,
    MQOO_OUTPUT,
    MQOO_SET_IDENTITY_CONTEXT,
    MQPMO_FAIL_IF_QUIESCING,
    MQPMO_SET_IDENTITY_CONTEXT,
    MQPMO_SYNCPOINT,
    MQRC_NO_MSG_AVAILABLE,
    MQRC_NOT_AUTHORIZED,
    MQSO_CREATE,
    MQSO_DURABLE,
    MQSO_FAIL_IF_QUIESCING,
    MQSO_MANAGED,
    MQSO_RESUME,
    MQXPT_TCP,
    RECONNECT_REASONS,
    SELECTOR_CCSID,
    SELECTOR_REASONS,
    is_mqi_error,
    load_mqi,
    make_md,
    read_md,
    reason_of,
)
from bridge.threadnames import name_this_thread
from mappings.conversions.mqtt_mq import TopicObjectIndex
from mappings.mq.mqmd import Mqmd
from mappings.rules.model import MqConnector

log = logging.getLogger("mqbridge.mq")

T = TypeVar("T")

GET_WAIT_MS = 500           # MQGMO_WAIT interval of the first get of a batch: short, so stop is prompt
RECONNECT_MIN = 0.5
RECONNECT_MAX = 30.0
TOPIC_PREFIX = "topic:"     # QueueEndpoint.destination of a topic


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
            self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"mq-{self.name}",
                                                  initializer=name_this_thread)
        return await asyncio.get_running_loop().run_in_executor(self._executor, fn, *args)

    def retry_delay(self) -> float:
        """How long a source waits after a failed get before it tries again (the reconnect backoff)."""
        return min(max(self.retry_at - self.clock(), RECONNECT_MIN), RECONNECT_MAX)

    async def close(self) -> None:
        if self._executor is None:
            return
        await self.call(self._sync_disconnect)
        self._executor.shutdown(wait=True)
        self._executor = None

    # -- everything below runs on the connection's thread ------------------------------------------------

    def _fail(self, what: str, exc: BaseException) -> ConnectorError:
        """Turn an MQI failure into a ConnectorError; drop the connection when the reason says so."""
        reason = reason_of(exc)
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
            if not is_mqi_error(mqi, exc):
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
            if not (identity and is_mqi_error(mqi, exc) and reason_of(exc) == MQRC_NOT_AUTHORIZED):
                raise
            obj = self._open(mqi, qmgr, dest, topics, opts)   # a 2035 here is about output itself: raised
            # put allowed, set-identity not: the queue manager sets UserIdentifier from the connection
            log.warning("%s: no authority to set identity context on %s; UserIdentifier will be the "
                        "connection's user (grant +setid to keep MQ Telemetry Table 1's UserIdentifier)",
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
            if not is_mqi_error(mqi, exc):
                self._try_backout()
                raise
            self._try_backout()
            raise self._fail(f"put of a batch of {len(items)}", exc) from exc

    def _try_backout(self) -> None:
        if self.qmgr is not None:
            try:
                self.qmgr.backout()
            except Exception as exc:
                if is_mqi_error(self.mqi, exc) and reason_of(exc) in RECONNECT_REASONS:
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
        ``max_items`` messages or BATCH_BYTES. Returns (connection generation, [(MQMD, data)]); nothing is
        committed."""
        mqi = self.mqi
        self._sync_connect()
        out: list[tuple[Mqmd, bytes]] = []
        held = 0
        try:
            obj = self._input(source)
            while len(out) < max_items and held < BATCH_BYTES:
                md = mqi.MD()
                gmo = mqi.GMO()
                gmo.Options = (MQGMO_SYNCPOINT | MQGMO_FAIL_IF_QUIESCING | MQGMO_PROPERTIES_FORCE_MQRFH2
                               | (MQGMO_WAIT if not out else MQGMO_NO_WAIT))
                gmo.WaitInterval = GET_WAIT_MS if not out else 0
                try:
                    data = obj.get(None, md, gmo)
                except Exception as exc:
                    if is_mqi_error(mqi, exc) and reason_of(exc) == MQRC_NO_MSG_AVAILABLE:
                        break
                    raise
                out.append((read_md(md), bytes(data)))
                held += len(data)
        except Exception as exc:
            if not is_mqi_error(mqi, exc):
                raise
            self._try_backout()
            what = f"get from {source.describe()}"
            if reason_of(exc) in SELECTOR_REASONS:
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
            if not is_mqi_error(self.mqi, exc):
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

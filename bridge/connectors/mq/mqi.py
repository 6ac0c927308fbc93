"""The IBM MQ client library as the mq connector sees it: pymqi or IBM's successor package ``ibmmq``
imported on first use (so the gateway runs without them unless an mq connector is configured), the MQI
constants and reason codes the connector uses, and our MQ message bytes <-> the MD structure + data
that MQPUT takes and MQGET returns (the MQMD's integers in the byte order of MQMD.Encoding, as IBM MQ
docs "MQMD - Message descriptor" describe, so a message keeps its bytes through the queue manager)."""
from __future__ import annotations

import importlib
from collections.abc import Callable
from types import ModuleType
from typing import Any

from bridge.connectors.base import ConnectorError
from mappings.errors import MappingError
from mappings.mq import constants as MQC
from mappings.mq.mqmd import FIELD_TABLE, Mqmd, decode_mqmd, encode_mqmd

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
    cut = raw.find(b"\x00")   # C strings: from a NUL on it is padding (IBM MQ docs "MQMD - Message descriptor")
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


# -- MQI errors -------------------------------------------------------------------------------------------------


def reason_of(exc: BaseException) -> int | None:
    """The MQRC of an MQI error (pymqi/ibmmq ``MQMIError.reason``), else None."""
    reason = getattr(exc, "reason", None)
    return reason if isinstance(reason, int) else None


def is_mqi_error(mqi: ModuleType, exc: BaseException) -> bool:
    err = getattr(mqi, "MQMIError", None)
    return isinstance(err, type) and isinstance(exc, err)


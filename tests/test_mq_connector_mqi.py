"""The mq connector's MQI layer (bridge/connectors/mq/mqi.py): our MQ message bytes <-> (MQMD structure,
data) against hand-built golden bytes, and against the MD class of IBM's ``ibmmq`` package for real when
it is installed (its pure-Python layer is loaded from the wheel without its C library; pymqi cannot be
installed here because it compiles against the MQ client headers). Where ibmmq is absent,
``tests.mq_fake.StandInMD`` takes its place, and the golden bytes check the stand-in too. Then the MQI
constants against IBM's CMQC, and loading pymqi/ibmmq when they are missing.
"""
from __future__ import annotations

import struct
import subprocess
import sys
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import bridge.connectors.mq  # noqa: F401 - registers connector type "mq"
from bridge.config import BrokerConfig
from bridge.connectors.mq import mqi
from bridge.connectors.registry import RouteSetupError
from bridge.mqtt.broker import Broker
from bridge.mqtt.store import Store
from bridge.routing.router import Router
from mappings.mq import constants as C
from mappings.rules.model import parse_rules
from tests.mq_fake import (
    IBMMQ,
    LITTLE,
    MD_LAYOUT,
    StandInMD,
)


def _be(v: int) -> bytes:
    return struct.pack(">i", v)


def _le(v: int) -> bytes:
    return struct.pack("<i", v)


MSG_ID = b"AMQ QM1         " + bytes.fromhex("65a1b2c3000012ab")
CORREL_ID = bytes(range(1, 25))
GROUP_ID = b"GROUP-1".ljust(24, b"\x00")


def golden_mqmd(pack: Callable[[int], bytes], encoding: int, *, v2: bool) -> bytes:
    """An MQMD written field by field from the field table of IBM MQ docs "MQMD - Message descriptor"
    (not with our codec)."""
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
    assert list(mqi.MD_FIELDS) == [n for n, _, _ in MD_LAYOUT[1:]]


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


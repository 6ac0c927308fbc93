"""Shared helpers for the MQ codec tests: real captured messages and hypothesis strategies."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import strategies as st

from mappings.mq import constants as C
from mappings.mq.headers import Mqdlh, Mqmde
from mappings.mq.message import build_message, encode_message
from mappings.mq.mqmd import Mqmd
from mappings.mq.rfh2 import Rfh1, Rfh2, RfhElement, RfhFolder

REPO_ROOT = Path(__file__).resolve().parent.parent
REAL_MESSAGES = REPO_ROOT.parent / "shared" / "reference" / "real-mq-messages"
FIXTURES = REPO_ROOT / "fixtures" / "messages"


def real_message(name: str) -> bytes:
    """Bytes of a captured message hex dump; skips the test when the reference folder is absent."""
    path = REAL_MESSAGES / name
    if not path.is_file():
        pytest.skip(f"real captured MQ message {path} not present (third-party data, not in the repo)")
    return bytes.fromhex("".join(path.read_text().split()))


def topic_message(topic: str, body: bytes) -> bytes:
    """A persistent MQ message whose RFH2 mqps folder names its MQTT topic (Top), as a route to MQTT publishes it
    (MQ Telemetry: QoS 2 in the broker, so a QoS 1 subscription gets it at QoS 1)."""
    rfh = Rfh2(folders=(RfhFolder("mqps", (RfhElement("Top", topic),)),))
    return encode_message(build_message(Mqmd(persistence=C.MQPER_PERSISTENT), (rfh,), body))


def usr_message(n: int, region: str, *, priority: int = 4, persistent: bool = True) -> bytes:
    """An MQ message as a JMS application puts it: RFH2 usr folder (region String, n int), mqps Top
    ``out/<n>``, body ``m<n>`` — for selector tests (``region = 'eu' AND n > 1``)."""
    usr = RfhFolder("usr", (RfhElement("region", region), RfhElement("n", str(n), dt="i4")))
    mqps = RfhFolder("mqps", (RfhElement("Top", f"out/{n}"),))
    md = Mqmd(format=C.MQFMT_RF_HEADER_2, priority=priority,
              persistence=C.MQPER_PERSISTENT if persistent else C.MQPER_NOT_PERSISTENT)
    return encode_message(build_message(md, (Rfh2(folders=(usr, mqps)),), f"m{n}".encode()))


# --- strategies --------------------------------------------------------------------------------
def _latin1_text(max_size: int) -> st.SearchStrategy[str]:
    # MQCHAR fields: single-byte text; trailing blanks are padding and NUL ends the value.
    return st.text(st.characters(min_codepoint=0x21, max_codepoint=0xFF), max_size=max_size) | st.text(
        st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=max_size
    ).map(lambda s: s.rstrip(" "))


longs = st.integers(-(2**31), 2**31 - 1)
formats = st.sampled_from([C.MQFMT_NONE, C.MQFMT_STRING, "MQHRF2  ", "ABC     ", "MQADMIN "])


@st.composite
def mqmds(draw: st.DrawFn, version: int | None = None) -> Mqmd:
    v = draw(st.sampled_from([1, 2])) if version is None else version
    kw = dict(
        version=v,
        report=draw(longs),
        msg_type=draw(longs),
        expiry=draw(longs),
        feedback=draw(longs),
        encoding=draw(st.sampled_from([273, 546, 785, 1])),
        coded_char_set_id=draw(longs),
        format=draw(formats),
        priority=draw(longs),
        persistence=draw(longs),
        msg_id=draw(st.binary(min_size=24, max_size=24)),
        correl_id=draw(st.binary(min_size=24, max_size=24)),
        backout_count=draw(longs),
        reply_to_q=draw(_latin1_text(48)),
        reply_to_q_mgr=draw(_latin1_text(48)),
        user_identifier=draw(_latin1_text(12)),
        accounting_token=draw(st.binary(min_size=32, max_size=32)),
        appl_identity_data=draw(_latin1_text(32)),
        put_appl_type=draw(longs),
        put_appl_name=draw(_latin1_text(28)),
        put_date=draw(_latin1_text(8)),
        put_time=draw(_latin1_text(8)),
        appl_origin_data=draw(_latin1_text(4)),
    )
    if v == 2:
        kw.update(
            group_id=draw(st.binary(min_size=24, max_size=24)),
            msg_seq_number=draw(longs),
            offset=draw(longs),
            msg_flags=draw(longs),
            original_length=draw(longs),
        )
    return Mqmd(**kw)


names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_.\-]{0,11}", fullmatch=True)
xml_chars = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00\ufffe\uffff").filter(
    lambda c: c in "\t\n\r" or ord(c) >= 0x20
)
values = st.text(xml_chars, max_size=20)
dts = st.none() | st.sampled_from(["string", "i4", "i8", "boolean", "bin.hex", "r8"])


def elements(depth: int = 2) -> st.SearchStrategy[RfhElement]:
    leaf = st.builds(RfhElement, name=names, value=st.none() | values, dt=dts)
    if depth == 0:
        return leaf
    group = st.builds(
        RfhElement,
        name=names,
        value=st.just(""),
        dt=st.none(),
        children=st.lists(elements(depth - 1), min_size=1, max_size=3).map(tuple),
    )
    return leaf | group


folders = st.builds(
    RfhFolder,
    name=names,
    elements=st.lists(elements(), max_size=4).map(tuple),
    attributes=st.lists(st.tuples(st.sampled_from(["content", "x"]), values), max_size=1).map(tuple),
)
rfh2s = st.builds(
    Rfh2,
    encoding=st.sampled_from([273, 546]),
    coded_char_set_id=st.sampled_from([-2, 1208, 819]),
    format=formats,
    flags=longs,
    name_value_ccsid=st.sampled_from([1208, 1200, 13488, 17584]),
    folders=st.lists(folders, max_size=4).map(tuple),
)
_printable = st.characters(min_codepoint=0x20, max_codepoint=0x7E)
_rfh1_pair = st.tuples(st.text(_printable, min_size=1, max_size=8), st.text(_printable, max_size=8))
rfh1s = st.builds(
    Rfh1,
    encoding=st.sampled_from([273, 546]),
    coded_char_set_id=st.sampled_from([-2, 1208]),
    format=formats,
    flags=longs,
    pairs=st.lists(_rfh1_pair, max_size=4).map(tuple),
)

_name_text = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=12)
mqmdes = st.builds(
    Mqmde, encoding=st.sampled_from([273, 546]), coded_char_set_id=longs, format=formats, flags=longs,
    group_id=st.binary(min_size=24, max_size=24), msg_seq_number=longs, offset=longs, msg_flags=longs,
    original_length=longs,
)
mqdlhs = st.builds(
    Mqdlh, reason=longs, dest_q_name=_name_text, dest_q_mgr_name=_name_text,
    encoding=st.sampled_from([273, 546]), coded_char_set_id=st.sampled_from([0, 1208, 819]), format=formats,
    put_appl_type=longs, put_appl_name=_name_text, put_date=st.sampled_from(["", "20240229"]),
    put_time=st.sampled_from(["", "12000000"]),
)

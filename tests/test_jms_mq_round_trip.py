"""JMS <-> MQ (mappings.conversions.jms_mq) round trips with hypothesis: what the report does not name comes
back equal, both ways and with WMQ_TARGET_CLIENT=MQ; any MQ message converts or raises a MappingError."""
from __future__ import annotations

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mappings.conversions.jms_mq import (
    JmsToMqOptions,
    jms_to_mq_bytes,
    mq_bytes_to_jms,
)
from mappings.errors import MappingError
from mappings.jms.model import (
    JmsMessage,
)
from mappings.mq import constants as C
from mappings.mq.message import build_message, decode_message, encode_message
from mappings.mq.mqmd import Mqmd
from mappings.mq.rfh2 import Rfh2, RfhElement, RfhFolder
from mappings.report import ConversionReport
from tests import jms_strategies as js
from tests.jms_mq_strategies import (
    mq_messages,
    mqmd_only,
    representable,
    with_delivery_count,
    with_mcd_type,
    with_provider_properties,
)
from tests.jms_mq_support import NOW, folder, same, to_jms, to_mq
from tests.mq_support import mqmds, rfh2s


# ==================================================================================================
# Round trips (hypothesis)
# ==================================================================================================
def _exact_or_reported(message: JmsMessage, via_bytes: bool) -> tuple[JmsMessage, ConversionReport]:
    try:
        if via_bytes:
            data, report = jms_to_mq_bytes(message, now_ms=NOW)
            return mq_bytes_to_jms(data, now_ms=NOW)[0], report
        mq, report = to_mq(message)
    except MappingError:
        assume(False)
        raise
    return to_jms(mq)[0], report


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(with_provider_properties(js.messages.map(with_delivery_count)
                                | with_mcd_type(js.messages.map(with_delivery_count))))
def test_any_message_comes_back_equal_unless_reported(message):
    # About one example in eight has an empty report (measured): those must come back equal; the rest
    # exercise the report itself.
    back, report = _exact_or_reported(message, via_bytes=False)
    if not report:
        assert same(back, message)


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(representable(), st.booleans())
def test_representable_messages_round_trip_exactly(message, via_bytes):
    data, report = jms_to_mq_bytes(message, now_ms=NOW)
    assert report.findings == []
    back = mq_bytes_to_jms(data, now_ms=NOW)[0] if via_bytes else to_jms(to_mq(message)[0])[0]
    assert same(back, message)


# MQ -> JMS -> MQ keeps every mapped field
MAPPED_MQMD = ("feedback", "put_appl_type", "report",
               "priority", "persistence", "msg_id", "correl_id", "backout_count", "reply_to_q", "reply_to_q_mgr",
               "msg_type", "user_identifier", "put_appl_name", "put_date", "put_time", "group_id", "msg_seq_number",
               "msg_flags", "expiry")


@settings(max_examples=80, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(mq_messages())
def test_mq_to_jms_to_mq_keeps_every_mapped_field(original):
    j, r1 = to_jms(decode_message(encode_message(original)))
    back, r2 = to_mq(j)
    for attr in MAPPED_MQMD:
        assert getattr(back.md, attr) == getattr(original.md, attr), attr
    assert folder(back, "usr") == folder(original, "usr")
    assert back.body == original.body and back.body_format == C.MQFMT_STRING
    assert r1.findings == [] and r2.findings == []


# ==================================================================================================
# Robustness: any MQ message gives a JMS message or a MappingError, nothing else
# ==================================================================================================
_fuzz_names = st.sampled_from(["Dst", "Tms", "Dlv", "Exp", "Pri", "Cid", "Rto", "Gid", "Seq", "Msd", "Type", "Set",
                              "Fmt", "Top", "x", "ok", "JMSXUserID"])
_fuzz_values = st.none() | st.sampled_from(["", "1", "2", "-1", "4", "99999999999999999999", "queue:///Q",
                                           "topic://t", "ID:" + "ab" * 24, "jms_map", "jms_text", "jms_stream",
                                           "jms_object", "jms_none", "xmlnsc", "queue://a/b/c", "x y"])
_jms_folders = st.builds(
    RfhFolder, st.sampled_from(["jms", "mcd", "usr", "mqps"]),
    st.lists(st.builds(RfhElement, _fuzz_names, _fuzz_values, st.none() | st.sampled_from(["i4", "i8", "boolean",
                                                                                     "bin.hex", "r8", "i1", "qq"])),
             max_size=5).map(tuple))


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(mqmds(version=2), st.lists(_jms_folders, max_size=4), rfh2s, st.binary(max_size=30),
       st.sampled_from([C.MQFMT_STRING, C.MQFMT_NONE, "MQADMIN "]), st.booleans(), st.booleans())
def test_any_mq_message_converts_or_raises_mapping_error(md, jms_folders, extra, body, fmt, with_rfh2_header,
                                                         real_put_time):
    if real_put_time:   # otherwise most examples stop at a garbage PutDate (a MappingError, as they should)
        md = Mqmd(**{**{a: getattr(md, a) for a in Mqmd.__slots__}, "put_date": "20231114", "put_time": "22132012"})
    headers = (Rfh2(coded_char_set_id=C.CCSID_UTF8, folders=tuple(jms_folders)), extra) if with_rfh2_header else ()
    mq = build_message(md, headers, body, body_format=fmt)
    try:
        j, report = to_jms(mq)
    except MappingError:
        return
    assert isinstance(j, JmsMessage) and isinstance(report, ConversionReport)
    try:
        to_mq(j)                                  # and back: a JMS message from MQ converts again
    except MappingError as exc:                   # only values XML cannot carry may fail on the way back
        assert "cannot be written" in str(exc) or "XML" in str(exc) or "not representable" in str(exc), exc


# ==================================================================================================
# WMQ_TARGET_CLIENT=MQ (no RFH2)
# ==================================================================================================
@settings(max_examples=80, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(with_provider_properties(js.messages.map(with_delivery_count)) | representable().map(mqmd_only))
def test_target_client_mq_report_is_complete(message):
    try:
        mq, report = to_mq(message, options=JmsToMqOptions(with_rfh2=False))
    except MappingError:
        return
    assert mq.headers == ()
    if not report:
        assert same(to_jms(mq)[0], message)


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(representable().map(mqmd_only))
def test_target_client_mq_carries_mqmd_only_messages_exactly(message):
    mq, report = to_mq(message, options=JmsToMqOptions(with_rfh2=False))
    assert report.findings == [] and same(to_jms(mq)[0], message)

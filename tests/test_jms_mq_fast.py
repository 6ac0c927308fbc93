"""The JMS <-> MQ bytes path (mappings/conversions/jms_mq/encode.py, decode.py) gives exactly the model path's
results: the same bytes and findings for JMS -> MQ, the same JMS message (types included) and findings for
MQ -> JMS, and the same MappingError when the model path refuses the input; and it is taken for the usual
messages."""
from __future__ import annotations

import struct
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mappings.conversions.jms_mq import (
    JmsToMqOptions,
    MqToJmsOptions,
    bytes_to_id,
    jms_to_mq,
    jms_to_mq_bytes,
    mq_bytes_to_jms,
    mq_to_jms,
)
from mappings.conversions.jms_mq.decode import mq_bytes_to_jms_fast
from mappings.conversions.jms_mq.encode import jms_to_mq_bytes_fast
from mappings.errors import MappingError
from mappings.jms.model import (
    BytesBody,
    DeliveryMode,
    Destination,
    JavaType,
    JmsHeaders,
    JmsMessage,
    MapBody,
    NoBody,
    ObjectBody,
    StreamBody,
    TextBody,
    TypedMap,
    jboolean,
    jchar,
    jint,
    jlong,
    jstring,
)
from mappings.mq import constants as C
from mappings.mq.message import decode_message, encode_message
from mappings.mq.mqmd import Mqmd, encode_mqmd
from tests import jms_strategies as js
from tests.jms_mq_strategies import mq_messages, representable, with_mcd_type, with_provider_properties

NOW = 1_700_000_000_000
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def general_to_mq(message: JmsMessage, now_ms: int, options: JmsToMqOptions) -> tuple[str, Any, Any]:
    try:
        msg, report = jms_to_mq(message, now_ms=now_ms, options=options)
        return "ok", encode_message(msg), report.findings
    except MappingError as exc:
        return "error", str(exc), None


def public_to_mq(message: JmsMessage, now_ms: int, options: JmsToMqOptions) -> tuple[str, Any, Any]:
    try:
        data, report = jms_to_mq_bytes(message, now_ms=now_ms, options=options)
        return "ok", data, report.findings
    except MappingError as exc:
        return "error", str(exc), None


def general_to_jms(data: bytes, now_ms: int = NOW, options: MqToJmsOptions = MqToJmsOptions()) -> tuple[str, Any, Any]:
    try:
        message, report = mq_to_jms(decode_message(data), now_ms=now_ms, options=options)
        return "ok", (message, repr(message)), report.findings
    except MappingError as exc:
        return "error", str(exc), None


def public_to_jms(data: bytes, now_ms: int = NOW, options: MqToJmsOptions = MqToJmsOptions()) -> tuple[str, Any, Any]:
    try:
        message, report = mq_bytes_to_jms(data, now_ms=now_ms, options=options)
        return "ok", (message, repr(message)), report.findings   # repr: DeliveryMode vs int, -0.0, ...
    except MappingError as exc:
        return "error", str(exc), None


to_mq_options = st.builds(JmsToMqOptions, encoding=st.sampled_from([C.MQENC_NORMAL, C.MQENC_NATIVE, 785]),
                          body_ccsid=st.sampled_from([C.CCSID_UTF8, C.CCSID_ISO8859_1, C.CCSID_UTF16, 37, 4242]),
                          priority_as_q_def=st.booleans(), with_rfh2=st.booleans())
nows = st.just(NOW) | st.integers(-(2**63), 2**63 - 1)


# ==================================================================================================
# JMS -> MQ
# ==================================================================================================
@SETTINGS
@given(with_provider_properties(js.messages | with_mcd_type(js.messages)), to_mq_options, nows)
def test_jms_to_mq_any_message_same_bytes_findings_or_error(message: JmsMessage, options: JmsToMqOptions,
                                                           now_ms: int) -> None:
    assert public_to_mq(message, now_ms, options) == general_to_mq(message, now_ms, options)


@SETTINGS
@given(representable(), to_mq_options)
def test_jms_to_mq_representable_messages_same_bytes(message: JmsMessage, options: JmsToMqOptions) -> None:
    assert public_to_mq(message, NOW, options) == general_to_mq(message, NOW, options)


_ids = st.sampled_from(["ID:" + "ab" * 24, "ID:" + "AB" * 24, "ID:" + "0" * 48, "ID:host-1-2:1:1:1:1", "x" * 30, ""])
_names = st.sampled_from(["DEV.QUEUE.1", "REPLY.Q", "a&b<c>", "caf\u00e9", "Q%1?x", "x" * 48])
_usr = st.sampled_from(["color", "n", "_x", "JMS_Vendor", "JMSXMine", "\u00e9t\u00e9", "big", "ok", "c"])


@st.composite
def usual_messages(draw: st.DrawFn) -> JmsMessage:
    """What JMS applications send: the fast path takes every one of these (asserted below)."""
    count = draw(st.none() | st.integers(1, 9))
    headers = JmsHeaders(
        destination=draw(st.none() | st.builds(Destination.queue, _names) | st.builds(Destination.topic, _names)),
        delivery_mode=draw(st.sampled_from(list(DeliveryMode))),
        expiration=draw(st.just(0) | st.integers(NOW + 1, NOW + 10**9)),
        priority=draw(st.integers(0, 9)), timestamp=draw(st.just(0) | st.integers(0, 4 * 10**12)),
        message_id=draw(st.none() | _ids), correlation_id=draw(st.none() | _ids | js.xml_text),
        reply_to=draw(st.none() | st.builds(Destination.queue, _names.filter(lambda n: "?" not in n),
                                            st.sampled_from(["", "QM1"]))),
        type=draw(st.none() | st.sampled_from(["quote", "mcd://xmlnsc", "mcd://MRM/set1/t1?format=XML", "a&b"])),
        redelivered=draw(st.booleans()))
    pairs: list[tuple[str, Any]] = [] if count is None else [("JMSXDeliveryCount", jint(count))]
    if draw(st.booleans()):
        pairs.append(("JMSXUserID", jstring(draw(st.sampled_from(["app", "mqm", "user\u00e9"])))))
    if draw(st.booleans()):
        pairs.append(("JMSXAppID", jstring("my.app")))
    for name, values in (("JMS_IBM_MsgType", [1, 2, 8]), ("JMS_IBM_Feedback", [0, 5]),
                         ("JMS_IBM_PutApplType", [0, 28])):
        if draw(st.integers(0, 3)) == 0:    # a reply envelope's JMS_IBM_MsgType, for one
            pairs.append((name, jint(draw(st.sampled_from(values)))))
    values = st.one_of(js.java_values(), st.builds(jchar, st.sampled_from("ab&")), st.builds(jlong, st.integers()
                       .filter(lambda n: -(2**63) <= n < 2**63)), st.builds(jboolean, st.booleans()))
    pairs += draw(st.lists(st.tuples(_usr, values), max_size=6, unique_by=lambda kv: kv[0]))
    body = draw(st.one_of(st.just(NoBody()), st.builds(TextBody, js.xml_text), st.builds(BytesBody, st.binary()),
                          st.builds(MapBody, js.typed_maps(max_size=4)),
                          st.builds(StreamBody, st.lists(js.java_values(), max_size=3).map(tuple)),
                          st.builds(ObjectBody, st.none() | st.binary(min_size=1))))
    return JmsMessage(headers, TypedMap(pairs, what="property"), body)


@SETTINGS
@given(usual_messages(), st.sampled_from([JmsToMqOptions(), JmsToMqOptions(encoding=C.MQENC_NATIVE),
                                          JmsToMqOptions(priority_as_q_def=True)]))
def test_jms_to_mq_usual_messages_take_the_fast_path(message: JmsMessage, options: JmsToMqOptions) -> None:
    general = general_to_mq(message, NOW, options)
    fast = jms_to_mq_bytes_fast(message, now_ms=NOW, options=options)
    if general[0] == "error":               # a value XML cannot carry (js.xml_text allows none): no fast result
        assert fast is None
        return
    assert fast is not None
    assert ("ok", fast[0], fast[1].findings) == general


def test_jms_to_mq_fast_path_repeats_identically_from_its_caches() -> None:
    message = JmsMessage(JmsHeaders(destination=Destination.queue("Q"), reply_to=Destination.queue("R", "QM"),
                                    type="t", timestamp=NOW, correlation_id="c"),
                         TypedMap([("JMSXUserID", jstring("u")), ("n", jint(1)), ("JMS_x", jint(2))], what="property"),
                         TextBody("hi"))
    first = jms_to_mq_bytes_fast(message, now_ms=NOW, options=JmsToMqOptions())
    second = jms_to_mq_bytes_fast(message, now_ms=NOW, options=JmsToMqOptions())
    assert first is not None and second is not None
    assert (first[0], first[1].findings) == (second[0], second[1].findings)
    assert first[1] is not second[1] and first[1].findings is not second[1].findings   # reports are not shared
    assert ("ok", first[0], first[1].findings) == general_to_mq(message, NOW, JmsToMqOptions())
    assert [f.name for f in first[1].findings] == ["JMSXDeliveryCount", "JMS_x"]


def test_jms_to_mq_fast_path_declines_what_it_does_not_handle() -> None:
    base = JmsMessage(JmsHeaders(), TypedMap([("JMSXDeliveryCount", jint(1))], what="property"), TextBody("x"))
    assert jms_to_mq_bytes_fast(base, now_ms=NOW, options=JmsToMqOptions()) is not None
    group = JmsMessage(base.headers, TypedMap([("JMSXGroupID", jstring("g"))], what="property"), base.body)
    null_text = JmsMessage(base.headers, base.properties, TextBody(None))
    bad_char = JmsMessage(base.headers, base.properties, TextBody("\ud800"))
    for message, options in ((group, JmsToMqOptions()), (null_text, JmsToMqOptions()), (bad_char, JmsToMqOptions()),
                             (base, JmsToMqOptions(with_rfh2=False)), (base, JmsToMqOptions(body_ccsid=4242))):
        assert jms_to_mq_bytes_fast(message, now_ms=NOW, options=options) is None
        assert public_to_mq(message, NOW, options) == general_to_mq(message, NOW, options)


# ==================================================================================================
# MQ -> JMS
# ==================================================================================================
@SETTINGS
@given(with_provider_properties(js.messages | with_mcd_type(js.messages)), to_mq_options,
       st.sampled_from([MqToJmsOptions(), MqToJmsOptions(default_ccsid=819)]))
def test_mq_to_jms_of_any_jms_to_mq_output(message: JmsMessage, options: JmsToMqOptions,
                                           back: MqToJmsOptions) -> None:
    try:
        data, _ = jms_to_mq_bytes(message, now_ms=NOW, options=options)
    except MappingError:
        return
    assert public_to_jms(data, NOW, back) == general_to_jms(data, NOW, back)


@SETTINGS
@given(usual_messages())
def test_mq_to_jms_usual_messages_take_the_fast_path(message: JmsMessage) -> None:
    try:
        data, _ = jms_to_mq_bytes(message, now_ms=NOW)
    except MappingError:
        return
    general = general_to_jms(data)
    fast = mq_bytes_to_jms_fast(data, now_ms=NOW, options=MqToJmsOptions())
    if general[2]:                          # a message with findings (e.g. a topic reply-to): the general path
        assert fast is None
        return
    assert fast is not None
    assert ("ok", (fast[0], repr(fast[0])), fast[1].findings) == general


@SETTINGS
@given(mq_messages(), st.integers(-(2**63), 2**63 - 1))
def test_mq_to_jms_of_mq_messages(original: Any, now_ms: int) -> None:
    data = encode_message(original)
    assert public_to_jms(data, now_ms) == general_to_jms(data, now_ms)


# Folder text as other writers may send it: whitespace, entities, character references, CDATA, comments,
# attributes, nil, nested and duplicate elements, bad values; each must convert as the lxml path does. Most
# folders are of the usual kind (so that the fast path runs), a few pieces are odd.
_good = {
    "jms": ["<Dst>queue:///Q</Dst>", "<Dst>topic://a/b</Dst>", "<Tms>1700000000120</Tms>", "<Dlv>2</Dlv>",
            "<Dlv>1</Dlv>", "<Exp>1700000060000</Exp>", "<Pri>4</Pri>", "<Pri>7</Pri>", "<Cid>a&amp;b</Cid>",
            "<Cid>ID:" + "ab" * 24 + "</Cid>", "<Rto>queue://QM1/R</Rto>", "<Rto>queue:///R</Rto>", "<Gid>g1</Gid>",
            "<Seq>3</Seq>"],
    "mcd": ["<Msd>jms_text</Msd>", "<Msd>jms_bytes</Msd>", "<Msd>jms_map</Msd>", "<Msd>jms_none</Msd>",
            "<Msd>xmlnsc</Msd>", "<Msd>MRM</Msd>", "<Type>quote</Type>", "<Set>s</Set>", "<Fmt>f</Fmt>",
            "<Type>{ns}:a/b</Type>", "<Set></Set>", "<Type></Type>"],
    "usr": ["<color>blue</color>", "<color>red</color>", "<n dt='i4'>3</n>", '<n dt="i4">-3</n>',
            "<ok dt='boolean'>1</ok>", "<big dt='i8'>1099511627776</big>", "<f dt='r8'>2.5</f>",
            "<b dt='bin.hex'>0AFF</b>", "<s dt='string'>t</s>",
            "<s xsi:nil='true'></s>", "<b dt='bin.hex' xsi:nil='true'></b>", "<t>a&lt;b&gt;c&quot;&apos;</t>",
            "<t>caf\u00e9 \u4e2d</t>", "<t></t>", "<t>a\nb</t>", "<x dt='i1'>-128</x>", "<y dt='i2'>7</y>",
            "<z dt='int'>9</z>"],
}
_odd = [
    "<Tms> 17 </Tms>", "<Tms>+5</Tms>", "<Dlv>3</Dlv>", "<Exp>0</Exp>", "<Cid>x&#13;y</Cid>", "<Seq>0</Seq>",
    "<Msd> JMS_TEXT </Msd>", "<n dt='i4'> 3 </n>", "<n dt='i1'>300</n>", "<ok dt='boolean'>2</ok>",
    "<f dt='r4'>1e-50</f>", "<b dt='bin.hex'>0</b>", "<s dt=''>t</s>", "<s dt='I4'>5</s>", "<s dt='qq'>5</s>",
    "<s dt='char'>c</s>", "<n dt='i4' xsi:nil='true'></n>", "<s xsi:nil='true'>x</s>", "<t>]]></t>", "<t>\r</t>",
    "<t>\x01</t>", "<t><![CDATA[x]]></t>", "<!-- c -->", " ", "\n", "<g><h>1</h></g>", "<t a='1'>x</t>",
    "<AND>1</AND>", "<JMSXUserID>u</JMSXUserID>", "<e\u00e9>1</e\u00e9>", "<t>&unknown;</t>", "<t>a & b</t>",
    "<Top>a/b</Top>", "<x>1</x>", "<t/>", "<color>green</color>", "<Dst>queue:///Q</Dst>",
    "<Cid xsi:nil='true'></Cid>", "<Type xsi:nil='true'></Type>", "<Dlv dt='i4'>2</Dlv>",
    "<Tms>\u0661\u0662</Tms>", "<n dt='i4'>\u0663</n>", "<Pri>\u00b2</Pri>",   # digits int() reads, XML does not
]


@st.composite
def _folders(draw: st.DrawFn, odd: bool) -> tuple[str, list[str], str, str]:
    names = ["jms", "mcd", "usr", "mqps", "other", "jms a='1'"] if odd else ["jms", "mcd", "usr"]
    name = draw(st.sampled_from(names))
    good = st.sampled_from(_good.get(name, _good["usr"]))
    pieces = draw(st.lists(st.one_of(good, st.sampled_from(_odd)) if odd else good, max_size=5,
                           unique_by=lambda piece: piece.split(">")[0].split(" ")[0]))   # mostly one per name
    pad = draw(st.sampled_from(["", " ", "\x00", " \x00\x00\x00", "\ufeff", "\n"] if odd else ["", "  "]))
    lead = draw(st.sampled_from(["", " ", "\t"] if odd else [""]))
    return name, pieces, pad, lead


def _folder_bytes(folder: tuple[str, list[str], str, str]) -> bytes:
    name, pieces, pad, lead = folder
    close = name.split(" ")[0]
    data = (lead + f"<{name}>" + "".join(pieces) + f"</{close}>").encode("utf-8") + pad.encode("utf-8")
    return data + b" " * (-len(data) % 4)


@st.composite
def raw_messages(draw: st.DrawFn) -> bytes:
    """MQMD v2 + an MQRFH2 of folder text + a body; some with odd folders, some with odd MQMD/RFH2 values."""
    odd, odd_md = draw(st.booleans()), draw(st.booleans())

    def pick(usual: list[Any], unusual: list[Any]) -> Any:
        return draw(st.sampled_from(usual + unusual if odd_md else usual))

    order = draw(st.sampled_from([">", "<"]))
    encoding = C.MQENC_NORMAL if order == ">" else C.MQENC_NATIVE
    reply = draw(st.sampled_from(["", "R", "R2"]))
    put = pick([("", ""), ("20231114", "22132012")], [("2023111X", "22132012"), ("20231114", "22132013"),
                                                      ("", "22132012")])
    md = Mqmd(version=2, encoding=encoding, coded_char_set_id=C.CCSID_UTF8, format=C.MQFMT_RF_HEADER_2,
              priority=pick([4, 7], [-1, 12]), persistence=pick([0, 1], [2]), expiry=pick([-1, 600], [0, -5]),
              msg_id=pick([bytes(24), b"\x01" * 24], []),
              correl_id=pick([bytes(24), b"a&b".ljust(24, b"\x00"), bytes.fromhex("ab" * 24)], []),
              backout_count=pick([0, 2], [-1]), reply_to_q=reply, reply_to_q_mgr="QM1" if reply else "",
              msg_type=pick([1, 8, 2], []), put_date=put[0], put_time=put[1], msg_flags=pick([0, 8, 16], [2]),
              group_id=pick([bytes(24), b"\x07" * 24], []), user_identifier=pick(["", "app"], []),
              appl_identity_data=pick([""], ["x"]), report=pick([0, C.MQRO_COA | C.MQRO_PASS_MSG_ID], [
                  C.MQRO_ACTIVITY, 512, C.MQRO_EXCEPTION_WITH_FULL_DATA | C.MQRO_NAN | C.MQRO_DISCARD_MSG]))
    one_each = (lambda f: f[0]) if not odd else repr          # usual messages: one folder of each name
    folder_data = [_folder_bytes(f) for f in draw(st.lists(_folders(odd), max_size=4, unique_by=one_each))]
    folders = b"".join(struct.pack(order + "i", len(f)) + f for f in folder_data)
    body_format = pick([C.MQFMT_STRING, C.MQFMT_NONE], ["MQADMIN ", C.MQFMT_RF_HEADER_2])
    ccsid = pick([C.CCSID_UTF8, C.MQCCSI_INHERIT, 0, 819], [4242])
    body_encoding = pick([encoding], [C.MQENC_NORMAL, C.MQENC_REVERSED, 785])
    rfh = struct.pack(order + "4s4i8s2i", b"RFH ", 2, 36 + len(folders), body_encoding, ccsid, body_format.encode(), 0,
                      pick([C.CCSID_UTF8], [1200]))
    body = draw(st.sampled_from([b"", b"hello", "caf\u00e9".encode(), b"\xff\xfe",
                                 b"<map><elt name='a'>1</elt></map>"]))
    return encode_mqmd(md) + rfh + folders + body


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(raw_messages(), st.sampled_from([MqToJmsOptions(), MqToJmsOptions(drop_bad_properties=True)]))
def test_mq_to_jms_of_folder_text_as_other_writers_send_it(data: bytes, options: MqToJmsOptions) -> None:
    assert public_to_jms(data, NOW, options) == general_to_jms(data, NOW, options)


@SETTINGS
@given(raw_messages(), st.integers(0, 400), st.binary(min_size=1, max_size=4))
def test_mq_to_jms_of_damaged_bytes(data: bytes, at: int, junk: bytes) -> None:
    damaged = data[:at] + junk + data[at + len(junk):]
    assert public_to_jms(damaged) == general_to_jms(damaged)
    assert public_to_jms(data[:at]) == general_to_jms(data[:at])


def _one_folder_message(folder: str, piece: str, body: bytes = b"body", msd: str = "jms_text") -> bytes:
    md = Mqmd(version=2, encoding=C.MQENC_NORMAL, coded_char_set_id=C.CCSID_UTF8, format=C.MQFMT_RF_HEADER_2,
              priority=4, persistence=C.MQPER_PERSISTENT, put_date="20231114", put_time="22132012")
    data = _folder_bytes((folder, [piece], "", ""))
    mcd = _folder_bytes(("mcd", [f"<Msd>{msd}</Msd>"], "", ""))
    folders = b"".join(struct.pack(">i", len(f)) + f for f in ((mcd, data) if folder != "mcd" else (data,)))
    rfh = struct.pack(">4s4i8s2i", b"RFH ", 2, 36 + len(folders), C.MQENC_NORMAL, C.CCSID_UTF8,
                      C.MQFMT_STRING.encode(), 0, C.CCSID_UTF8)
    return encode_mqmd(md) + rfh + folders + body


def test_mq_to_jms_of_each_folder_piece_alone() -> None:
    """Every piece of the folder strategies (odd ones included) in an otherwise usual message."""
    taken = 0
    for folder in ("jms", "mcd", "usr"):
        for piece in sorted({*_good["jms"], *_good["mcd"], *_good["usr"], *_odd}):
            data = _one_folder_message(folder, piece)
            assert public_to_jms(data) == general_to_jms(data), (folder, piece)
            taken += mq_bytes_to_jms_fast(data, now_ms=NOW, options=MqToJmsOptions()) is not None
    assert taken >= 60                      # each folder's usual pieces (measured: 76)


_MAP_BODIES = [
    '<map></map>', '<map><elt name="a" dt="i4">1</elt><elt name="b">x</elt></map>',
    '<map><elt name="a" dt="i4">-1</elt><elt name="b" dt="i8">1099511627776</elt><elt name="c" dt="i1">300</elt></map>',
    '<map><elt name="a" dt="i4">99999999999999999999</elt></map>', '<map><elt name="a" dt="i4"> 3 </elt></map>',
    '<map><elt name="a" dt="I4">3</elt></map>', '<map><elt name="a" dt="r8">2.5</elt></map>',
    '<map><elt name="a" dt="boolean">1</elt><elt name="n" xsi:nil="true"></elt></map>',
    '<map><elt name="n" dt="bin.hex" xsi:nil="true"></elt><elt name="m" dt="i4" xsi:nil="true"></elt></map>',
    '<map><elt name="a&amp;b &lt;&quot;&gt;">v&lt;w</elt></map>', '<map><elt name="a&#10;b">v</elt></map>',
    '<map><elt name="">v</elt></map>', '<map><elt name="a">1</elt><elt name="a">2</elt></map>',
    "<map><elt name='a'>1</elt></map>", '<map> <elt name="a">1</elt>\n</map>', "<map><a dt='i4'>1</a></map>",
    '<map><elt name="a">x]]>y</elt></map>', '<map><elt name="a">x\ry</elt></map>', '<map><elt>1</elt></map>',
    '<map><elt name="a" dt="char">c</elt><elt name="s" dt="string">t</elt><elt name="\u00e9">\u4e2d</elt></map>',
    '<?xml version="1.0"?><map></map>', '<map><elt name="a"><b/></elt></map>', '<stream></stream>',
    '<map><elt name="a" dt="i4">\u0661</elt></map>', '<map><elt name="a" dt="i2">40000</elt></map>',
    '<map><elt name="a" dt="r8">NaN</elt><elt name="b" dt="r8"> -1e5 </elt><elt name="c" dt="r8">-INF</elt></map>',
    '<map><elt name="a" dt="r8">1e400</elt></map>', '<map><elt name="a" dt="r8">1e-320</elt></map>',
    '<map><elt name="a" dt="r8">0x1p3</elt></map>', '<map><elt name="a" dt="r8" xsi:nil="true"></elt></map>',
]


def test_mq_to_jms_of_map_bodies() -> None:
    taken = 0
    for text in _MAP_BODIES:
        data = _one_folder_message("jms", "<Dlv>2</Dlv>", body=text.encode(), msd="jms_map")
        assert public_to_jms(data) == general_to_jms(data), text
        taken += mq_bytes_to_jms_fast(data, now_ms=NOW, options=MqToJmsOptions()) is not None
    assert taken >= 6                       # the wire form as jms_bodies.encode_map writes it (measured: 8)


def test_mq_to_jms_fast_path_reads_the_usual_ibm_jms_message() -> None:
    message = JmsMessage(
        JmsHeaders(destination=Destination.queue("DEV.QUEUE.1"), expiration=NOW + 60_000, timestamp=NOW + 120,
                   message_id=bytes_to_id(b"\x41" * 24), correlation_id="order-17",
                   reply_to=Destination.queue("REPLY.Q", "QM1"), type="quote"),
        TypedMap([("JMSXDeliveryCount", jint(1)), ("JMSXUserID", jstring("app")), ("color", jstring("b&w <1>")),
                  ("count", jint(3)), ("big", jlong(2**40)), ("ok", jboolean(True))], what="property"),
        TextBody("caf\u00e9 & cr\u00e8me"))
    data, report = jms_to_mq_bytes(message, now_ms=NOW)
    assert report.findings == []
    fast = mq_bytes_to_jms_fast(data, now_ms=NOW, options=MqToJmsOptions())
    assert fast is not None and fast[0] == message and fast[1].findings == []
    assert fast[0].properties["count"].type is JavaType.INT and fast[0].headers.delivery_mode is DeliveryMode.PERSISTENT
    assert ("ok", (fast[0], repr(fast[0])), []) == general_to_jms(data)

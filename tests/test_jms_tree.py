"""The JMSTransport tree: Header_Values, property folders, Message_MetaData, Body — both directions."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mappings.errors import MappingError
from mappings.jms.model import (
    BodyType,
    BytesBody,
    DeliveryMode,
    Destination,
    JmsHeaders,
    JmsMessage,
    MapBody,
    NoBody,
    ObjectBody,
    StreamBody,
    TextBody,
    TypedMap,
    jboolean,
    jbytes,
    jdouble,
    jint,
    jstring,
)
from mappings.jms.tree import (
    PROVIDER,
    STANDARD,
    JmsTree,
    folder_order,
    from_tree,
    property_folder,
    to_element,
    to_tree,
)
from mappings.jms.typed_xml import parse_xml
from mappings.report import Change
from tests.jms_strategies import messages
from tests.test_jms_bodies import WMB_MAP, WMB_MAP_EXPECTED, WMB_STREAM, WMB_STREAM_EXPECTED

HEADERS = JmsHeaders(
    destination=Destination.queue("Q1", "QM1"),
    delivery_mode=DeliveryMode.NON_PERSISTENT,
    expiration=1700000060000,
    priority=7,
    timestamp=1700000000120,
    message_id="ID:414d5120514d31202020202020202020",
    correlation_id="order-17",
    reply_to=Destination.topic("replies/a"),
    type="mcd://XMLNSC",
    redelivered=True,
)


def transport(header_xml: str = "", folders: str = "",
              meta: str | None = "<PayloadType>jms_text</PayloadType>") -> str:
    meta_xml = f"<Message_MetaData>{meta}</Message_MetaData>" if meta is not None else ""
    return (f"<JMSTransport><Transport_Folders><Header_Values>{header_xml}</Header_Values>{folders}"
            f"{meta_xml}</Transport_Folders></JMSTransport>")


def test_golden_transport_xml():
    msg = JmsMessage(HEADERS, TypedMap([("Colour", jstring("blue")), ("JMSXGroupSeq", jint(3)),
                                        ("JMS_IBM_Format", jstring("MQSTR")), ("Weight", jdouble(2.5))]),
                     TextBody("<doc/>"))
    tree = to_tree(msg)
    assert tree.transport == (
        '<JMSTransport xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"><Transport_Folders>'
        "<Header_Values><JMSDestination>queue://QM1/Q1</JMSDestination><JMSDeliveryMode>1</JMSDeliveryMode>"
        "<JMSExpiration>1700000060000</JMSExpiration><JMSPriority>7</JMSPriority>"
        "<JMSTimestamp>1700000000120</JMSTimestamp>"
        "<JMSMessageID>ID:414d5120514d31202020202020202020</JMSMessageID>"
        "<JMSCorrelationID>order-17</JMSCorrelationID><JMSReplyTo>topic://replies/a</JMSReplyTo>"
        "<JMSType>mcd://XMLNSC</JMSType><JMSRedelivered>true</JMSRedelivered></Header_Values>"
        '<Application_Properties><Colour>blue</Colour><Weight dt="r8">2.5</Weight></Application_Properties>'
        '<Standard_Properties><JMSXGroupSeq dt="i4">3</JMSXGroupSeq></Standard_Properties>'
        "<Provider_Properties><JMS_IBM_Format>MQSTR</JMS_IBM_Format></Provider_Properties>"
        "<Message_MetaData><PayloadType>jms_text</PayloadType></Message_MetaData>"
        "</Transport_Folders></JMSTransport>"
    )
    assert tree.body == b"<doc/>"
    back, report = from_tree(tree)
    assert back == JmsMessage(msg.headers, folder_order(msg.properties), msg.body) and not report


@pytest.mark.parametrize(
    ("body", "payload_type", "bit_stream"),
    [
        (NoBody(), "jms_none", b""),
        (TextBody("héllo"), "jms_text", "héllo".encode()),
        (BytesBody(b"\x00\xff"), "jms_bytes", b"\x00\xff"),
        (StreamBody((jint(1), jstring("t"))), "jms_stream",
         b'<stream><elt dt="i4">1</elt><elt>t</elt></stream>'),
        (ObjectBody(b"\xac\xed\x00\x05", "com.example.Order"), "jms_object", b"\xac\xed\x00\x05"),
    ],
)
def test_payload_type_and_body_bit_stream(body, payload_type, bit_stream):
    tree = to_tree(JmsMessage(body=body))
    root = parse_xml(tree.transport, structure="t")
    assert root.findtext("Transport_Folders/Message_MetaData/PayloadType") == payload_type
    assert tree.body == bit_stream
    assert from_tree(tree)[0].body == body


def test_map_body_uses_the_element_per_key_form_when_keys_allow():
    body = MapBody(TypedMap([("Item_1_of_2_String", jstring("x")), ("not a name", jint(2))]))
    assert to_tree(JmsMessage(body=body)).body == (
        b'<map><Item_1_of_2_String>x</Item_1_of_2_String><elt name="not a name" dt="i4">2</elt></map>')


def test_wmb_map_and_stream_examples_as_tree_bodies():
    meta = "<PayloadType>jms_map</PayloadType>"
    msg, _ = from_tree(JmsTree(transport(meta=meta), WMB_MAP.encode()))
    assert msg.body == MapBody(WMB_MAP_EXPECTED)
    msg, _ = from_tree(JmsTree(transport(meta="<PayloadType>jms_stream</PayloadType>"), WMB_STREAM.encode()))
    assert msg.body == StreamBody(WMB_STREAM_EXPECTED)


def test_null_text_and_object_are_kept_apart_from_empty():
    for body in (TextBody(None), TextBody(""), ObjectBody(None), ObjectBody(b"", "x.Y")):
        assert from_tree(to_tree(JmsMessage(body=body)))[0].body == body


def test_properties_go_to_their_folders_and_awkward_names_use_elt():
    assert property_folder("JMSXUserID") == STANDARD and property_folder("JMS_IBM_X") == PROVIDER
    msg = JmsMessage(properties=TypedMap([("$price", jint(5)), ("raw", jbytes(None)),
                                          ("ok", jboolean(True))]))
    xml = to_tree(msg).transport
    assert '<elt name="$price" dt="i4">5</elt>' in xml
    assert '<raw dt="bin.hex" xsi:nil="true"/>' in xml
    assert from_tree(to_tree(msg))[0] == msg


def test_bytes_correlation_id_is_bin_hex():
    msg = JmsMessage(JmsHeaders(correlation_id=b"\x00\x01\xfe"))
    tree = to_tree(msg)
    assert '<JMSCorrelationID dt="bin.hex">0001FE</JMSCorrelationID>' in tree.transport
    assert from_tree(tree)[0] == msg


@given(messages)
def test_model_tree_model_round_trip(msg):
    back, report = from_tree(to_tree(msg))
    assert back == JmsMessage(msg.headers, folder_order(msg.properties), msg.body)
    assert not report


@given(messages)
def test_pretty_printed_tree_reads_back_the_same(msg):
    back, _ = from_tree(to_tree(msg, pretty=True))
    assert back == JmsMessage(msg.headers, folder_order(msg.properties), msg.body)


def test_missing_metadata_defaults_to_bytes_message_with_a_finding():
    msg, report = from_tree(JmsTree(transport(meta=None), b"\x01\x02"))
    assert msg.body == BytesBody(b"\x01\x02") and msg.body_type is BodyType.BYTES
    assert [(f.change, f.name) for f in report.findings] == [(Change.DEFAULTED, "Message_MetaData")]


def test_minimal_header_folder_gives_jms_defaults_and_tolerant_reading():
    msg, _ = from_tree(JmsTree(transport("<JMSRedelivered>1</JMSRedelivered><JMSPriority> 9 </JMSPriority>"),
                               b"t"))
    assert msg.headers == JmsHeaders(priority=9, redelivered=True)
    assert msg.body == TextBody("t")


def test_unknown_header_and_folder_are_reported_dropped():
    _, report = from_tree(JmsTree(transport("<JMSFoo>1</JMSFoo>", "<Other_Folder/>"), b""))
    assert [(f.change, f.name) for f in report.findings] == [(Change.DROPPED, "JMSFoo"),
                                                            (Change.DROPPED, "Other_Folder")]


def test_jms_none_with_a_body_reports_the_dropped_bytes():
    msg, report = from_tree(JmsTree(transport(meta="<PayloadType>jms_none</PayloadType>"), b"xx"))
    assert msg.body == NoBody() and report.findings[0].name == "Body"


def test_to_element_is_an_lxml_tree():
    root = to_element(JmsMessage(HEADERS))
    assert root.tag == "JMSTransport"
    assert root.findtext("Transport_Folders/Header_Values/JMSPriority") == "7"


@pytest.mark.parametrize(
    ("tree", "reason", "field"),
    [
        (JmsTree("<Root/>", b""), "expected <JMSTransport>", None),
        (JmsTree("<JMSTransport/>", b""), "Transport_Folders", None),
        (JmsTree("<JMSTransport><Transport_Folders/></JMSTransport>", b""), "Header_Values", None),
        (JmsTree(transport("<JMSPriority>10</JMSPriority>"), b""), "outside 0..9", "JMSPriority"),
        (JmsTree(transport("<JMSPriority>x</JMSPriority>"), b""), "not an integer", "JMSPriority"),
        (JmsTree(transport("<JMSDeliveryMode>3</JMSDeliveryMode>"), b""), "outside 1..2", "JMSDeliveryMode"),
        (JmsTree(transport("<JMSTimestamp>1.5</JMSTimestamp>"), b""), "not an integer", "JMSTimestamp"),
        (JmsTree(transport("<JMSExpiration>99999999999999999999</JMSExpiration>"), b""), "outside",
         "JMSExpiration"),
        (JmsTree(transport("<JMSRedelivered>yes</JMSRedelivered>"), b""), "true/false", "JMSRedelivered"),
        (JmsTree(transport("<JMSDestination>Q1</JMSDestination>"), b""), "queue://", "JMSDestination"),
        (JmsTree(transport("<JMSReplyTo>queue://QM</JMSReplyTo>"), b""), "queue://", "JMSReplyTo"),
        (JmsTree(transport("<JMSPriority>1</JMSPriority><JMSPriority>2</JMSPriority>"), b""), "twice",
         "JMSPriority"),
        (JmsTree(transport("<JMSType><x/></JMSType>"), b""), "cannot contain elements", "JMSType"),
        (JmsTree(transport('<JMSCorrelationID dt="i4">1</JMSCorrelationID>'), b""), "string or bin.hex",
         "JMSCorrelationID"),
        (JmsTree(transport('<JMSCorrelationID dt="bin.hex">1</JMSCorrelationID>'), b""), "hex",
         "JMSCorrelationID"),
        (JmsTree(transport(folders="<Application_Properties><p dt='i1'>999</p></Application_Properties>"),
                 b""), "outside", "p"),
        (JmsTree(transport(folders="<Application_Properties><AND>1</AND></Application_Properties>"), b""),
         "reserved word", "'AND'"),
        (JmsTree(transport(folders="<Application_Properties><p>1</p></Application_Properties>"
                                   "<Standard_Properties><p>2</p></Standard_Properties>"), b""),
         "duplicate property", "p"),
        (JmsTree(transport(meta="<PayloadType>jms_xml</PayloadType>"), b""), "unknown payload type",
         "PayloadType"),
        (JmsTree(transport(), b"\xff"), "not valid UTF-8", None),
        (JmsTree(transport(meta="<PayloadType>jms_map</PayloadType>"), b"<stream/>"), "expected <map>", None),
        (JmsTree("<JMSTransport>", b""), "malformed XML", None),
    ],
)
def test_tree_errors(tree, reason, field):
    with pytest.raises(MappingError, match=reason) as info:
        from_tree(tree)
    assert info.value.field == field


def test_writing_values_xml_cannot_carry_is_an_error():
    with pytest.raises(MappingError) as info:
        to_tree(JmsMessage(JmsHeaders(message_id="ID:\x00")))
    assert info.value.field == "JMSMessageID"
    with pytest.raises(MappingError) as info:
        to_tree(JmsMessage(properties={"p": jstring("\x01")}))
    assert info.value.field == "p"
    with pytest.raises(MappingError, match="surrogate"):
        to_tree(JmsMessage(body=TextBody("\ud800")))


def test_header_values_folder_is_always_written():
    xml = to_tree(JmsMessage()).transport
    assert "<Header_Values><JMSDeliveryMode>2</JMSDeliveryMode>" in xml


@given(messages, st.integers(0, 10_000), st.text(max_size=4), st.integers(0, 3))
def test_damaged_trees_raise_only_mapping_error(msg, position, insert, cut):
    tree = to_tree(msg)
    at = position % (len(tree.transport) + 1)
    damaged = tree.transport[:at] + insert + tree.transport[at + cut:]
    try:
        from_tree(JmsTree(damaged, tree.body))
    except MappingError:
        pass


@given(st.binary(max_size=60), st.sampled_from(["jms_text", "jms_map", "jms_stream", "jms_none", "x"]))
def test_any_body_bytes_raise_only_mapping_error(body, payload_type):
    try:
        from_tree(JmsTree(transport(meta=f"<PayloadType>{payload_type}</PayloadType>"), body))
    except MappingError:
        pass

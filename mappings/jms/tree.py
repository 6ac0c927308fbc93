"""The JMSTransport message tree (Header_Values, property folders, Message_MetaData) <-> the JMS model.

Implements the JMSTransport tree of WebSphere Message Broker docs "Representation of messages across the
JMS Transport", with "JMS input message header and property data" (the ten header fields), "Preservation
of Java type" (properties carry ``dt=``; headers have fixed types and carry none), "JMS Message payload"
(Map/Stream bodies as XML, the rest as a bit stream) and "JMS message for output". The XML layout
opens the model -> tree section below.
"""
from __future__ import annotations

from dataclasses import dataclass

from lxml import etree

from mappings.errors import MappingError
from mappings.jms.bodies import decode_map, decode_stream, encode_map_elements, encode_stream, is_xml_name
from mappings.jms.domain import output_body_type
from mappings.jms.model import (
    Body,
    BodyType,
    BytesBody,
    DeliveryMode,
    Destination,
    JavaValue,
    JmsHeaders,
    JmsMessage,
    MapBody,
    NoBody,
    ObjectBody,
    StreamBody,
    TextBody,
    TypedMap,
)
from mappings.jms.typed_xml import (
    XSI_NIL,
    XSI_NS,
    decode_value,
    element_name,
    encode_value,
    is_nil,
    only_text,
    parse_xml,
)
from mappings.report import ConversionReport

STRUCTURE = "JMSTransport"
APPLICATION, STANDARD, PROVIDER = "Application_Properties", "Standard_Properties", "Provider_Properties"
PROPERTY_FOLDERS = (APPLICATION, STANDARD, PROVIDER)
HEADER_ORDER = ("JMSDestination", "JMSDeliveryMode", "JMSExpiration", "JMSPriority", "JMSTimestamp",
                "JMSMessageID", "JMSCorrelationID", "JMSReplyTo", "JMSType", "JMSRedelivered")


@dataclass(frozen=True, slots=True)
class JmsTree:
    """The JMSTransport folder as XML text, and the Body as the bit stream the domain parser reads."""

    transport: str
    body: bytes


def property_folder(name: str) -> str:
    """Which properties subfolder holds ``name`` (WebSphere Message Broker docs "JMS message
    structure": Properties)."""
    if name.startswith("JMSX"):
        return STANDARD
    if name.startswith("JMS"):
        return PROVIDER
    return APPLICATION


def folder_order(properties: TypedMap) -> TypedMap:
    """The properties in the order a tree gives them back: folder by folder, each in message order."""
    return TypedMap(
        [(k, v) for folder in PROPERTY_FOLDERS for k, v in properties.pairs if property_folder(k) == folder],
        what="property",
    )


# --------------------------------------------------------------------------------- model -> tree

# The documents name the folders and fields but print no layout, so the XML layout is ours, with their names:
#
#     <JMSTransport>
#       <Transport_Folders>
#         <Header_Values>
#           <JMSDestination>queue://QM1/Q1</JMSDestination>   URI, omitted when null
#           <JMSDeliveryMode>2</JMSDeliveryMode>              javax.jms.DeliveryMode: 1 or 2
#           <JMSExpiration>0</JMSExpiration>                  epoch ms, 0 = never
#           <JMSPriority>4</JMSPriority>
#           <JMSTimestamp>1700000000120</JMSTimestamp>        epoch ms
#           <JMSMessageID>ID:414d51...</JMSMessageID>         omitted when null
#           <JMSCorrelationID>abc</JMSCorrelationID>          bytes form: dt="bin.hex"
#           <JMSReplyTo>queue://QM1/R</JMSReplyTo>            omitted when null
#           <JMSType>mcd://XML</JMSType>                      omitted when null
#           <JMSRedelivered>false</JMSRedelivered>            true/false (0/1 also read)
#         </Header_Values>
#         <Application_Properties> user properties, dt= typed (mappings.jms.typed_xml)
#         <Standard_Properties>    JMSX* properties
#         <Provider_Properties>    JMS_<vendor>_* (and any other JMS*) properties
#         <Message_MetaData>
#           <PayloadType>jms_map</PayloadType>
#           <ObjectClass>com.example.Order</ObjectClass>      ObjectMessage class name, when known
#           <PayloadNull>true</PayloadNull>                   a null text/object (empty otherwise)
#         </Message_MetaData>
#       </Transport_Folders>
#     </JMSTransport>
#
# A property element is named after the property; a name that is not an XML name (Java identifiers may
# contain ``$``) is written ``<elt name="$x" dt="i4">``. Property folders are written only when they have
# properties; reading gives the properties folder by folder (Application, Standard, Provider), each in
# document order. The Body bit stream: Text as UTF-8, Bytes and Object as is, Map in the broker's
# element-per-key XML, Stream as ``<stream><elt>``, none as empty.


def _set_text(element: etree._Element, text: str, field: str) -> None:
    try:
        element.text = text
    except ValueError:
        raise MappingError("value contains characters XML cannot carry", structure=STRUCTURE,
                           field=field) from None


def _header_values(headers: JmsHeaders, parent: etree._Element) -> None:
    folder = etree.SubElement(parent, "Header_Values")

    def add(name: str, text: str, **attrs: str) -> None:
        element = etree.SubElement(folder, name, **attrs)
        _set_text(element, text, name)

    if headers.destination is not None:
        add("JMSDestination", headers.destination.uri)
    add("JMSDeliveryMode", str(int(headers.delivery_mode)))
    add("JMSExpiration", str(headers.expiration))
    add("JMSPriority", str(headers.priority))
    add("JMSTimestamp", str(headers.timestamp))
    if headers.message_id is not None:
        add("JMSMessageID", headers.message_id)
    if isinstance(headers.correlation_id, bytes):
        add("JMSCorrelationID", headers.correlation_id.hex().upper(), dt="bin.hex")
    elif headers.correlation_id is not None:
        add("JMSCorrelationID", headers.correlation_id)
    if headers.reply_to is not None:
        add("JMSReplyTo", headers.reply_to.uri)
    if headers.type is not None:
        add("JMSType", headers.type)
    add("JMSRedelivered", "true" if headers.redelivered else "false")


def _property_element(parent: etree._Element, name: str, value: JavaValue) -> None:
    dt, text = encode_value(value, name=name)
    if is_xml_name(name):
        element = etree.SubElement(parent, name)
    else:
        element = etree.SubElement(parent, "elt", name=name)
    if dt is not None:
        element.set("dt", dt)
    if text is None:
        element.set(XSI_NIL, "true")
    else:
        _set_text(element, text, name)


def _body_bytes(body: Body) -> bytes:
    if isinstance(body, TextBody):
        try:
            return (body.text or "").encode("utf-8")
        except UnicodeEncodeError as exc:
            raise MappingError(f"text has an unpaired surrogate at index {exc.start}",
                               structure="TextMessage body") from None
    if isinstance(body, BytesBody):
        return body.data
    if isinstance(body, ObjectBody):
        return body.data or b""
    if isinstance(body, MapBody):
        return encode_map_elements(body).encode("utf-8")
    if isinstance(body, StreamBody):
        return encode_stream(body).encode("utf-8")
    return b""


def to_element(message: JmsMessage) -> etree._Element:
    """The JMSTransport folder as an lxml element."""
    root = etree.Element("JMSTransport", nsmap={"xsi": XSI_NS})
    folders = etree.SubElement(root, "Transport_Folders")
    _header_values(message.headers, folders)
    for folder_name in PROPERTY_FOLDERS:
        pairs = [(k, v) for k, v in message.properties.pairs if property_folder(k) == folder_name]
        if pairs:
            folder = etree.SubElement(folders, folder_name)
            for name, value in pairs:
                _property_element(folder, name, value)
    meta = etree.SubElement(folders, "Message_MetaData")
    etree.SubElement(meta, "PayloadType").text = message.body_type.payload_value
    body = message.body
    if isinstance(body, ObjectBody) and body.class_name:
        _set_text(etree.SubElement(meta, "ObjectClass"), body.class_name, "ObjectClass")
    null_text = isinstance(body, TextBody) and body.text is None
    if null_text or (isinstance(body, ObjectBody) and body.data is None):
        etree.SubElement(meta, "PayloadNull").text = "true"
    return root


def to_tree(message: JmsMessage, *, pretty: bool = False) -> JmsTree:
    """Render a JMS message as the JMSTransport XML plus the Body bit stream."""
    transport = etree.tostring(to_element(message), encoding="unicode", pretty_print=pretty)
    return JmsTree(transport, _body_bytes(message.body))


# --------------------------------------------------------------------------------- tree -> model


def _long(text: str, field: str, low: int, high: int) -> int:
    value = text.strip()
    if not value.lstrip("+-").isdigit() or not value.isascii() or value.count("-") + value.count("+") > 1:
        raise MappingError(f"{value!r} is not an integer", structure="Header_Values", field=field)
    number = int(value)
    if not low <= number <= high:
        raise MappingError(f"{number} is outside {low}..{high}", structure="Header_Values", field=field)
    return number


def _destination(text: str, field: str) -> Destination:
    try:
        return Destination.parse(text)
    except MappingError as exc:
        raise MappingError(exc.reason, structure="Header_Values", field=field) from None


def _read_headers(folder: etree._Element, report: ConversionReport) -> JmsHeaders:
    values: dict[str, object] = {}
    seen: set[str] = set()
    for element in folder:
        if not isinstance(element.tag, str):
            continue
        name = element_name(element)
        if name in seen:
            raise MappingError("header appears twice", structure="Header_Values", field=name,
                               offset=element.sourceline)
        seen.add(name)
        text = only_text(element, structure="Header_Values", name=name) or ""
        if name == "JMSDestination":
            values["destination"] = _destination(text, name)
        elif name == "JMSReplyTo":
            values["reply_to"] = _destination(text, name)
        elif name == "JMSDeliveryMode":
            values["delivery_mode"] = DeliveryMode(_long(text, name, 1, 2))
        elif name == "JMSExpiration":
            values["expiration"] = _long(text, name, -(2**63), 2**63 - 1)
        elif name == "JMSTimestamp":
            values["timestamp"] = _long(text, name, -(2**63), 2**63 - 1)
        elif name == "JMSPriority":
            values["priority"] = _long(text, name, 0, 9)
        elif name == "JMSMessageID":
            values["message_id"] = text
        elif name == "JMSType":
            values["type"] = text
        elif name == "JMSCorrelationID":
            if element.get("dt") is not None:
                value = decode_value(element.get("dt"), text, name=name, structure="header")
                if not isinstance(value.value, str | bytes):
                    raise MappingError("JMSCorrelationID must be a string or bin.hex",
                                       structure="Header_Values", field=name)
                values["correlation_id"] = value.value
            else:
                values["correlation_id"] = text
        elif name == "JMSRedelivered":
            flag = text.strip().lower()
            if flag not in ("true", "false", "1", "0"):
                raise MappingError(f"{text!r} is not true/false", structure="Header_Values", field=name)
            values["redelivered"] = flag in ("true", "1")
        else:
            report.dropped(name, "not a JMS header field")
    return JmsHeaders(**values)  # type: ignore[arg-type]


def _read_properties(folder: etree._Element, into: list[tuple[str, JavaValue]]) -> None:
    structure = element_name(folder)
    for element in folder:
        if not isinstance(element.tag, str):
            continue
        tag = element_name(element)
        name = element.get("name") if tag == "elt" and element.get("name") is not None else tag
        assert name is not None
        text = only_text(element, structure=structure, name=name)
        into.append((name, decode_value(element.get("dt"), text, name=name, nil=is_nil(element))))


def _meta(folder: etree._Element | None) -> tuple[str | None, str | None, bool]:
    if folder is None:
        return None, None, False
    payload_type = folder.findtext("PayloadType")
    object_class = folder.findtext("ObjectClass") or None
    null = (folder.findtext("PayloadNull") or "").strip().lower() in ("true", "1")
    return payload_type, object_class, null


def _body(body_type: BodyType, data: bytes, object_class: str | None, null: bool,
          report: ConversionReport) -> Body:
    if body_type is BodyType.MESSAGE:
        if data:
            report.dropped("Body", f"{len(data)} bytes in a jms_none message")
        return NoBody()
    if body_type is BodyType.TEXT:
        if null:
            return TextBody(None)
        try:
            return TextBody(data.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise MappingError(f"text is not valid UTF-8 ({exc.reason})", structure="Body",
                               offset=exc.start) from None
    if body_type is BodyType.BYTES:
        return BytesBody(data)
    if body_type is BodyType.OBJECT:
        return ObjectBody(None if null else data, object_class)
    if body_type is BodyType.MAP:
        return decode_map(data)
    return decode_stream(data)


def from_tree(tree: JmsTree) -> tuple[JmsMessage, ConversionReport]:
    """Read a JMSTransport tree and Body back into a JMS message, reporting what did not fit."""
    report = ConversionReport()
    root = parse_xml(tree.transport, structure=STRUCTURE)
    if element_name(root) != "JMSTransport":
        raise MappingError(f"root element is <{element_name(root)}>, expected <JMSTransport>",
                           structure=STRUCTURE)
    folders = root.find("Transport_Folders")
    if folders is None:
        raise MappingError("missing Transport_Folders", structure=STRUCTURE)
    header_folder = folders.find("Header_Values")
    if header_folder is None:
        raise MappingError("missing Header_Values (the specification makes it mandatory)", structure=STRUCTURE)
    headers = _read_headers(header_folder, report)
    pairs: list[tuple[str, JavaValue]] = []
    meta_folder = None
    for folder in folders:
        if not isinstance(folder.tag, str):
            continue
        name = element_name(folder)
        if name in PROPERTY_FOLDERS:
            _read_properties(folder, pairs)
        elif name == "Message_MetaData":
            meta_folder = folder
        elif name != "Header_Values":
            report.dropped(name, "unknown JMSTransport folder")
    payload_type, object_class, null = _meta(meta_folder)
    body_type, defaulted = output_body_type(payload_type)
    if defaulted:
        report.defaulted("Message_MetaData", 'no payload type: BytesMessage ("JMS message for output")')
    body = _body(body_type, tree.body, object_class, null, report)
    try:
        message = JmsMessage(headers, TypedMap(pairs, what="property"), body)
    except MappingError as exc:
        raise MappingError(exc.reason, structure=f"{STRUCTURE} properties", field=exc.field) from None
    return message, report

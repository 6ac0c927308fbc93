"""Message-domain derivation: the valid-type matrix of WebSphere Message Broker docs
"Order of precedence for deriving the message domain", mcd:// JMSType URIs, class defaults, output."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from mappings.errors import MappingError
from mappings.jms.domain import (
    CLASS_DEFAULTS,
    BackOut,
    Domain,
    DomainDecision,
    InputDomainConfig,
    McdType,
    Source,
    derive_domain,
    output_body_type,
    parse_mcd_uri,
)
from mappings.jms.model import BodyType

B, T, M, S, OBJ, N = (BodyType.BYTES, BodyType.TEXT, BodyType.MAP, BodyType.STREAM, BodyType.OBJECT,
                    BodyType.MESSAGE)

# The document's matrix, transcribed row by row as (domain, Bytes, Text, Map, Stream, Object).
WMB_MATRIX = [
    (Domain.BLOB, 1, 1, 0, 0, 1),
    (Domain.XML, 0, 1, 0, 0, 0),
    (Domain.XMLNS, 0, 1, 0, 0, 0),
    (Domain.XMLNSC, 0, 1, 0, 0, 0),
    (Domain.MRM, 1, 1, 0, 0, 0),
    (Domain.JMSMAP, 0, 0, 1, 0, 0),
    (Domain.JMSSTREAM, 0, 0, 0, 1, 0),
    (Domain.MIME, 1, 1, 0, 0, 0),
    (Domain.IDOC, 1, 1, 0, 0, 0),
]


@pytest.mark.parametrize("row", WMB_MATRIX, ids=lambda r: r[0].value)
def test_configured_domain_follows_the_wmb_matrix(row):
    domain, *marks = row
    config = InputDomainConfig(domain, "set", "type", "fmt")
    for body_type, valid in zip((B, T, M, S, OBJ), marks, strict=True):
        result = derive_domain(body_type, "mcd://XML", config)
        if valid:
            assert isinstance(result, DomainDecision), (domain, body_type)
            assert result.domain is domain and result.source is Source.CONFIGURED
        else:
            assert isinstance(result, BackOut), (domain, body_type)
            assert result.domain is domain and result.body_type is body_type
            assert body_type.java_class in result.reason and domain.value in result.reason


def test_base_message_backs_out_for_any_configured_domain():
    for domain in Domain:
        result = derive_domain(N, None, InputDomainConfig(domain, "s", "t"))
        assert isinstance(result, BackOut) and "without a payload" in result.reason


def test_configured_domain_beats_jmstype():
    result = derive_domain(T, "mcd://XMLNS", InputDomainConfig(Domain.BLOB))
    assert result == DomainDecision(Domain.BLOB, Source.CONFIGURED)


def test_configured_mrm_takes_set_and_type_from_config_or_jmstype():
    from_config = derive_domain(B, None, InputDomainConfig(Domain.MRM, "S1", "T1", "F1"))
    assert from_config == DomainDecision(Domain.MRM, Source.CONFIGURED, "S1", "T1", "F1")
    from_uri = derive_domain(B, "mcd://MRM/S2/T2/?format=F2", InputDomainConfig(Domain.MRM))
    assert from_uri == DomainDecision(Domain.MRM, Source.CONFIGURED, "S2", "T2", "F2")
    missing = derive_domain(B, "plain", InputDomainConfig(Domain.MRM))
    assert isinstance(missing, BackOut) and "message set and type" in missing.reason


# ------------------------------------------------------------------------- rule 2: JMSType URIs


@pytest.mark.parametrize(
    ("jms_type", "expected"),
    [
        ("mcd://MRM/SWIFTXML2005/{http://SWIFT/2005}:Document/?format=SWIFT",
         McdType(Domain.MRM, "SWIFTXML2005", "{http://SWIFT/2005}:Document", "SWIFT")),
        ("mcd://MRM/set/type", McdType(Domain.MRM, "set", "type")),
        ("mcd://mrm/set/type/", McdType(Domain.MRM, "set", "type")),
        ("mcd://XML", McdType(Domain.XML)),
        ("mcd://xml/", McdType(Domain.XML)),
        ("MCD://XmlNs", McdType(Domain.XMLNS)),
        ("mcd://XMLNSC", McdType(Domain.XMLNSC)),
        ("mcd://xmlnsc/MySet", McdType(Domain.XMLNSC, "MySet")),
        ("mcd://IDOC/set/?format=f", McdType(Domain.IDOC, "set", None, "f")),
        ("mcd://idoc", McdType(Domain.IDOC)),
        ("mcd://MIME", McdType(Domain.MIME)),
        ("mcd://MRM", McdType(Domain.MRM, conforms=False)),
        ("mcd://MRM/onlyset", McdType(Domain.MRM, conforms=False)),
        ("mcd://MRM/s/t?format=f", McdType(Domain.MRM, "s", "t", "f")),   # as MQ -> JMS writes it
        ("mcd://MRM/s/t/?fmt=f", McdType(Domain.MRM, conforms=False)),
        ("mcd://XML/extra", None),
        ("mcd://XML/?format=f", None),
        ("mcd://XMLNSC/a/b", None),
        ("mcd://JMSMap", None),
        ("mcd://BLOB", None),
        ("mcd:/XML", None),
        ("MyAppType", None),
        ("", None),
        (None, None),
    ],
)
def test_parse_mcd_uri(jms_type, expected):
    assert parse_mcd_uri(jms_type) == expected


@pytest.mark.parametrize(
    ("body_type", "jms_type", "domain"),
    [
        (T, "mcd://XML", Domain.XML),
        (T, "mcd://xmlns", Domain.XMLNS),
        (T, "mcd://XMLNSC/set", Domain.XMLNSC),
        (B, "mcd://MRM/s/t/?format=CWF", Domain.MRM),
        (B, "mcd://MIME", Domain.MIME),
        (T, "mcd://IDOC", Domain.IDOC),
    ],
)
def test_jmstype_chooses_the_domain(body_type, jms_type, domain):
    result = derive_domain(body_type, jms_type)
    assert isinstance(result, DomainDecision) and result.domain is domain and result.source is Source.JMSTYPE


def test_jmstype_domain_keeps_set_type_format():
    assert derive_domain(B, "mcd://MRM/s/t/?format=CWF") == DomainDecision(
        Domain.MRM, Source.JMSTYPE, "s", "t", "CWF")


def test_jmstype_domain_invalid_for_the_message_backs_out():
    result = derive_domain(B, "mcd://XML")
    assert isinstance(result, BackOut) and result.domain is Domain.XML
    assert "BytesMessage" in result.reason and "JMSType" in result.reason


def test_non_conforming_mrm_jmstype_is_handled_as_blob():
    result = derive_domain(B, "mcd://MRM/only")
    assert isinstance(result, DomainDecision) and result.domain is Domain.BLOB
    assert result.source is Source.JMSTYPE and "does not conform" in result.note
    assert isinstance(derive_domain(M, "mcd://MRM"), BackOut)  # a MapMessage is not valid for BLOB


# ------------------------------------------------------------------------- rule 3: class defaults


@pytest.mark.parametrize(
    ("body_type", "domain"),
    [(T, Domain.XML), (B, Domain.BLOB), (M, Domain.JMSMAP), (S, Domain.JMSSTREAM), (OBJ, Domain.BLOB),
     (N, Domain.BLOB)],
)
@pytest.mark.parametrize("jms_type", [None, "", "PlainType", "mcd://XML/notconforming"])
def test_class_defaults(body_type, domain, jms_type):
    result = derive_domain(body_type, jms_type)
    assert result == DomainDecision(domain, Source.CLASS,
                                    note=f"JMSType {jms_type!r} is not an mcd:// URI" if jms_type else "")


@given(st.sampled_from(list(BodyType)), st.one_of(st.none(), st.text(max_size=40)),
       st.one_of(st.none(), st.sampled_from(list(Domain))))
def test_derivation_always_returns_a_value(body_type, jms_type, domain):
    result = derive_domain(body_type, jms_type, InputDomainConfig(domain, "s", "t"))
    assert isinstance(result, DomainDecision | BackOut)
    if isinstance(result, DomainDecision) and result.source is Source.CLASS:
        assert result.domain is CLASS_DEFAULTS[body_type]


def test_bad_body_type_is_a_mapping_error():
    with pytest.raises(MappingError):
        derive_domain("jms_text", None)  # type: ignore[arg-type]


# ------------------------------------------------------------------------- output side


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (None, (B, True)),
        ("", (B, True)),
        ("  ", (B, True)),
        ("jms_none", (N, False)),
        ("jms_text", (T, False)),
        ("jms_bytes", (B, False)),
        ("jms_byte", (B, False)),
        ("JMS_MAP", (M, False)),
        ("jms_stream", (S, False)),
        ("jms_object", (OBJ, False)),
    ],
)
def test_output_body_type(payload, expected):
    assert output_body_type(payload) == expected


def test_unknown_payload_type_names_the_field():
    with pytest.raises(MappingError, match="jms_json") as info:
        output_body_type("jms_json")
    assert info.value.structure == "Message_MetaData" and info.value.field == "PayloadType"

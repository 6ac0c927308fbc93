"""JMS properties <-> the MQRFH2 usr folder (model path): names a usr folder can carry, dt= typing
(mappings.jms.typed_xml), what is dropped or coerced on the way."""
from __future__ import annotations

from mappings.conversions.jms_mq.context import ToJms, ToMq
from mappings.conversions.jms_mq.spec import (
    MAPPED_PROPERTIES,
    USR,
    USR_NAME,
    XML_WS,
    usr_problem,
)
from mappings.errors import MappingError
from mappings.jms.model import (
    NULLABLE_TYPES,
    RESERVED_WORDS,
    JavaType,
    JavaValue,
    identifier_problem,
)
from mappings.jms.typed_xml import DT_TO_TYPE, decode_value, encode_value
from mappings.mq.rfh2 import RfhElement, RfhFolder

#: The finding of a char property (also encode's).
CHAR_AS_STRING = "char -> String: dt=char is not an RFH2 property type (IBM MQ: MQRFH2 folder restrictions)"


def properties_to_usr(ctx: ToMq) -> RfhFolder | None:
    elements: list[RfhElement] = []
    for name, value in ctx.message.properties.pairs:
        if name in ctx.used:
            continue
        problem = usr_problem(name)
        if problem is not None:
            ctx.report.dropped(name, problem)
            continue
        if value.type is JavaType.CHAR:
            ctx.report.coerced(name, CHAR_AS_STRING)
            value = JavaValue(JavaType.STRING, value.value)
        dt, text = encode_value(value, name=name, structure="usr folder property")
        elements.append(RfhElement(name, text, dt))
    return RfhFolder(USR, tuple(elements)) if elements else None


def usr_to_properties(folder: RfhFolder, ctx: ToJms) -> None:
    seen: set[str] = {name for name, _ in ctx.props}
    for el in folder.elements:
        where = f"usr/{el.name}"
        if el.is_group:
            ctx.report.dropped(where, "the usr folder allows no groups (IBM MQ: MQRFH2 folder restrictions)")
            continue
        # An ASCII usr name that is not a selector keyword is a Java identifier: skip the Unicode check.
        fast_ok = USR_NAME.fullmatch(el.name) is not None and el.name.upper() not in RESERVED_WORDS
        problem = None if fast_ok else identifier_problem(el.name)
        if problem is not None:
            ctx.report.dropped(where, f"not a JMS property name: {problem}")
            continue
        if el.name in MAPPED_PROPERTIES:
            ctx.report.dropped(where, "this property comes from the MQMD (IBM MQ JMS mapping), not from usr")
            continue
        if el.name in seen:
            ctx.report.dropped(where, "duplicate property: the first one is used")
            continue
        seen.add(el.name)
        if el.value is None and DT_TO_TYPE.get((el.dt or "string").strip(XML_WS).lower()) not in NULLABLE_TYPES:
            ctx.report.dropped(where, f"xsi:nil with dt={el.dt}: a JMS property cannot be a null primitive")
            continue
        try:
            value = decode_value(el.dt, el.value, name=el.name, nil=el.value is None, structure="usr folder property")
        except MappingError as exc:
            if not ctx.drop_bad_properties:
                raise
            ctx.report.dropped(where, f"{exc.reason} (option drop_bad_properties)")
            continue
        ctx.props.append((el.name, value))


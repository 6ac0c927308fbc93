"""What the bytes paths (encode, decode) share: the MQMD v2 and MQRFH2 layouts as ``struct`` formats,
the bounded caches, and the signal that a message needs the model path."""
from __future__ import annotations

import struct
from typing import Any

from mappings.conversions.jms_mq.spec import put_date_time
from mappings.mq import constants as C

MAX_CACHE = 4096
#: MQMD version 2 and the fixed part of an MQRFH2 (IBM MQ docs "MQMD - Message descriptor", "MQRFH2 - Rules
#: and formatting header 2"), and one MQLONG, per integer byte order.
MQMD_V2 = {o: struct.Struct(o + "4s7i8s2i24s24si48s48s12s32s32si28s8s8s4s24s4i") for o in "<>"}
RFH2_FIXED = {o: struct.Struct(o + "4s4i8s2i") for o in "<>"}
LONG = {o: struct.Struct(o + "i") for o in "<>"}
assert MQMD_V2[">"].size == C.MQMD_LENGTH_2 and RFH2_FIXED[">"].size == C.MQRFH_STRUC_LENGTH_FIXED_2


class Fallback(Exception):
    """Not a message the bytes path handles exactly: the caller runs the model path."""


class Bounded(dict):  # type: ignore[type-arg]
    """A dict cache emptied when it reaches its size bound (the keys repeat in steady traffic)."""

    def put(self, key: Any, value: Any) -> Any:
        if len(self) >= MAX_CACHE:
            self.clear()
        self[key] = value
        return value


_day_cache = Bounded()                   # epoch day -> PutDate text


def day_put_date(day: int) -> str:
    """The PutDate of an epoch day (spec.put_date_time), cached; Fallback outside years 1..9999 (reported)."""
    found = _day_cache.get(day)
    if found is None:
        put = put_date_time(day * 86_400_000)
        if put is None:
            raise Fallback
        found = _day_cache.put(day, put[0])
    return found

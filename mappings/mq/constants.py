"""IBM MQ constants used on the wire, with the values of IBM MQ's C header cmqc.h
(IBM MQ docs "MQMD - Message descriptor" and "MQRFH2 - Rules and formatting header 2")."""
from __future__ import annotations

from typing import Final

# --- Formats (the MQMD Format field): MQCHAR8, blank padded -----------------------------------
MQFMT_NONE: Final = "        "
MQFMT_STRING: Final = "MQSTR   "
MQFMT_RF_HEADER_2: Final = "MQHRF2  "
MQFMT_RF_HEADER: Final = "MQHRF   "
MQFMT_MD_EXTENSION: Final = "MQHMDE  "
MQFMT_DEAD_LETTER_HEADER: Final = "MQDEAD  "

# --- Persistence -------------------------------------------------------------------------------
MQPER_NOT_PERSISTENT: Final = 0
MQPER_PERSISTENT: Final = 1
MQPER_PERSISTENCE_AS_Q_DEF: Final = 2
# Persistence AS_Q_DEF (or AS_PARENT) that no queue definition resolved (a message file never put): taken as
# not persistent, as IBM MQ's default queue objects are DEFPSIST(NO); one rule for MQ -> MQTT and MQ -> JMS
PERSISTENCE_WHEN_UNRESOLVED: Final = MQPER_NOT_PERSISTENT
MQPER_PERSISTENCE_AS_TOPIC_DEF: Final = 2
MQPER_PERSISTENCE_AS_PARENT: Final = -1

# --- Priority ----------------------------------------------------------------------------------
MQPRI_PRIORITY_AS_Q_DEF: Final = -1
MQPRI_PRIORITY_AS_TOPIC_DEF: Final = -1
MQPRI_PRIORITY_AS_PARENT: Final = -2
MQPRI_PRIORITY_AS_PUBLISHED: Final = -3

# --- Message types -----------------------------------------------------------------------------
MQMT_REQUEST: Final = 1
MQMT_REPLY: Final = 2
MQMT_REPORT: Final = 4
MQMT_DATAGRAM: Final = 8
MQMT_APPL_FIRST: Final = 65536
MQMT_APPL_LAST: Final = 999999999

# --- Expiry, original length, feedback ---------------------------------------------------------
MQEI_UNLIMITED: Final = -1
MQOL_UNDEFINED: Final = -1
MQFB_NONE: Final = 0

# --- Character sets ----------------------------------------------------------------------------
MQCCSI_Q_MGR: Final = 0
MQCCSI_DEFAULT: Final = 0
MQCCSI_UNDEFINED: Final = 0
MQCCSI_EMBEDDED: Final = -1
MQCCSI_INHERIT: Final = -2
MQCCSI_APPL: Final = -3
MQCCSI_AS_PUBLISHED: Final = -4
CCSID_UTF8: Final = 1208
CCSID_ISO8859_1: Final = 819
CCSID_PC437: Final = 437
CCSID_UTF16: Final = 1200
CCSID_UCS2: Final = 13488
CCSID_UTF16_V2: Final = 17584
CCSID_EBCDIC_US: Final = 37
CCSID_EBCDIC_INTL: Final = 500

# --- Encodings: a bit field; only the integer bits decide byte order -------------------------------
MQENC_INTEGER_UNDEFINED: Final = 0x0
MQENC_INTEGER_NORMAL: Final = 0x1      # big-endian
MQENC_INTEGER_REVERSED: Final = 0x2    # little-endian
MQENC_DECIMAL_NORMAL: Final = 0x10
MQENC_DECIMAL_REVERSED: Final = 0x20
MQENC_FLOAT_IEEE_NORMAL: Final = 0x100
MQENC_FLOAT_IEEE_REVERSED: Final = 0x200
MQENC_FLOAT_S390: Final = 0x300
MQENC_FLOAT_TNS: Final = 0x400
MQENC_INTEGER_MASK: Final = 0x0F
MQENC_DECIMAL_MASK: Final = 0xF0
MQENC_FLOAT_MASK: Final = 0xF00
MQENC_NORMAL: Final = 273       # 0x111, AIX, Solaris, Java
MQENC_REVERSED: Final = 546     # 0x222, x86 Linux and Windows
MQENC_NATIVE: Final = 546       # as on x86 Linux and Windows
MQENC_S390: Final = 785
MQENC_TNS: Final = 1041
MQENC_AS_PUBLISHED: Final = -1

# --- Message flags -----------------------------------------------------------------------------
MQMF_NONE: Final = 0
MQMF_SEGMENTATION_ALLOWED: Final = 1
MQMF_SEGMENT: Final = 2
MQMF_LAST_SEGMENT: Final = 4
MQMF_MSG_IN_GROUP: Final = 8
MQMF_LAST_MSG_IN_GROUP: Final = 16

# --- Report options ----------------------------------------------------------------------------
MQRO_NONE: Final = 0
MQRO_PAN: Final = 1
MQRO_NAN: Final = 2
MQRO_PASS_CORREL_ID: Final = 64
MQRO_PASS_MSG_ID: Final = 128
MQRO_ACTIVITY: Final = 4
MQRO_COA: Final = 256
MQRO_COA_WITH_DATA: Final = 768
MQRO_COA_WITH_FULL_DATA: Final = 1792
MQRO_COD: Final = 2048
MQRO_COD_WITH_DATA: Final = 6144
MQRO_COD_WITH_FULL_DATA: Final = 14336
MQRO_PASS_DISCARD_AND_EXPIRY: Final = 16384
MQRO_EXPIRATION: Final = 2097152
MQRO_EXPIRATION_WITH_DATA: Final = 6291456
MQRO_EXPIRATION_WITH_FULL_DATA: Final = 14680064
MQRO_EXCEPTION: Final = 16777216
MQRO_EXCEPTION_WITH_DATA: Final = 50331648
MQRO_EXCEPTION_WITH_FULL_DATA: Final = 117440512
MQRO_DISCARD_MSG: Final = 134217728
MQRO_NEW_MSG_ID: Final = 0
MQRO_COPY_MSG_ID_TO_CORREL_ID: Final = 0

# --- Application types -------------------------------------------------------------------------
MQAT_UNKNOWN: Final = -1
MQAT_NO_CONTEXT: Final = 0
MQAT_UNIX: Final = 6
MQAT_QMGR: Final = 7
MQAT_WINDOWS_NT: Final = 11
MQAT_BROKER: Final = 26
MQAT_QMGR_PUBLISH: Final = 26
MQAT_JAVA: Final = 28

# --- MQMD --------------------------------------------------------------------------------------
MQMD_STRUC_ID: Final = "MD  "
MQMD_VERSION_1: Final = 1
MQMD_VERSION_2: Final = 2
MQMD_CURRENT_VERSION: Final = 2
MQMD_LENGTH_1: Final = 324
MQMD_LENGTH_2: Final = 364

# --- MQRFH / MQRFH2 ----------------------------------------------------------------------------
MQRFH_STRUC_ID: Final = "RFH "
MQRFH_VERSION_1: Final = 1
MQRFH_VERSION_2: Final = 2
MQRFH_STRUC_LENGTH_FIXED: Final = 32
MQRFH_STRUC_LENGTH_FIXED_2: Final = 36
MQRFH_NONE: Final = 0
MQRFH_NO_FLAGS: Final = 0
MQRFH_FLAGS_RESTRICTED_MASK: Final = 0xFFFF0000
# NameValueCCSID values allowed in an MQRFH2 (IBM MQ docs "MQRFH2 - Rules and formatting header 2")
RFH2_NAME_VALUE_CCSIDS: Final = frozenset({CCSID_UTF8, CCSID_UTF16, CCSID_UCS2, CCSID_UTF16_V2})

# --- Lengths -----------------------------------------------------------------------------------
MQ_MSG_ID_LENGTH: Final = 24
MQ_CORREL_ID_LENGTH: Final = 24
MQ_GROUP_ID_LENGTH: Final = 24
MQ_OBJECT_NAME_LENGTH: Final = 48
MQ_Q_NAME_LENGTH: Final = 48
MQ_Q_MGR_NAME_LENGTH: Final = 48
MQ_USER_ID_LENGTH: Final = 12
MQ_ACCOUNTING_TOKEN_LENGTH: Final = 32
MQ_APPL_IDENTITY_DATA_LENGTH: Final = 32
MQ_PUT_APPL_NAME_LENGTH: Final = 28
MQ_PUT_DATE_LENGTH: Final = 8
MQ_PUT_TIME_LENGTH: Final = 8
MQ_APPL_ORIGIN_DATA_LENGTH: Final = 4
MQ_FORMAT_LENGTH: Final = 8

MQMI_NONE: Final = bytes(24)
MQCI_NONE: Final = bytes(24)
MQGI_NONE: Final = bytes(24)
MQACT_NONE: Final = bytes(32)

# --- Pub/sub: the topic object an MQTT topic maps to when no administrative topic object is nearer
# (IBM WebSphere MQ Telemetry docs "Integration of WebSphere MQ Telemetry with queue managers") -------
SYSTEM_BASE_TOPIC: Final = "SYSTEM.BASE.TOPIC"


def integer_byte_order(encoding: int) -> str:
    """struct byte-order prefix for the integer bits of an MQENC_* value: '>' normal, '<' reversed.

    Undefined integer bits (0, e.g. MQENC_AS_PUBLISHED masked) fall back to native x86 (reversed),
    matching MQENC_NATIVE on the platforms the bridge runs on.
    """
    bits = encoding & MQENC_INTEGER_MASK
    if bits == MQENC_INTEGER_NORMAL:
        return ">"
    return "<"


def encoding_for_order(order: str) -> int:
    """The plain MQENC value (273 or 546) whose integers have byte order ``order``."""
    return MQENC_NORMAL if order == ">" else MQENC_REVERSED

"""Password hashes and password files in mosquitto_passwd's format; no gateway state here.

A file line is ``user:$7$<iterations>$<salt>$<hash>``: PBKDF2-HMAC-SHA512 of the password with the
decoded salt and the iteration count, 64 bytes; salt and hash in standard base64 with padding (mosquitto
docs "mosquitto_passwd", sha512-pbkdf2; the layout checked against files Debian's mosquitto_passwd 2.0
writes: 12-byte salt, 101 iterations). Blank lines and lines starting with ``#`` are skipped. Plain-text
passwords, unsalted ``sha256:<hex>`` values (the gateway's old form) and mosquitto 1.6's single-round
``$6$`` hashes are refused with a message saying how to set the password again.
"""
from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from dataclasses import dataclass
from pathlib import Path

PBKDF2_SHA512 = "7"          # mosquitto's identifier of the scheme
DEFAULT_ITERATIONS = 101     # mosquitto_passwd's
SALT_BYTES = 12              # mosquitto_passwd's
HASH_BYTES = 64              # SHA-512
MIN_SALT_BYTES = 8
MAX_ITERATIONS = 10_000_000  # beyond, one login check would stall the broker for seconds
MAX_FIELD_BYTES = 65535      # an MQTT user name or password is at most this long

HOW_TO_SET = "set it with `mqbridge passwd FILE USER` (mosquitto_passwd's format) and name FILE in password_file"


class HashError(ValueError):
    """A stored password that is not a usable salted hash; the message says how to fix it."""


class AuthFileError(Exception):
    """A password or ACL file that cannot be used; ``problems`` are ``FILE:LINE: ...`` lines."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


class PasswordFileError(AuthFileError):
    """A password file that cannot be used."""


@dataclass(frozen=True, slots=True)
class PasswordHash:
    iterations: int
    salt: bytes
    digest: bytes

    def verify(self, password: bytes) -> bool:
        computed = hashlib.pbkdf2_hmac("sha512", password, self.salt, self.iterations, len(self.digest))
        return hmac.compare_digest(computed, self.digest)

    def encode(self) -> str:
        return (f"${PBKDF2_SHA512}${self.iterations}${base64.b64encode(self.salt).decode('ascii')}"
                f"${base64.b64encode(self.digest).decode('ascii')}")


def make_hash(password: bytes, iterations: int = DEFAULT_ITERATIONS, salt: bytes | None = None) -> PasswordHash:
    if not 1 <= iterations <= MAX_ITERATIONS:
        raise ValueError(f"iterations must be 1..{MAX_ITERATIONS}, not {iterations}")
    salt = os.urandom(SALT_BYTES) if salt is None else salt
    return PasswordHash(iterations, salt, hashlib.pbkdf2_hmac("sha512", password, salt, iterations, HASH_BYTES))


def _b64(text: str, what: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise HashError(f"the {what} is not base64") from None


def parse_hash(text: str) -> PasswordHash:
    """``$7$<iterations>$<base64 salt>$<base64 hash>`` -> PasswordHash; HashError says what is wrong."""
    if text.startswith("sha256:"):
        raise HashError(f"unsalted sha256 hashes are refused (fast to guess from a leaked file): {HOW_TO_SET}")
    if text.startswith("$6$"):
        raise HashError("mosquitto 1.6 sha512 hashes ($6$, one round) are refused: "
                        f"{HOW_TO_SET} (or mosquitto_passwd -H sha512-pbkdf2)")
    if text.startswith(("$8$", "$argon2")):
        raise HashError(f"argon2id hashes are not supported: {HOW_TO_SET} (or mosquitto_passwd -H sha512-pbkdf2)")
    if not text.startswith("$"):
        raise HashError(f"plain-text passwords are refused: {HOW_TO_SET}; "
                        "`mqbridge passwd -U FILE` converts a file of plain-text passwords")
    parts = text.split("$")
    if len(parts) != 5 or parts[0] or parts[1] != PBKDF2_SHA512:
        raise HashError("not a sha512-pbkdf2 hash: expected $7$<iterations>$<base64 salt>$<base64 hash>")
    _, _, iterations_text, salt_text, digest_text = parts
    if not iterations_text.isdigit() or not 1 <= int(iterations_text) <= MAX_ITERATIONS:
        raise HashError(f"iterations {iterations_text!r}: expected 1..{MAX_ITERATIONS}")
    salt = _b64(salt_text, "salt")
    digest = _b64(digest_text, "hash")
    if len(salt) < MIN_SALT_BYTES:
        raise HashError(f"a salt of {len(salt)} bytes is too short (at least {MIN_SALT_BYTES})")
    if len(digest) != HASH_BYTES:
        raise HashError(f"the hash has {len(digest)} bytes, SHA-512 has {HASH_BYTES}")
    return PasswordHash(int(iterations_text), salt, digest)


def check_user_name(user: str) -> str:
    """'' or why ``user`` cannot be a password file user name."""
    if not user:
        return "the user name is empty"
    if ":" in user:
        return "a user name must not contain ':'"
    if any(ord(c) < 32 or ord(c) == 127 for c in user):
        return "a user name must not contain control characters"
    if len(user.encode("utf-8")) > MAX_FIELD_BYTES:
        return f"a user name is at most {MAX_FIELD_BYTES} bytes"
    return ""


def parse_password_file(text: str, source: str) -> dict[str, PasswordHash]:
    """Every problem of the file is reported at once (PasswordFileError), with its line."""
    users: dict[str, PasswordHash] = {}
    first_line: dict[str, int] = {}
    problems: list[str] = []
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        user, sep, stored = line.partition(":")
        where = f"{source}:{number}"
        if not sep:
            problems.append(f"{where}: expected user:hash")
            continue
        bad_name = check_user_name(user)
        if bad_name:
            problems.append(f"{where}: {bad_name}")
            continue
        if user in first_line:
            problems.append(f"{where}: user {user!r} is already on line {first_line[user]}")
            continue
        first_line[user] = number
        try:
            users[user] = parse_hash(stored)
        except HashError as exc:
            problems.append(f"{where}: user {user!r}: {exc}")
    if problems:
        raise PasswordFileError(problems)
    return users


def read_password_file(path: Path) -> dict[str, PasswordHash]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        hint = f"; create it with `mqbridge passwd -c {path} USER`" if isinstance(exc, FileNotFoundError) else ""
        raise PasswordFileError([f"{path}: cannot read the password file: {exc.strerror}{hint}"]) from None
    except UnicodeDecodeError as exc:
        raise PasswordFileError([f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})"]) from None
    return parse_password_file(text, str(path))

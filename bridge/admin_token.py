"""The admin channel's token: made at first start in the data directory (mode 0600), read by the CLI
from there. Whoever can read the file may administer the gateway; other local users cannot."""
from __future__ import annotations

import os
import secrets
from pathlib import Path

TOKEN_FILE = "admin.token"
HEADER = "Authorization"          # "Bearer <token>"


def token_path(data_dir: Path | str) -> Path:
    return Path(data_dir) / TOKEN_FILE


def ensure_token(data_dir: Path | str) -> str:
    """The gateway's token: the file's, or a new random one written with mode 0600 (never wider)."""
    path = token_path(data_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        token = read_token(data_dir)
        if token:
            if path.stat().st_mode & 0o077:
                os.chmod(path, 0o600)   # someone widened it: only the owner may read the token
            return token
        path.unlink()   # empty or unreadable: make a new one
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    token = secrets.token_urlsafe(32)
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(token + "\n")
    return token


def read_token(data_dir: Path | str) -> str | None:
    try:
        return token_path(data_dir).read_text(encoding="ascii").strip() or None
    except (OSError, UnicodeDecodeError):
        return None


def bearer(token: str) -> str:
    return f"Bearer {token}"

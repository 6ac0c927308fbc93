"""`mqbridge passwd`: create and update password files in mosquitto_passwd's format (bridge/mqtt/passwords.py),
with mosquitto_passwd's options: -c create, -b password on the command line, -D delete, -U convert a
file of plain-text passwords. The file is replaced atomically (a temporary file renamed over it); a new
file is readable by its owner only, an existing one keeps its mode. Other lines stay as they were.
"""
from __future__ import annotations

import argparse
import getpass
import os
import sys
import tempfile
from pathlib import Path

from bridge.mqtt import passwords as pw


class PasswdError(Exception):
    pass


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("passwd", help="create or update a password file (mosquitto_passwd's format)",
                       description="Add or update USER in FILE (prompting for the password), or with -D "
                                   "delete USER, or with -U hash every plain-text password in FILE. The "
                                   "gateway reads FILE as broker.password_file; `mqbridge reload` re-reads it.")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("-c", dest="create", action="store_true",
                      help="create FILE, replacing it if it exists ('-' with -b: print the line)")
    mode.add_argument("-D", dest="delete", action="store_true", help="delete USER from FILE")
    mode.add_argument("-U", dest="upgrade", action="store_true", help="hash the plain-text passwords of FILE")
    p.add_argument("-b", dest="batch", action="store_true",
                   help="take the password from the command line (visible in the process list and history)")
    p.add_argument("-I", dest="iterations", type=int, default=pw.DEFAULT_ITERATIONS,
                   help=f"PBKDF2 iterations (default {pw.DEFAULT_ITERATIONS}, as mosquitto_passwd; each login "
                        "check costs about 1 ms per 1,000 on the broker's event loop)")
    p.add_argument("file", metavar="FILE")
    p.add_argument("user", metavar="USER", nargs="?")
    p.add_argument("password", metavar="PASSWORD", nargs="?")
    p.set_defaults(func=cmd_passwd)


def _password(args: argparse.Namespace) -> bytes:
    if args.batch:
        if args.password is None:
            raise PasswdError("-b needs the password after USER")
        password = args.password
    else:
        if args.password is not None:
            raise PasswdError("a password on the command line needs -b")
        password = getpass.getpass("Password: ")
        if getpass.getpass("Reenter password: ") != password:
            raise PasswdError("the passwords do not match")
    data = password.encode("utf-8")
    if not data:
        raise PasswdError("the password is empty")
    if len(data) > pw.MAX_FIELD_BYTES:
        raise PasswdError(f"a password is at most {pw.MAX_FIELD_BYTES} bytes")
    return data


def _read_lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise PasswdError(f"{path}: no such file (-c creates one)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise PasswdError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None


def _user_of(line: str) -> str | None:
    stripped = line.strip()
    if not stripped or stripped.startswith("#") or ":" not in stripped:
        return None
    return stripped.split(":", 1)[0]


def _write(path: Path, lines: list[str]) -> None:
    target = path.resolve()   # a symbolic link keeps pointing at the file it named
    try:
        mode = target.stat().st_mode & 0o777
    except FileNotFoundError:
        mode = 0o600
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write("".join(line + "\n" for line in lines))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def _upgrade(path: Path, iterations: int) -> int:
    lines = _read_lines(path)
    converted = 0
    for i, line in enumerate(lines):
        user = _user_of(line)
        if user is None:
            continue
        stored = line.strip().split(":", 1)[1]
        try:
            pw.parse_hash(stored)
            continue   # already a usable hash: left alone (mosquitto_passwd -U would hash the hash)
        except pw.HashError:
            if stored.startswith(("$", "sha256:")):
                raise PasswdError(f"{path}:{i + 1}: user {user!r} has a hash that cannot be converted; set the "
                                  "password again with `mqbridge passwd FILE USER`") from None
        lines[i] = f"{user}:{pw.make_hash(stored.encode('utf-8'), iterations).encode()}"
        converted += 1
    _write(path, lines)
    return converted


def run(args: argparse.Namespace) -> str:
    if not 1 <= args.iterations <= pw.MAX_ITERATIONS:
        raise PasswdError(f"-I: iterations must be 1..{pw.MAX_ITERATIONS}")
    path = Path(args.file)
    if args.upgrade:
        if args.user is not None:
            raise PasswdError("-U takes only FILE")
        return f"{path}: {_upgrade(path, args.iterations)} plain-text passwords hashed"
    if args.user is None:
        raise PasswdError("USER is missing")
    problem = pw.check_user_name(args.user)
    if problem:
        raise PasswdError(problem)
    if args.delete:
        if args.password is not None or args.batch:
            raise PasswdError("-D takes FILE and USER only")
        lines = _read_lines(path)
        kept = [line for line in lines if _user_of(line) != args.user]
        if len(kept) == len(lines):
            raise PasswdError(f"{path}: user {args.user!r} not found")
        _write(path, kept)
        return f"{path}: user {args.user!r} deleted"
    entry = f"{args.user}:{pw.make_hash(_password(args), args.iterations).encode()}"
    if args.file == "-":
        if not args.batch:
            raise PasswdError("FILE '-' (print the line) needs -b")
        return entry
    lines = [] if args.create else _read_lines(path)
    out: list[str] = []
    for line in lines:
        if _user_of(line) != args.user:
            out.append(line)
        elif entry not in out:
            out.append(entry)   # in place of the first line of USER; any later one is dropped
    if entry not in out:
        out.append(entry)
    _write(path, out)
    return ""


def cmd_passwd(args: argparse.Namespace) -> int:
    try:
        out = run(args)
    except PasswdError as exc:
        print(f"mqbridge passwd: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"mqbridge passwd: {args.file}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    if out:
        print(out)
    return 0

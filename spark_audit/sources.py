"""Which bytes of the log files an ingest hands to Spark: complete lines only, each exactly once.

A line is complete when its newline is written (or, for a file's unterminated last line, when it is a whole
JSON object: a prefix of an object never is one). A line still being written is not read and never counted
malformed. Gzip files are decompressed here (zlib, in chunks) into staged plain files, so a truncated or
corrupt one is found and reported with its readable lines audited, instead of failing the Spark job.
The incremental mode keeps a ledger (OUT/checkpoint/sources.json): per file its identity, the content offset
after the last complete line read, and a checksum of its first bytes; each run stages only the new complete
lines of each file as a slice file that the next batch reads (docs/audit.md, "Growing and damaged files").
"""
from __future__ import annotations

import json
import os
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO
from urllib.parse import unquote, urlparse

from spark_audit import fs

GZIP_SUFFIX = ".gz"
READ_CHUNK = 1 << 20  # compressed bytes per zlib call
OUT_CHUNK = 8 << 20  # at most this much decompressed output per zlib call (a gzip bomb stays bounded)
TAIL_CHUNK = 64 << 10  # looking back for the last newline
HEAD_BYTES = 4096  # the first content bytes whose checksum identifies a file
MAX_OBJECT_TAIL = 1 << 20  # an unterminated last line longer than this is never taken as complete
LEDGER_FILE = "sources.json"
LEDGER_VERSION = 1
SLICES_DIR = "slices"  # in the checkpoint directory: the incremental batches' input


class Damaged(Exception):
    """A file's content cannot be read to its end (the readable part before the damage is kept)."""


@dataclass(slots=True)
class Staged:
    """What an ingest reads (Spark paths), where staged copies came from, damaged files and notes."""

    paths: list[str] = field(default_factory=list)
    origins: dict[str, str] = field(default_factory=dict)  # staged file (absolute path) -> source file
    damaged: dict[str, str] = field(default_factory=dict)  # source file -> what is wrong with it
    notes: dict[str, str] = field(default_factory=dict)  # source file -> what the audit did about it
    starts: dict[str, int] = field(default_factory=dict)  # staged file -> content offset where it starts

    def origin(self, path: str) -> str:
        """The source file of a path Spark reports (a file: URI or a path): a staged copy's source, else the
        file itself (a file: URI as a local path; a file of a remote log as it was listed)."""
        key = file_key(path)
        return self.origins.get(key, path if urlparse(path).scheme not in ("", "file") else key)

    def line_base(self, path: str) -> int | None:
        """How many lines of its source come before a file Spark read (a slice starts within its source):
        0 for a file read whole; None when the source can no longer tell."""
        local = file_key(path)
        if local not in self.origins:
            return 0  # read in place
        start = self.starts.get(local)  # unknown for a slice an older version staged
        return start if start in (0, None) else lines_before(self.origins[local], start)


def file_key(path: str) -> str:
    """How Staged knows a file, whichever way it is named: a local (or file:) one by its absolute path, one
    of another file system by its qualified URI without percent-encoding (as Hadoop lists it)."""
    parsed = urlparse(path)
    if parsed.scheme in ("", "file"):
        return os.path.abspath(unquote(parsed.path) if parsed.scheme == "file" else path)
    return unquote(path)


def lines_before(path: str, offset: int) -> int | None:
    """The newlines in a log file's content (decompressed for gzip) before offset; None when unreadable."""
    count, pos = 0, 0
    try:
        with open(path, "rb") as f:
            chunks = inflate(f) if is_gzip(path) else iter(lambda: f.read(READ_CHUNK), b"")
            for chunk in chunks:
                take = chunk[: max(0, offset - pos)]
                count += take.count(b"\n")
                pos += len(chunk)
                if pos >= offset:
                    return count
    except (OSError, Damaged):
        return None
    return None if pos < offset else count


def is_gzip(path: str | Path) -> bool:
    return str(path).endswith(GZIP_SUFFIX)


def _is_object(text: bytes) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False


def complete_end(f: BinaryIO, start: int, size: int) -> int:
    """The offset after the last complete line in [start, size) of a plain file (start: nothing complete)."""
    pos = size
    while pos > start:
        lo = max(start, pos - TAIL_CHUNK)
        f.seek(lo)
        chunk = f.read(pos - lo)
        newline = chunk.rfind(b"\n")
        if newline >= 0:
            end = lo + newline + 1
            break
        pos = lo
    else:
        end = start
    if size - end and size - end <= MAX_OBJECT_TAIL:
        f.seek(end)
        if _is_object(f.read(size - end)):
            return size
    return end


def _copy_range(src: BinaryIO, dst: BinaryIO, start: int, end: int) -> None:
    """Copy bytes [start, end) in the kernel where it can (copy_file_range), else through a buffer."""
    left, offset = end - start, start
    try:
        while left > 0:
            n = os.copy_file_range(src.fileno(), dst.fileno(), left, offset)
            if n == 0:
                break
            left, offset = left - n, offset + n
    except OSError:
        pass
    src.seek(offset)
    while left > 0:
        data = src.read(min(left, READ_CHUNK))
        if not data:
            break
        dst.write(data)
        left -= len(data)


def inflate(src: BinaryIO) -> Iterator[bytes]:
    """A gzip file's content in chunks (every member); Damaged when it is truncated or corrupt."""
    d = zlib.decompressobj(31)
    fed = False  # the current member has input
    while True:
        data = src.read(READ_CHUNK)
        if not data:
            break
        fed = True
        while True:
            try:
                out = d.decompress(data, OUT_CHUNK)
            except zlib.error as e:
                raise Damaged(f"corrupt gzip data ({e})") from None
            if out:
                yield out
            if d.eof:
                data, d = d.unused_data, zlib.decompressobj(31)
                fed = bool(data)
                if not data:
                    break
                continue
            data = d.unconsumed_tail
            if not data and len(out) < OUT_CHUNK:
                break
    if fed:
        raise Damaged("truncated gzip file (its compressed stream ends early)")


@dataclass(slots=True)
class Piece:
    """A file's complete lines from a content offset on, staged or not; where the next read starts."""

    end: int  # content offset after the last complete line (the next read starts here)
    head: int  # crc32 of the first head_len content bytes
    head_len: int
    damage: str | None = None
    unfinished: int = 0  # bytes of an unfinished last line, not read


def stage_plain(src: BinaryIO, size: int, start: int, target: Path | None) -> Piece:
    """The complete lines of a plain file from start, copied to target (None: only measured)."""
    end = complete_end(src, start, size)
    src.seek(0)
    head = src.read(min(HEAD_BYTES, end))
    if target is not None and end > start:
        with open(target, "wb") as dst:
            _copy_range(src, dst, start, end)
            src.seek(end - 1)
            if src.read(1) != b"\n":
                dst.write(b"\n")  # an unterminated whole object; the next read starts with its newline
    return Piece(end, zlib.crc32(head), len(head), unfinished=size - end)


def stage_gzip(src: BinaryIO, start: int, target: Path) -> Piece:
    """Decompress a gzip file; its complete lines from content offset start go to target (plain text)."""
    pos = 0  # content offset of the next chunk
    head = b""
    damage = None
    with open(target, "wb") as dst:
        try:
            for chunk in inflate(src):
                if len(head) < HEAD_BYTES:
                    head += chunk[:HEAD_BYTES - len(head)]
                if pos + len(chunk) > start:
                    dst.write(chunk[max(0, start - pos):])
                pos += len(chunk)
        except Damaged as e:
            damage = str(e)
    written = max(0, pos - start)
    with open(target, "r+b") as staged:
        keep = complete_end(staged, 0, written)
        if keep == written and written and not _ends_with_newline(staged, written):
            staged.seek(written)
            staged.write(b"\n")
        else:
            staged.truncate(keep)
    end = start + keep
    head = head[:end]
    return Piece(end, zlib.crc32(head), len(head), damage, unfinished=written - keep)


def _ends_with_newline(f: BinaryIO, size: int) -> bool:
    f.seek(size - 1)
    return f.read(1) == b"\n"


def content_head(path: str, length: int) -> int:
    """crc32 of a file's first length content bytes (decompressed for gzip); -1 when unreadable."""
    try:
        with open(path, "rb") as f:
            if not is_gzip(path):
                return zlib.crc32(f.read(length))
            head = b""
            try:
                for chunk in inflate(f):
                    head += chunk
                    if len(head) >= length:
                        break
            except Damaged:
                pass
            return zlib.crc32(head[:length])
    except OSError:
        return -1


def _plain_name(path: str) -> str:
    """A staged file's name after its source's: plain text, never hidden from Spark ('.', '_')."""
    name = Path(path).name
    return (name[: -len(GZIP_SUFFIX)] if is_gzip(name) else name).lstrip("._") or "log"


def _note_piece(staged: Staged, path: str, piece: Piece, incremental: bool) -> None:
    if piece.damage is not None:
        staged.damaged[path] = f"{piece.damage}; its {piece.end} bytes of complete lines before that were audited"
    elif piece.unfinished and not incremental:  # a live file's last line, still being written
        staged.notes[path] = f"unfinished last line ({piece.unfinished} bytes) not read"


def prepare(paths: list[str], staging: Path) -> Staged:
    """A one-shot ingest's input. Plain files whose lines are all complete are read in place; gzip files
    and plain files with an unfinished last line are staged (their complete lines); an unreadable file is
    reported as damaged, never read."""
    staged = Staged()
    for i, path in enumerate(paths):
        name = f"{i:06d}-{_plain_name(path)}"
        target = staging / name
        try:
            with open(path, "rb") as src:
                size = os.fstat(src.fileno()).st_size
                if is_gzip(path):
                    staging.mkdir(parents=True, exist_ok=True)
                    piece = stage_gzip(src, 0, target)
                else:
                    piece = stage_plain(src, size, 0, None)
                    if not piece.unfinished:
                        staged.paths.append(path)
                        continue
                    staging.mkdir(parents=True, exist_ok=True)
                    piece = stage_plain(src, size, 0, target)
        except OSError as e:
            staged.damaged[path] = f"unreadable ({e.strerror or e})"
            continue
        _note_piece(staged, path, piece, incremental=False)
        if piece.end > 0:
            staged.paths.append(str(target))
            staged.origins[os.path.abspath(target)] = path
            staged.starts[os.path.abspath(target)] = 0
    return staged


def prepare_remote(paths: list[str], staging: str) -> Staged:
    """prepare for files of a remote file system (a URI each), through Hadoop's FileSystem API only.

    Files read in place keep their listed names; a plain file's complete lines are copied to staging in the
    JVM; a gzip file is decompressed on the driver, its complete lines staged in a local temporary file
    (the driver's disk) and uploaded to staging (the executors read staging)."""
    hadoop = fs.Hadoop()
    staged = Staged()
    for i, path in enumerate(paths):
        target = fs.join(staging, f"{i:06d}-{_plain_name(fs.path_part(path).name)}")
        try:
            with hadoop.open(path) as src:
                size = src.seek(0, os.SEEK_END)
                src.seek(0)
                if is_gzip(path):
                    with tempfile.TemporaryDirectory(prefix="mqb-audit-gunzip-") as tmp:
                        local = Path(tmp) / "staged"
                        piece = stage_gzip(src, 0, local)
                        if piece.end > 0:
                            hadoop.upload(str(local), target)
                else:
                    piece = stage_plain(src, size, 0, None)
                    if not piece.unfinished:
                        staged.paths.append(path)
                        staged.origins[file_key(path)] = path
                        continue
                    if piece.end > 0:
                        src.seek(piece.end - 1)
                        hadoop.copy_range(path, target, 0, piece.end, newline=src.read(1) != b"\n")
        except OSError as e:
            staged.damaged[path] = f"unreadable ({e.strerror or e})"
            continue
        _note_piece(staged, path, piece, incremental=False)
        if piece.end > 0:
            qualified = hadoop.qualify(target)
            staged.paths.append(qualified)
            staged.origins[file_key(qualified)] = path
            staged.starts[file_key(qualified)] = 0
    return staged


@dataclass(frozen=True, slots=True)
class Tracked:
    """A log file the incremental mode has read: identity, size and mtime then, where the next read starts."""

    path: str
    dev: int
    ino: int
    size: int
    mtime_ns: int
    end: int  # content offset after the last complete line read
    head: int  # crc32 of the first head_len content bytes
    head_len: int


@dataclass(slots=True)
class Ledger:
    """The incremental mode's record of what it read (OUT/checkpoint/sources.json)."""

    files: list[Tracked] = field(default_factory=list)
    next_slice: int = 0
    slices: dict[str, str] = field(default_factory=dict)  # slice name -> source file
    slice_starts: dict[str, int] = field(default_factory=dict)  # slice name -> its source's content offset

    @classmethod
    def read(cls, checkpoint_dir: str) -> Ledger:
        """The ledger; an unreadable one stops the run naming it (guessing would read files twice)."""
        path = Path(checkpoint_dir) / LEDGER_FILE
        if not path.exists():
            return cls()
        try:
            raw = json.loads(path.read_text())
            if raw["version"] != LEDGER_VERSION:
                raise ValueError(f"version {raw['version']!r}")
            files = [Tracked(str(f["path"]), *(int(f[k]) for k in ("dev", "ino", "size", "mtime_ns", "end",
                                                                    "head", "head_len"))) for f in raw["files"]]
            return cls(files, int(raw["next_slice"]), {str(k): str(v) for k, v in raw["slices"].items()},
                       {str(k): int(v) for k, v in raw.get("slice_starts", {}).items()})
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise RuntimeError(f"{path}: unreadable ledger of the log files read ({e!r})") from e

    def write(self, checkpoint_dir: str) -> None:
        path = Path(checkpoint_dir) / LEDGER_FILE
        tmp = path.with_name(f".{path.name}.tmp")
        raw = {"version": LEDGER_VERSION, "next_slice": self.next_slice, "slices": self.slices,
               "slice_starts": {n: self.slice_starts[n] for n in self.slices if n in self.slice_starts},
               "files": [{"path": t.path, "dev": t.dev, "ino": t.ino, "size": t.size, "mtime_ns": t.mtime_ns,
                          "end": t.end, "head": t.head, "head_len": t.head_len} for t in self.files]}
        tmp.write_text(json.dumps(raw, indent=1) + "\n")
        os.replace(tmp, path)


def read_before_ledger(checkpoint_dir: str) -> set[str]:
    """The log files the Structured Streaming query of a checkpoint made before the ledger existed read (its
    file source's log, OUT/checkpoint/stream/sources/0/N: a version line, then a JSON object per file)."""
    directory = Path(checkpoint_dir) / "stream" / "sources" / "0"
    paths: set[str] = set()
    if not directory.is_dir():
        return paths
    for f in directory.iterdir():
        if f.name.startswith("."):
            continue
        for line in f.read_text(errors="replace").splitlines()[1:]:
            try:
                uri = json.loads(line)["path"]
            except (ValueError, KeyError, TypeError):
                continue
            local = fs.local_path(str(uri))
            if Path(local).parent.name != SLICES_DIR:
                paths.add(os.path.abspath(local))
    return paths


def _seed(path: str, st: os.stat_result, staged: Staged) -> Tracked | None:
    """A file a pre-ledger checkpoint read: tracked from its current end (its lines appended since that
    read cannot be told apart: they are not read, rather than everything read twice), with a note."""
    try:
        with open(path, "rb") as src:
            piece = stage_plain(src, st.st_size, 0, None) if not is_gzip(path) else None
    except OSError:
        return None
    if piece is None:  # gzip: its content length is known only by decompressing it
        try:
            with open(path, "rb") as src:
                end, head = 0, b""
                for chunk in inflate(src):
                    if len(head) < HEAD_BYTES:
                        head += chunk[:HEAD_BYTES - len(head)]
                    end += len(chunk)
        except (OSError, Damaged):
            return None
        piece = Piece(end, zlib.crc32(head[:end]), len(head[:end]))
    staged.notes[path] = ("read by this audit before it kept a ledger (checkpoint of an older version): "
                          "lines written from now on are read")
    return Tracked(path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, piece.end, piece.head, piece.head_len)


def slice_dir(checkpoint_dir: str) -> Path:
    return Path(checkpoint_dir) / SLICES_DIR


def _slice_number(name: str) -> int | None:
    number = name.split("-", 1)[0]
    return int(number) if number.isdigit() else None


def _start(path: str, st: os.stat_result, known: Tracked | None, by_path: dict[str, Tracked],
           staged: Staged) -> int:
    """Where a changed file's next read starts: after what was read, or 0 (saying why) when replaced."""
    if known is None:
        if path in by_path:
            staged.notes[path] = "a new file under a name read before (replaced): read from the start"
        return 0
    if not is_gzip(path) and st.st_size < known.end:
        why = "is shorter than the part already read"
    elif content_head(path, known.head_len) != known.head:
        why = "begins with other bytes than the file read before"
    else:
        return known.end
    staged.notes[path] = f"{why} (truncated, rewritten or replaced): read again from the start"
    return 0


def _predecessor(path: str, by_path: dict[str, Tracked], listed: set[str]) -> Tracked | None:
    """For X.gz that appeared where X was read and is gone (X compressed in place): X's record."""
    if not is_gzip(path):
        return None
    known = by_path.get(path[: -len(GZIP_SUFFIX)])
    return known if known is not None and known.path not in listed else None


def stage_new(checkpoint_dir: str, paths: list[str]) -> Staged:
    """Stage every listed file's complete lines not read before as slices for the next batch, then record
    them in the ledger (atomically, before the batch is read).

    A file is known by its device and inode (a renamed file reads on where it stopped). A known file whose
    size and mtime are unchanged is not opened. One that is now shorter than the part read, or whose first
    bytes changed, was truncated or replaced: it is read again from the start, and a note says so.
    With a checkpoint of a version before the ledger, the files its stream read start at their current end.
    Slices numbered at or above the ledger's next number were staged by a run that died before writing
    the ledger (no batch read them): they are removed and their lines staged again.
    """
    ledger = Ledger.read(checkpoint_dir)
    before = set() if (Path(checkpoint_dir) / LEDGER_FILE).exists() else read_before_ledger(checkpoint_dir)
    slices = slice_dir(checkpoint_dir)
    slices.mkdir(parents=True, exist_ok=True)
    for f in slices.iterdir():
        number = _slice_number(f.name)
        if f.name.startswith(".") or (number is not None and number >= ledger.next_slice):
            f.unlink(missing_ok=True)
    ledger.slices = {n: o for n, o in ledger.slices.items() if (slices / n).exists()}
    staged = Staged(origins={os.path.abspath(slices / n): o for n, o in ledger.slices.items()},
                    starts={os.path.abspath(slices / n): ledger.slice_starts[n] for n in ledger.slices
                            if n in ledger.slice_starts})
    by_id = {(t.dev, t.ino): t for t in ledger.files}
    by_path = {t.path: t for t in ledger.files}
    listed = set(paths)
    kept: list[Tracked] = []
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue  # gone since the listing
        known = by_id.get((st.st_dev, st.st_ino)) or _predecessor(path, by_path, listed)
        if known is None and os.path.abspath(path) in before:
            seeded = _seed(path, st, staged)
            if seeded is not None:
                kept.append(seeded)
                continue
        if known is not None and _unchanged(known, path, st):
            kept.append(replace(known, path=path))
            continue
        start = _start(path, st, known, by_path, staged)
        name = f"{ledger.next_slice:08d}-{_plain_name(path)}"
        target = slices / f".{name}.tmp"
        try:
            with open(path, "rb") as src:
                piece = stage_gzip(src, start, target) if is_gzip(path) else stage_plain(src, st.st_size, start,
                                                                                        target)
        except OSError as e:
            target.unlink(missing_ok=True)
            staged.damaged[path] = f"unreadable ({e.strerror or e})"
            if known is not None:
                kept.append(known)  # untouched: read when it can be
            continue
        _note_piece(staged, path, piece, incremental=True)
        if piece.end > start and target.exists():
            os.replace(target, slices / name)
            staged.origins[os.path.abspath(slices / name)] = ledger.slices[name] = path
            staged.starts[os.path.abspath(slices / name)] = ledger.slice_starts[name] = start
            ledger.next_slice += 1
        else:
            target.unlink(missing_ok=True)
        kept.append(Tracked(path, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, piece.end, piece.head,
                            piece.head_len))
    ledger.files = kept
    ledger.write(checkpoint_dir)
    return staged


def unread_input(checkpoint_dir: str, paths: list[str]) -> bool:
    """Whether ``stage_new`` would stage anything of ``paths``, by stat calls alone: a file the ledger does
    not know (by device and inode), or one whose size, mtime or compression changed since it was read."""
    if not (Path(checkpoint_dir) / LEDGER_FILE).exists():
        return True
    by_id = {(t.dev, t.ino): t for t in Ledger.read(checkpoint_dir).files}
    for path in paths:
        try:
            st = os.stat(path)
        except OSError:
            continue  # gone since the listing
        known = by_id.get((st.st_dev, st.st_ino))
        if known is None or not _unchanged(known, path, st):
            return True
    return False


def _unchanged(known: Tracked, path: str, st: os.stat_result) -> bool:
    """A file the ledger knows that has nothing new: its size and mtime as read, compressed as it was."""
    return (st.st_size, st.st_mtime_ns) == (known.size, known.mtime_ns) and is_gzip(known.path) == is_gzip(path)


def slices_now(checkpoint_dir: str) -> list[Path]:
    """The slices waiting to be read (each is read once, by one batch)."""
    directory = slice_dir(checkpoint_dir)
    return [f for f in directory.iterdir() if not f.name.startswith(".")] if directory.is_dir() else []


def remove_slices(files: list[Path]) -> None:
    """Remove slices a committed batch read (their rows are in the Parquet log)."""
    for f in files:
        f.unlink(missing_ok=True)

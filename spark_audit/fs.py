"""Files of a path with a scheme (hdfs://, s3a://, file://, ...) through Hadoop's FileSystem API in the
SparkSession's JVM: list, stat, read (seekable, in chunks), write, copy a byte range, rename, delete. The
audit never uses local file-system calls on such a path; the connectors (and their settings) are the Spark
installation's (docs/audit.md, "On a cluster"). A plain path (no scheme) keeps the local code.
"""
from __future__ import annotations

import io
import posixpath
import re
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any
from urllib.parse import unquote, urlparse

from py4j.protocol import Py4JError, Py4JJavaError
from pyspark import SparkContext

SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]+:/")  # a drive ("C:/x") or "name:x" is no URI
CHUNK = 1 << 20  # bytes per read call through the JVM gateway


def is_remote(path: str | None) -> bool:
    """True for a URI (hdfs://nn/x, s3a://bucket/x, file:///x): its files go through Hadoop's API."""
    return path is not None and bool(SCHEME.match(str(path)))


def join(base: str, *parts: str) -> str:
    """base/part/...: a URI keeps its scheme and authority (pathlib would fold its "//")."""
    return "/".join([base.rstrip("/"), *(p.strip("/") for p in parts)])


def local_path(uri: str) -> str:
    """A local file path from a file: URI as Spark reports and logs them (any other text unchanged)."""
    parsed = urlparse(uri)
    return unquote(parsed.path) if parsed.scheme == "file" else uri


def parent(uri: str) -> str:
    """The URI of the directory holding uri (the root's parent is the root)."""
    parsed = urlparse(uri)
    return f"{parsed.scheme}://{parsed.netloc}{posixpath.dirname(parsed.path.rstrip('/')) or '/'}"


def path_part(uri: str) -> PurePosixPath:
    """The path of a URI (for its names: date=D/hour=H directories, file suffixes)."""
    return PurePosixPath(urlparse(uri).path)


def _error(e: Exception) -> OSError:
    """An OSError naming the Java exception (callers handle file errors as OSError)."""
    java = getattr(e, "java_exception", None)
    if java is not None:
        try:
            return OSError(str(java.toString()).strip().splitlines()[0])
        except Py4JError:
            pass
    return OSError(str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__)


def _not_found(e: Py4JJavaError) -> bool:
    try:
        return str(e.java_exception.getClass().getName()) == "java.io.FileNotFoundException"
    except Py4JError:
        return False


@dataclass(frozen=True, slots=True)
class Status:
    """A file or directory: its qualified URI, size, modification time (milliseconds), kind."""

    uri: str
    size: int
    mtime_ms: int
    is_dir: bool

    @property
    def name(self) -> str:
        return path_part(self.uri).name


class Reader(io.RawIOBase):
    """A seekable binary reader over a Hadoop input stream (each chunk crosses the gateway as one byte array)."""

    def __init__(self, stream: Any, size: int) -> None:
        super().__init__()
        self._stream, self._size = stream, size

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        if size is None or size < 0:
            return b"".join(iter(lambda: self.read(CHUNK), b""))
        try:
            return bytes(self._stream.readNBytes(min(size, CHUNK))) if size else b""
        except Py4JJavaError as e:
            raise _error(e) from None

    def readinto(self, b: Any) -> int:
        data = self.read(len(b))
        b[:len(data)] = data
        return len(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        target = max(0, {io.SEEK_SET: 0, io.SEEK_CUR: self.tell(), io.SEEK_END: self._size}[whence] + offset)
        try:
            self._stream.seek(target)
        except Py4JJavaError as e:
            raise _error(e) from None
        return target

    def tell(self) -> int:
        return int(self._stream.getPos())

    def close(self) -> None:
        if not self.closed:
            try:
                self._stream.close()
            except Py4JError:
                pass
        super().close()


class Hadoop:
    """Hadoop's FileSystem API of the running SparkContext (its Hadoop configuration: connectors, keys)."""

    def __init__(self, sc: SparkContext | None = None) -> None:
        context = sc or SparkContext._active_spark_context
        if context is None:
            raise RuntimeError("a path with a scheme needs a running SparkSession (Hadoop's FileSystem API)")
        self.jvm: Any = context._jvm
        self.gateway: Any = context._gateway
        self._conf = context._jsc.hadoopConfiguration()

    def _path(self, uri: str) -> Any:
        return self.jvm.org.apache.hadoop.fs.Path(uri)

    def _fs(self, path: Any) -> Any:
        return path.getFileSystem(self._conf)

    def _call(self, uri: str, action: Any) -> Any:
        p = self._path(uri)
        try:
            return action(self._fs(p), p)
        except Py4JJavaError as e:
            raise _error(e) from None

    def qualify(self, uri: str) -> str:
        """The URI with its file system's scheme and authority (as Spark names the files it reads)."""
        return str(self._call(uri, lambda fs, p: fs.makeQualified(p).toString()))

    @staticmethod
    def _status(s: Any) -> Status:
        return Status(str(s.getPath().toString()), int(s.getLen()), int(s.getModificationTime()),
                      bool(s.isDirectory()))

    def stat(self, uri: str) -> Status | None:
        """The file or directory at uri; None when there is none."""
        p = self._path(uri)
        try:
            return self._status(self._fs(p).getFileStatus(p))
        except Py4JJavaError as e:
            if _not_found(e):
                return None
            raise _error(e) from None

    def files(self, uri: str) -> list[Status]:
        """Every file under a directory (recursively), or the file itself; sorted by URI."""
        def walk(fs: Any, p: Any) -> list[Status]:
            found, it = [], fs.listFiles(p, True)
            while it.hasNext():
                found.append(self._status(it.next()))
            return found
        return sorted(self._call(uri, walk), key=lambda s: s.uri)

    def glob(self, pattern: str) -> list[Status]:
        """What a glob pattern (date=*/hour=*) matches, sorted by URI."""
        matched = self._call(pattern, lambda fs, p: fs.globStatus(p))
        return sorted((self._status(s) for s in matched or []), key=lambda s: s.uri)

    def open(self, uri: str) -> Reader:
        p = self._path(uri)
        try:
            fs = self._fs(p)
            return Reader(fs.open(p), int(fs.getFileStatus(p).getLen()))
        except Py4JJavaError as e:
            raise _error(e) from None

    def write(self, uri: str, data: bytes) -> None:
        """Create (or replace) a file holding data: written under a temporary name, then renamed in place.

        Hadoop's rename does not replace a file: the old one is deleted first, so a reader may find none
        for a moment (HDFS); on S3 a rename is a copy."""
        tmp = join(parent(uri), f".{path_part(uri).name}.tmp")

        def put(fs: Any, p: Any) -> None:
            temporary = self._path(tmp)
            out = fs.create(temporary, True)
            try:
                for i in range(0, len(data), CHUNK):
                    out.write(bytearray(data[i:i + CHUNK]))
            finally:
                out.close()
            fs.delete(p, False)
            if not fs.rename(temporary, p):
                raise OSError(f"could not rename {tmp} to {uri}")
        self._call(uri, put)

    def read(self, uri: str) -> bytes:
        with self.open(uri) as f:
            return f.read()

    def copy_range(self, source: str, target: str, start: int, end: int, newline: bool) -> None:
        """Copy bytes [start, end) of source into a new file target (in the JVM); newline: end it with one."""
        def copy(fs: Any, p: Any) -> None:
            src = self._path(source)
            stream = self._fs(src).open(src)
            try:
                stream.seek(start)
                out = fs.create(p, True)
                try:
                    # A bounded stream: copyBytes(in, out, count, close) would take a small count as an int
                    # buffer size (py4j passes it as an int) and copy everything.
                    bounded = self.jvm.org.apache.commons.io.input.BoundedInputStream(stream, end - start)
                    bounded.setPropagateClose(False)
                    bounded.transferTo(out)
                    if newline:
                        out.write(10)
                finally:
                    out.close()
            finally:
                stream.close()
        self._call(target, copy)

    def upload(self, local: str, uri: str) -> None:
        """Copy a local file (the driver's) to uri."""
        self._call(uri, lambda fs, p: fs.copyFromLocalFile(False, True, self._path(local), p))

    def mkdirs(self, uri: str) -> None:
        self._call(uri, lambda fs, p: fs.mkdirs(p))

    def delete(self, uri: str, recursive: bool = True) -> None:
        """Delete a file or directory (nothing when there is none)."""
        self._call(uri, lambda fs, p: fs.delete(p, recursive))

"""Where the optional AppCDS archive of the driver JVM's classes lives, and the JVM options that use it.

The archive (made once by `python -m spark_audit.cds`) is named after the JVM, Spark's jars and the JVM
options, so a changed install finds none and starts as before; it holds class metadata only, never data
(docs/audit.md, "Faster cold start").
"""
from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

ARCHIVE_PREFIX = "spark-"
CREATE_ENV = "MQB_SPARK_CDS_CREATE"  # set by the setup run: the path the JVM archives its classes to


def cache_dir() -> Path:
    """MQB_SPARK_CDS_DIR, else $XDG_CACHE_HOME/mqbridge/spark-cds (~/.cache by default)."""
    if os.environ.get("MQB_SPARK_CDS_DIR"):
        return Path(os.environ["MQB_SPARK_CDS_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mqbridge" / "spark-cds"


def java_executable() -> str | None:
    """The java spark-submit starts: $JAVA_HOME/bin/java, else java on the PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return os.path.realpath(found) if found and os.path.exists(found) else None


def spark_jars() -> Path | None:
    """The jars directory of the pyspark install (SPARK_HOME's when that is set)."""
    home = os.environ.get("SPARK_HOME")
    if home:
        return Path(home) / "jars"
    try:
        import pyspark
    except ImportError:
        return None
    return Path(pyspark.__file__).resolve().parent / "jars"


# JIT options: they change how code is compiled, not which classes load or how they are laid out, so the
# one-shot JVM (C1 only) and the --every JVM (full tiered JIT) share one archive
_JIT_ONLY = ("-XX:TieredStopAtLevel=", "-XX:ReservedCodeCacheSize=", "-XX:CICompilerCount=", "-XX:+TieredCompilation",
             "-XX:-TieredCompilation")


def archived_options(java_options: str) -> str:
    """The options an archive depends on: ``java_options`` without the JIT-only ones."""
    return " ".join(o for o in java_options.split() if not o.startswith(_JIT_ONLY))


def archive_key(java_options: str) -> str | None:
    """A hash of what the archive depends on: the JVM binary, every Spark jar (name, size, mtime), the
    options other than the JIT's."""
    java, jars = java_executable(), spark_jars()
    if java is None or jars is None or not jars.is_dir():
        return None
    digest = hashlib.sha256()
    java_stat = os.stat(java)
    options = archived_options(java_options)
    digest.update(f"{java}\0{java_stat.st_size}\0{java_stat.st_mtime_ns}\0{options}\0".encode())
    for jar in sorted(jars.glob("*.jar")):
        st = jar.stat()
        digest.update(f"{jar.name}\0{st.st_size}\0{st.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:16]


def archive_path(java_options: str) -> Path | None:
    key = archive_key(java_options)
    return None if key is None else cache_dir() / f"{ARCHIVE_PREFIX}{key}.jsa"


def _switched_off() -> bool:
    return os.environ.get("MQB_SPARK_CDS", "").lower() in ("off", "0", "no", "false")


def missing_note(java_options: str) -> str | None:
    """What to tell a user whose JVM starts without an archive it could use (None: it has one, or the archive
    is off, being made, or impossible here)."""
    if _switched_off() or os.environ.get(CREATE_ENV):
        return None
    path = archive_path(java_options)
    if path is None or path.is_file():
        return None
    return ("audit: note: no class archive for this Java and Spark yet; `python -m spark_audit.cds` makes one "
            "once (a minute), and every later audit starts faster (on a 2-core machine: session 2.5-3.8 s "
            "instead of 7 s, the 1M-row audit 4-11 s sooner; docs/audit.md). MQB_SPARK_CDS=off: no archive, "
            "no note")


def cds_options(java_options: str) -> str:
    """The JVM options that create (setup run) or use (when present) the archive; "" otherwise."""
    if _switched_off():
        return ""
    creating = os.environ.get(CREATE_ENV)
    if creating:
        return f"-XX:ArchiveClassesAtExit={creating} -Xlog:cds=off -Xlog:cds+dynamic=off"
    path = archive_path(java_options)
    if path is None or not path.is_file():
        return ""
    # -Xshare:auto: an archive the JVM cannot map (another class path, say) is ignored, quietly.
    return f"-XX:SharedArchiveFile={path} -Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"

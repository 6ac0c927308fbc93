"""Real Java as the oracle: our float text and identifier rules agree with the JVM's own.

One JVM (tests/java/JavaTypeOracle.java, run as a single-file program) answers a batch of queries:
Float/Double.parseFloat of the text we write, Float/Double.toString of values we must read, and the
Character.isJavaIdentifierStart/Part class of every BMP code point.
"""
from __future__ import annotations

import math
import random
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from mappings.errors import MappingError
from mappings.jms.model import JavaType, identifier_problem
from mappings.jms.typed_xml import decode_value, float_range_problem, format_float

ORACLE = Path(__file__).resolve().parent / "java" / "JavaTypeOracle.java"
JAVA = shutil.which("java")
pytestmark = pytest.mark.skipif(JAVA is None, reason="needs a JDK (java) to run the Java oracle")

EDGE_DOUBLES = [0.0, -0.0, 1.0, -1.5, 0.1, 2.24, 999999.0, 1e16, 1e-5, 5e-324, 2.2250738585072014e-308,
                1.7976931348623157e308, 123456789012345680.0, math.pi]


def _f32_from_bits(bits: int) -> float:
    return struct.unpack(">f", struct.pack(">I", bits))[0]


def _bits32(value: float) -> str:
    return struct.pack(">f", value).hex()


def _bits64(value: float) -> str:
    return struct.pack(">d", value).hex()


def _samples() -> tuple[list[float], list[float]]:
    rng = random.Random(20261122)  # fixed seed: the same sample every run
    floats = [_f32_from_bits(rng.getrandbits(32)) for _ in range(1500)]
    floats += [_f32_from_bits(struct.unpack(">I", struct.pack(">f", d))[0]) for d in EDGE_DOUBLES
               if abs(d) < 3.4e38 and (d == 0 or abs(d) > 1.5e-45)]
    doubles = [struct.unpack(">d", struct.pack(">Q", rng.getrandbits(64)))[0] for _ in range(1500)]
    doubles += EDGE_DOUBLES
    return ([f for f in floats if not math.isnan(f)], [d for d in doubles if not math.isnan(d)])


@pytest.fixture(scope="module")
def oracle() -> dict[str, list[str]]:
    floats, doubles = _samples()
    queries: list[str] = []
    queries += [f"parsefloat {format_float(f, JavaType.FLOAT)}" for f in floats]
    queries += [f"parsedouble {format_float(d, JavaType.DOUBLE)}" for d in doubles]
    queries += [f"float {_bits32(f)}" for f in floats]
    queries += [f"double {_bits64(d)}" for d in doubles]
    queries += ["parsefloat NaN", "parsefloat Infinity", "parsedouble -Infinity", "ident"]
    result = subprocess.run([JAVA, "-Xshare:auto", "-XX:TieredStopAtLevel=1", str(ORACLE)],  # type: ignore[list-item]
                            input="\n".join(queries) + "\n", capture_output=True, text=True, timeout=120,
                            check=True)
    answers = result.stdout.splitlines()
    assert len(answers) == len(queries), result.stderr
    n_f, n_d = len(floats), len(doubles)
    cuts = [0, n_f, n_f + n_d, 2 * n_f + n_d, 2 * n_f + 2 * n_d, len(answers) - 1]
    return {
        "floats": floats, "doubles": doubles,  # type: ignore[dict-item]
        "parsefloat": answers[cuts[0]:cuts[1]], "parsedouble": answers[cuts[1]:cuts[2]],
        "float_text": answers[cuts[2]:cuts[3]], "double_text": answers[cuts[3]:cuts[4]],
        "specials": answers[cuts[4]:cuts[5]], "ident": answers[-1:],
    }


def test_java_reads_our_float_text_back_to_the_same_bits(oracle):
    for value, java_bits in zip(oracle["floats"], oracle["parsefloat"], strict=True):
        assert java_bits == _bits32(value), (value, format_float(value, JavaType.FLOAT))


def test_java_reads_our_double_text_back_to_the_same_bits(oracle):
    for value, java_bits in zip(oracle["doubles"], oracle["parsedouble"], strict=True):
        assert java_bits == _bits64(value), (value, format_float(value, JavaType.DOUBLE))


def test_java_reads_our_non_finite_forms(oracle):
    assert oracle["specials"] == [_bits32(math.nan), _bits32(math.inf), _bits64(-math.inf)]


@pytest.mark.parametrize(("kind", "jtype", "dt", "bits"), [
    ("float", JavaType.FLOAT, "r4", _bits32), ("double", JavaType.DOUBLE, "r8", _bits64)])
def test_we_read_javas_own_float_text(oracle, kind, jtype, dt, bits):
    checked = 0
    for value, text in zip(oracle[f"{kind}s"], oracle[f"{kind}_text"], strict=True):
        if float_range_problem(value, jtype) is None:
            assert bits(decode_value(dt, text, name="p").value) == bits(value), text
            checked += 1
        else:  # outside the Datatype table's dt= range: refused by name, never misread
            with pytest.raises(MappingError):
                decode_value(dt, text, name="p")
    assert checked > 500


def test_identifier_characters_match_java(oracle):
    classes = oracle["ident"][0]
    assert len(classes) == 65536
    mismatches = []
    for cp, java_class in enumerate(classes):
        if java_class in "UI":
            # unassigned in Java 17's Unicode, or "identifier-ignorable" (controls, format chars): we
            # deliberately refuse controls and may know newer Unicode than the JVM
            continue
        ch = chr(cp)
        ours = "S" if identifier_problem(ch) is None else "P" if identifier_problem("a" + ch) is None else "N"
        if ours != java_class:
            mismatches.append((hex(cp), java_class, ours))
    assert mismatches == []

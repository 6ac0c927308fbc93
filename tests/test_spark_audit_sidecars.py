"""The audit reads the gateway's Parquet sidecars instead of parsing their JSON (spark_audit/sidecars.py), and
the result is the JSON's: mixed inputs (files with sidecars written by the gateway's own log writer, without,
gzip, a damaged sidecar, one whose file grew) give the same verdict, findings, counts and stored rows as an
audit of the JSON alone; a sidecar is never read as a log (a glob that names it counts each record once)."""
from __future__ import annotations

import gzip
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("pyarrow")

from bridge.cli.main import main  # noqa: E402
from bridge.convlog_parquet import Rejected, sidecar_path, write_sidecar  # noqa: E402
from spark_audit.schema import record_schema  # noqa: E402
from tests.support.gateway import wait_for  # noqa: E402

try:
    from tests.spark_fixtures import FIXTURE_LOGS, generated_log, spark  # noqa: F401
    from tests.test_convlog_sidecars import written_through_the_log
except ImportError:  # tests/ is not a package: pytest puts this directory on sys.path
    from spark_fixtures import FIXTURE_LOGS, generated_log, spark  # noqa: F401
    from test_convlog_sidecars import written_through_the_log

pytestmark = pytest.mark.spark


def keyed(content: bytes, prefix: str) -> bytes:
    """generated_log's records under other keys (files that do not share messages)."""
    return content.replace(b'"message_key":"g', b'"message_key":"' + prefix.encode())


def timestamp_forms() -> bytes:
    """Ingress/egress pairs whose times use every form of the log's grammar (offsets, a space, fractions)."""
    ingress, egress = (json.loads(line) for line in (FIXTURE_LOGS / "gateway-a.jsonl").read_text().splitlines()[:2])
    forms = [("2026-03-01T10:00:00Z", "2026-03-01 10:00:00.5Z"), ("2026-03-01T15:30:00+05:30", "2026-03-01T10:00:01Z"),
             ("2026-03-01T09:00:00.123456-01:00", "2026-03-01T10:00:02.000001+00:00"),
             ("2026-03-01T10:00:03Z", "2026-03-02T04:00:02+18:00")]
    lines = []
    for i, (t_in, t_out) in enumerate(forms):
        lines.append(json.dumps({**ingress, "event_time": t_in, "message_key": f"t{i}"}))
        lines.append(json.dumps({**egress, "event_time": t_out, "message_key": f"t{i}"}))
    return "".join(line + "\n" for line in lines).encode()


def audit(logs: list[Path], out: Path) -> tuple[int, dict[str, Any]]:
    code = main(["audit", *map(str, logs), "--out", str(out), "--grace", "60", "--no-parquet-tables"])
    return code, json.loads((out / "summary.json").read_text())


def comparable(summary: dict[str, Any]) -> dict[str, Any]:
    """The summary without what says how the input was read (notes, sidecars used)."""
    inp = {k: v for k, v in summary["input"].items() if k not in ("notes", "sidecar_files")}
    return {**summary, "input": inp}


def stored_rows(spark, out: Path) -> Counter[str]:
    """Every row of the audit's Parquet log: its partitions and the sidecars it reads in place (each as text)."""
    from spark_audit.audit import has_partitions
    from spark_audit.parquet_log import checked, sidecar_rows

    parquet, columns = str(out / "parquet"), record_schema().fieldNames()
    frames = [sidecar_rows(spark, refs, partitions=False).select(*columns)] if (refs := checked(parquet)) else []
    if has_partitions(parquet):
        frames.append(spark.read.parquet(parquet).select(*columns))
    return Counter(json.dumps(r.asDict(recursive=True), default=str, sort_keys=True)
                   for frame in frames for r in frame.collect())


def partition_rows(spark, out: Path) -> int:
    """The rows the ingest wrote into the Parquet log's own partitions (the parsed files' rows)."""
    return spark.read.parquet(str(out / "parquet")).count()


def parquet_audit(out: Path, to: Path) -> tuple[int, dict[str, Any] | None]:
    """`--parquet` (no LOGS): the Parquet log an audit of LOGS left, audited as it is."""
    code = main(["audit", "--parquet", str(out / "parquet"), "--out", str(to), "--grace", "60",
                 "--no-parquet-tables"])
    summary = to / "summary.json"
    return code, json.loads(summary.read_text()) if summary.exists() else None


def without_input(summary: dict[str, Any] | None) -> dict[str, Any]:
    assert summary is not None
    return {k: v for k, v in summary.items() if k != "input"}


def test_sidecars_give_the_verdict_findings_counts_and_rows_of_the_json(spark, tmp_path, capsys):
    logs = tmp_path / "logs"
    lines = generated_log(900, malformed_every=0).decode().splitlines(keepends=True)
    written = written_through_the_log(logs, lines, chunks=4, max_bytes=len("".join(lines)) // 4)
    with_sidecar = [f for f in written if sidecar_path(f).exists()]
    assert len(with_sidecar) >= 3 and not sidecar_path(written[-1]).exists()  # the open file has none

    bad = logs / "bad.jsonl"  # malformed lines: no sidecar, the audit reports them from the JSON
    bad.write_bytes(keyed(generated_log(200, malformed_every=40), "b"))
    with pytest.raises(Rejected):
        write_sidecar(bad)
    (logs / "z.jsonl.gz").write_bytes(gzip.compress(keyed(generated_log(150, malformed_every=0), "z")))
    grown = logs / "grown.jsonl"  # its sidecar describes the file before 50 more messages (one lost)
    grown.write_bytes(keyed(generated_log(150, malformed_every=0), "r"))
    write_sidecar(grown)
    with open(grown, "ab") as f:
        f.write(keyed(generated_log(50, malformed_every=0), "s"))
    broken = logs / "broken.jsonl"  # its sidecar lost its footer
    broken.write_bytes(keyed(generated_log(100, malformed_every=0), "k"))
    cut = write_sidecar(broken)
    cut.write_bytes(cut.read_bytes()[:-100])
    times = logs / "times.jsonl"
    times.write_bytes(timestamp_forms())
    write_sidecar(times)

    # As a shell glob names them: every file, sidecars too.
    code, summary = audit(sorted(logs.iterdir()), tmp_path / "with")
    err = capsys.readouterr().err
    assert summary["input"]["sidecar_files"] == len(with_sidecar) + 1  # the writer's closed files and times.jsonl
    notes = summary["input"]["notes"]
    assert "Parquet sidecar ignored" in notes[str(grown)] and "bytes" in notes[str(grown)]
    assert "Parquet sidecar ignored (unreadable" in notes[str(broken)]
    assert str(broken) in err and "Traceback" not in err
    # the sidecars are read in place: only the parsed files' rows were written into the Parquet log
    in_place = sum(len(f.read_text().splitlines()) for f in [*with_sidecar, times])
    assert partition_rows(spark, tmp_path / "with") == summary["input"]["valid"] - in_place
    with_rows = stored_rows(spark, tmp_path / "with")
    # the Parquet log audited as it is (its partitions and the sidecars it lists): the JSON's findings
    log_code, log_summary = parquet_audit(tmp_path / "with", tmp_path / "with-log")

    for f in logs.glob("*.parquet"):
        f.unlink()
    json_code, json_summary = audit([logs], tmp_path / "json")
    assert json_summary["input"]["sidecar_files"] == 0
    assert code == json_code == log_code == 1
    assert json_summary["verdict"]["losses"] > 0 and json_summary["input"]["bad"] > 0
    assert comparable(summary) == comparable(json_summary)
    json_rows = stored_rows(spark, tmp_path / "json")
    assert sum(with_rows.values()) == sum(json_rows.values()) == summary["input"]["valid"]
    assert with_rows == json_rows
    json_log_code, json_log_summary = parquet_audit(tmp_path / "json", tmp_path / "json-log")
    assert json_log_code == 1 and without_input(log_summary) == without_input(json_log_summary)


def test_a_sidecar_whose_pages_are_damaged_is_not_trusted_the_json_is_read(spark, tmp_path, capsys):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.jsonl").write_bytes(generated_log(300, malformed_every=0))
    side = write_sidecar(logs / "a.jsonl")
    data = bytearray(side.read_bytes())
    middle = len(data) // 3  # in the column chunks' pages, far from the footer
    data[middle:middle + 64] = bytes(b ^ 0x5A for b in data[middle:middle + 64])
    side.write_bytes(bytes(data))
    code, summary = audit([logs], tmp_path / "out")
    assert summary["input"]["sidecar_files"] == 0
    assert "could not be read" in summary["input"]["notes"][str(logs / "a.jsonl")]
    shutil.rmtree(logs / "a.jsonl.parquet", ignore_errors=True)
    side.unlink()
    json_code, json_summary = audit([logs], tmp_path / "json")
    assert code == json_code and comparable(summary) == comparable(json_summary)


def test_a_sidecar_with_a_row_that_breaks_a_rule_is_ignored_and_its_json_parsed(spark, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    logs = tmp_path / "logs"
    logs.mkdir()
    log = logs / "a.jsonl"
    log.write_bytes(generated_log(300, malformed_every=0))
    side = write_sidecar(log)
    table = pq.read_table(side)
    i = table.schema.get_field_index("status")
    status = table.column(i).to_pylist()
    status[7] = "mislaid"  # no status: the row breaks the enum rule (the JSON line is valid)
    changed = table.set_column(i, table.schema.field(i), pa.array(status, table.schema.field(i).type))
    pq.write_table(changed.replace_schema_metadata(table.schema.metadata), side, write_page_checksum=True)
    code, summary = audit([logs], tmp_path / "with")  # checked with pyarrow while the session starts
    assert summary["input"]["sidecar_files"] == 0 and summary["input"]["bad"] == 0
    assert (summary["input"]["notes"][str(log)] == "Parquet sidecar ignored (a row breaks a field rule: line 8: "
            "invalid:status); its JSON was read")
    uri_code, by_uri = audit([f"file://{logs}"], tmp_path / "uri")  # a URI: checked by a Spark job
    assert by_uri["input"]["sidecar_files"] == 0
    assert (by_uri["input"]["notes"][f"file:{log}"] == f"Parquet sidecar ignored (1 of its {table.num_rows} rows "
            "break a field rule); its JSON was read")
    side.unlink()
    json_code, json_summary = audit([logs], tmp_path / "json")
    assert code == uri_code == json_code and comparable(summary) == comparable(json_summary)
    assert {**comparable(by_uri), "input": None} == {**comparable(json_summary), "input": None}
    assert stored_rows(spark, tmp_path / "with") == stored_rows(spark, tmp_path / "json")
    write_sidecar(log)  # a good sidecar, by URI: accepted by the Spark job, read in place
    good_code, good = audit([f"file://{logs}"], tmp_path / "good")
    assert good["input"]["sidecar_files"] == 1 and good_code == json_code
    assert {**comparable(good), "input": None} == {**comparable(json_summary), "input": None}
    assert stored_rows(spark, tmp_path / "good") == stored_rows(spark, tmp_path / "json")


def test_a_parquet_log_whose_sidecar_changed_or_is_gone_says_so_and_drops_no_row(spark, tmp_path, capsys):
    """The Parquet log reads the sidecars in place: a later audit of it (--parquet) checks each one is still
    as it was ingested, and stops with exit 2 naming it when not; auditing the logs again reads every row."""
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "a.jsonl").write_bytes(keyed(generated_log(200, malformed_every=0), "a"))
    (logs / "b.jsonl").write_bytes(keyed(generated_log(200, malformed_every=0), "b"))
    side = write_sidecar(logs / "a.jsonl")
    out = tmp_path / "out"
    code, summary = audit([logs], out)
    assert summary["input"]["sidecar_files"] == 1
    assert partition_rows(spark, out) == summary["input"]["valid"] // 2  # b.jsonl's rows only
    log_code, log_summary = parquet_audit(out, tmp_path / "log")
    assert log_code == code == 1 and without_input(log_summary) == without_input(summary)

    # the gateway, restarted within the hour, appended to a.jsonl and wrote its sidecar again
    with open(logs / "a.jsonl", "ab") as f:
        f.write(keyed(generated_log(20, malformed_every=0), "c"))
    write_sidecar(logs / "a.jsonl")
    capsys.readouterr()
    changed_code, changed = parquet_audit(out, tmp_path / "changed")
    err = capsys.readouterr().err
    assert changed_code == 2 and changed is None
    assert "changed since it was ingested" in err and str(side) in err and str(logs / "a.jsonl") in err
    side.unlink()
    gone_code, gone = parquet_audit(out, tmp_path / "gone")
    err = capsys.readouterr().err
    assert gone_code == 2 and gone is None and "is gone" in err and str(side) in err

    # audited from the logs again: a.jsonl is parsed (its sidecar is gone), the ledger lists no sidecar
    again_code, again = audit([logs], out)
    assert again["input"]["sidecar_files"] == 0
    assert again["input"]["valid"] == summary["input"]["valid"] + 40
    assert partition_rows(spark, out) == again["input"]["valid"] and not (out / "parquet" / "_sidecars.json").exists()
    log_code, log_summary = parquet_audit(out, tmp_path / "log-again")
    assert log_code == again_code and without_input(log_summary) == without_input(again)


RULES = """\
routes:
  - name: up
    from: {mqtt: "plant/#"}
    to: {queue: PLANT}
"""


def test_a_real_gateways_log_audits_the_same_from_its_sidecars(spark, gateway_factory, clients, tmp_path):
    """`mqbridge serve` with 1 MiB files: the files it rotates away from get sidecars, its open one none."""
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES)
    gw = gateway_factory({"rules": str(rules), "convlog": {"max_file_mb": 1}})
    pub = clients(gw.port, "sensor").connect()
    infos = [pub.publish(f"plant/{i % 7}", b"reading %d" % i, qos=1, wait=False) for i in range(1500)]
    infos[-1].wait_for_publish(30)
    logdir = gw.data_dir / "convlog"  # 3,000 records of ~480 bytes: at least one rotation
    files = wait_for(lambda: sorted(logdir.glob("convlog-*.jsonl")) if len(list(logdir.glob("*.jsonl"))) >= 2
                     else None, 30, what="a rotation of the conversion log")
    wait_for(lambda: all(sidecar_path(f).exists() for f in files[:-1]), 30, what="the closed files' sidecars")
    assert gw.stop() == 0
    assert not sidecar_path(files[-1]).exists()

    code, summary = audit([logdir], tmp_path / "with")
    assert summary["input"]["sidecar_files"] == len(files) - 1
    for f in logdir.glob("*.parquet"):
        f.unlink()
    json_code, json_summary = audit([logdir], tmp_path / "json")
    assert code == json_code == 0 and summary["input"]["rows_read"] == 3000
    assert comparable(summary) == comparable(json_summary)  # (the stored rows: the test above)


def test_a_sidecar_named_as_a_file_or_uri_is_never_listed_as_a_log(tmp_path):
    from spark_audit.ingest import expand_paths

    log = tmp_path / "convlog-20260101-00-000.jsonl"
    log.write_bytes(generated_log(5, malformed_every=0))
    side = write_sidecar(log)
    assert expand_paths([side, f"file://{side}", tmp_path, log]) == [str(log), str(log)]

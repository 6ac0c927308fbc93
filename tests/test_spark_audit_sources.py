"""spark_audit.sources without Spark: which bytes of growing, rotated, compressed and damaged log files are
staged for the incremental stream, each complete line exactly once."""
from __future__ import annotations

import gzip
import os
from pathlib import Path

import pytest

from spark_audit.sources import LEDGER_FILE, Ledger, prepare, stage_new, unread_input


def staged_text(checkpoint: Path) -> list[tuple[str, bytes]]:
    return sorted((f.name, f.read_bytes()) for f in (checkpoint / "slices").iterdir())


def all_lines(checkpoint: Path) -> list[bytes]:
    return [line for _, data in staged_text(checkpoint) for line in data.splitlines() if line]


def test_only_complete_lines_are_staged_each_once(tmp_path):
    log, ckpt = tmp_path / "a.jsonl", tmp_path / "ckpt"
    log.write_bytes(b'{"n":1}\n{"n":2}\n{"n":')
    staged = stage_new(str(ckpt), [str(log)])
    assert staged_text(ckpt) == [("00000000-a.jsonl", b'{"n":1}\n{"n":2}\n')]  # the half line waits
    assert not staged.damaged and not staged.notes
    assert stage_new(str(ckpt), [str(log)]).origins == {str(ckpt / "slices" / "00000000-a.jsonl"): str(log)}
    assert len(staged_text(ckpt)) == 1  # unchanged: nothing staged again
    with log.open("ab") as f:
        f.write(b'3}\n{"n":4}')  # the rest of line 3; line 4 is a whole object still without its newline
    stage_new(str(ckpt), [str(log)])
    with log.open("ab") as f:
        f.write(b'\n{"n":5}\n')
    stage_new(str(ckpt), [str(log)])
    assert all_lines(ckpt) == [b'{"n":%d}' % i for i in range(1, 6)]


def test_unread_input_says_whether_stage_new_would_stage_anything(tmp_path):
    """What an idle --every tick checks without staging: every change stage_new reads makes it True."""
    log, ckpt = tmp_path / "a.jsonl", tmp_path / "ckpt"
    log.write_bytes(b'{"n":1}\n')
    assert unread_input(str(ckpt), [str(log)])  # no ledger yet
    stage_new(str(ckpt), [str(log)])
    assert not unread_input(str(ckpt), [str(log)])
    renamed = tmp_path / "b.jsonl"
    os.replace(log, renamed)
    assert not unread_input(str(ckpt), [str(renamed)])  # a rename reads on where it stopped: nothing new
    with renamed.open("ab") as f:
        f.write(b'{"n":2}')  # even half a line: stage_new looks, and stages nothing yet
    assert unread_input(str(ckpt), [str(renamed)])
    stage_new(str(ckpt), [str(renamed)])
    assert not unread_input(str(ckpt), [str(renamed)])
    os.utime(renamed, ns=(1, 1))  # the same size, another mtime (rewritten in place)
    assert unread_input(str(ckpt), [str(renamed)])
    stage_new(str(ckpt), [str(renamed)])
    other = tmp_path / "c.jsonl"
    other.write_bytes(b"")
    assert unread_input(str(ckpt), [str(renamed), str(other)])  # a file the ledger does not know
    assert not unread_input(str(ckpt), [str(renamed), str(tmp_path / "gone.jsonl")])


def test_a_truncated_or_replaced_file_is_read_again_and_said_so(tmp_path):
    log, ckpt = tmp_path / "a.jsonl", tmp_path / "ckpt"
    log.write_bytes(b'{"n":1}\n{"n":2}\n')
    stage_new(str(ckpt), [str(log)])
    log.write_bytes(b'{"m":1}\n')  # truncated and rewritten in place
    staged = stage_new(str(ckpt), [str(log)])
    assert "read again from the start" in staged.notes[str(log)]
    log.unlink()
    log.write_bytes(b'{"k":1}\n{"k":2}\n{"k":3}\n')  # a new file under the old name, longer than the old
    staged = stage_new(str(ckpt), [str(log)])
    assert str(log) in staged.notes
    assert all_lines(ckpt)[-3:] == [b'{"k":1}', b'{"k":2}', b'{"k":3}']


def test_a_renamed_or_compressed_file_reads_on_where_it_stopped(tmp_path):
    ckpt = tmp_path / "ckpt"
    log = tmp_path / "a.jsonl"
    log.write_bytes(b'{"n":1}\n')
    stage_new(str(ckpt), [str(log)])
    with log.open("ab") as f:
        f.write(b'{"n":2}\n')
    moved = tmp_path / "a-1.jsonl"
    os.rename(log, moved)
    assert not stage_new(str(ckpt), [str(moved)]).notes
    packed = tmp_path / "a-1.jsonl.gz"
    packed.write_bytes(gzip.compress(moved.read_bytes() + b'{"n":3}\n'))
    moved.unlink()
    assert not stage_new(str(ckpt), [str(packed)]).notes
    assert all_lines(ckpt) == [b'{"n":1}', b'{"n":2}', b'{"n":3}']


def test_damaged_gzip_keeps_its_readable_lines_and_reads_on_when_completed(tmp_path):
    ckpt = tmp_path / "ckpt"
    content = b"".join(b'{"n":%d}\n' % i for i in range(50_000))
    packed = gzip.compress(content)
    log = tmp_path / "b.jsonl.gz"
    log.write_bytes(packed[: len(packed) // 2])
    staged = stage_new(str(ckpt), [str(log)])
    assert staged.damaged[str(log)].startswith("truncated gzip file")
    first = all_lines(ckpt)
    assert 0 < len(first) < 50_000
    log.write_bytes(packed)  # the writer finished it
    assert not stage_new(str(ckpt), [str(log)]).damaged
    assert all_lines(ckpt) == content.splitlines()


def test_slices_of_a_run_that_died_before_its_ledger_are_staged_again(tmp_path):
    log, ckpt = tmp_path / "a.jsonl", tmp_path / "ckpt"
    log.write_bytes(b'{"n":1}\n')
    stage_new(str(ckpt), [str(log)])
    ledger = (ckpt / LEDGER_FILE).read_text()
    with log.open("ab") as f:
        f.write(b'{"n":2}\n')
    stage_new(str(ckpt), [str(log)])
    (ckpt / LEDGER_FILE).write_text(ledger)  # as if the run died after staging, before the ledger
    with log.open("ab") as f:
        f.write(b'{"n":3}\n')
    stage_new(str(ckpt), [str(log)])
    assert all_lines(ckpt) == [b'{"n":1}', b'{"n":2}', b'{"n":3}']
    assert Ledger.read(str(ckpt)).next_slice == 2


def test_an_unreadable_ledger_stops_naming_it(tmp_path):
    (tmp_path / LEDGER_FILE).write_text("{not json")
    with pytest.raises(RuntimeError, match=LEDGER_FILE):
        stage_new(str(tmp_path), [])


def test_one_shot_reads_complete_files_in_place_and_stages_the_rest(tmp_path):
    whole, live, packed, missing = (tmp_path / n for n in ("a.jsonl", "b.jsonl", "c.jsonl.gz", "d.jsonl"))
    whole.write_bytes(b'{"n":1}\n')
    live.write_bytes(b'{"n":2}\n{"n"')
    packed.write_bytes(gzip.compress(b'{"n":3}\n'))
    staged = prepare([str(p) for p in (whole, live, packed, missing)], tmp_path / "staging")
    assert staged.paths[0] == str(whole)
    assert [Path(p).read_bytes() for p in staged.paths[1:]] == [b'{"n":2}\n', b'{"n":3}\n']
    assert [staged.origin("file://" + p) for p in staged.paths] == [str(whole), str(live), str(packed)]
    assert staged.notes == {str(live): "unfinished last line (4 bytes) not read"}
    assert list(staged.damaged) == [str(missing)]


def test_a_checkpoint_from_before_the_ledger_reads_its_files_on_from_their_end(tmp_path):
    """The stream of an older version read the log files themselves: they are not read again (their
    records are in the Parquet log), only what is written to them from now on; a file it never read is
    read from the start."""
    old, new, ckpt = tmp_path / "old.jsonl", tmp_path / "new.jsonl", tmp_path / "ckpt"
    old.write_bytes(b'{"n":1}\n')
    new.write_bytes(b'{"n":2}\n')
    sources = ckpt / "stream" / "sources" / "0"
    sources.mkdir(parents=True)
    (sources / "0").write_text(f'v1\n{{"path":"file://{old}","timestamp":1,"batchId":0}}\n')
    staged = stage_new(str(ckpt), [str(old), str(new)])
    assert list(staged.notes) == [str(old)]
    with old.open("ab") as f:
        f.write(b'{"n":3}\n')
    assert not stage_new(str(ckpt), [str(old), str(new)]).notes
    assert all_lines(ckpt) == [b'{"n":2}', b'{"n":3}']

"""The broker store's group commit writes a batch table by table (bridge/mqtt/store.py ``table_runs``): random
batches of every kind of write the store queues, applied that way and applied one statement per write in the
order queued, leave the same rows in every table."""
from __future__ import annotations

import asyncio
import random
import sqlite3
import time

import pytest

from bridge.mqtt import store as S


def _random_ops(rng: random.Random, n: int) -> list[S.Op]:
    clients = ["c1", "c2", "c3"]
    ops: list[S.Op] = []
    messages: list[int] = []
    outbound: list[tuple[str, int]] = []
    next_id = 1

    def add(sql: str, params: tuple[object, ...]) -> None:
        ops.append([sql, params, 0])

    for _ in range(n):
        c = rng.choice(clients)
        kind = rng.randrange(16)
        if kind <= 3:
            add(S._INSERT_MESSAGE, (next_id, f"t/{next_id}", b"p", 1, 0, None, 1.0, None, None, 0, 7, None, None,
                                    None))
            messages.append(next_id)
            next_id += 1
        elif kind <= 6:
            mid = rng.choice(messages) if messages else 1
            add(S._INSERT_OUTBOUND, (c, next_id, mid, 1, 0, None, 0, None))
            outbound.append((c, next_id))
            next_id += 1
        elif kind == 7 and outbound:
            add(S._OUTBOUND_SENT, (rng.randrange(1, 99), *rng.choice(outbound)))
        elif kind == 8 and outbound:
            add(S._OUTBOUND_RELEASED, rng.choice(outbound))
        elif kind == 9 and outbound:
            add(S._DELETE_OUTBOUND, rng.choice(outbound))
        elif kind == 10 and messages:
            add(S._DELETE_MESSAGE, (rng.choice(messages),))
        elif kind == 11:
            add(S._SAVE_SESSION, (c, 4, rng.random(), 60, None, ""))
            add(S._TOUCH_SESSION, (rng.random(), rng.choice(clients)))
        elif kind == 12:
            if rng.random() < 0.3:
                for sql in S._DELETE_SESSION:
                    add(sql, (c,))
            else:
                add(S._SAVE_SUBSCRIPTION, (c, rng.choice(["a/#", "b"]), 1, None))
                add(S._DELETE_SUBSCRIPTION, (rng.choice(clients), rng.choice(["a/#", "b"])))
        elif kind == 13:
            add(S._SAVE_INBOUND_QOS1, (c, rng.randrange(1, 4), next_id, 0, b"d"))
            add(S._DELETE_INBOUND_QOS1, (rng.choice(clients), rng.randrange(1, 4)))
            next_id += 1
        elif kind == 14:
            add(S._RESERVE_MESSAGE_IDS, (str(next_id),))
            add(S._SAVE_ROUTE_SINCE, (f"since:{c}", str(next_id)))
            add(S._DELETE_ROUTE_SINCE, (f"since:{rng.choice(clients)}",))
        else:
            topic = rng.choice(["r/1", "r/2"])
            add(S._SAVE_RETAINED, (topic, bytes([next_id % 256]), 1, None, 1.0, None, None))
            if rng.random() < 0.4:
                add(S._DELETE_RETAINED, (topic,))
        if rng.random() < 0.05:
            ops[-1][0] = None   # cancelled before the writer took it
    return ops


def _db() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.executescript(S._SCHEMA)
    return conn


def _rows(conn: sqlite3.Connection) -> dict[str, list[tuple[object, ...]]]:
    tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name")]
    return {t: sorted(conn.execute(f"SELECT * FROM {t}").fetchall(), key=repr) for t in tables}


@pytest.mark.parametrize("seed", range(40))
def test_table_by_table_leaves_the_rows_one_statement_per_write_leaves(seed: int) -> None:
    rng = random.Random(seed)
    ops = _random_ops(rng, rng.choice([5, 40, 300]))
    one_by_one, grouped = _db(), _db()
    for sql, params, _ in ops:
        if sql is not None:
            one_by_one.execute(sql, params)   # type: ignore[arg-type]
    grouped.execute("BEGIN")
    runs = S.table_runs(ops)
    for sql, rows in runs:
        S._run_many(grouped, sql, rows)
    grouped.execute("COMMIT")
    assert _rows(grouped) == _rows(one_by_one)
    assert sum(len(rows) for _, rows in runs) == sum(1 for op in ops if op[0] is not None)


def test_alternating_message_and_delivery_rows_become_one_run_each() -> None:
    ops: list[S.Op] = []
    for i in range(1, 101):
        ops.append([S._INSERT_MESSAGE, (i, "t", b"p", 1, 0, None, 1.0, None, None, 0, i, None, None, None), 0])
        ops.append([S._INSERT_OUTBOUND, ("sub", i, i, 1, 0, None, 0, None), 0])
    runs = S.table_runs(ops)
    assert [(sql, len(rows)) for sql, rows in runs] == [(S._INSERT_MESSAGE, 100), (S._INSERT_OUTBOUND, 100)]


def test_a_statement_of_another_form_is_refused_not_grouped() -> None:
    with pytest.raises(ValueError, match="not a one-table write"):
        S.table_runs([["WITH x AS (SELECT 1) DELETE FROM a WHERE id IN x", (), 0]])


def test_a_write_stays_with_its_loop_turn_until_the_turn_ends(tmp_path) -> None:
    """The writer takes a turn's writes at its end, with its acknowledgements: a delivery acknowledged in the
    same turn is withdrawn however long the turn runs (the writer no longer wakes at each write)."""
    async def main() -> None:
        loop = asyncio.get_running_loop()
        store = S.Store(tmp_path / "s.sqlite3", synchronous="NORMAL")
        store.open()
        store.start(loop)
        committed = loop.create_future()
        try:
            gen = store._gen
            op = store.insert_outbound(("sub", 1, 1, 1, 0, None, 0, None))
            kept = store.insert_outbound(("sub", 2, 1, 1, 0, None, 0, None))
            deadline = time.monotonic() + 0.2          # the rest of a long turn: the writer must not take them
            while time.monotonic() < deadline and store._gen == gen:
                time.sleep(0.005)
            assert store._gen == gen
            assert store.cancel(op) and store.amend(kept, ("sub", 2, 1, 1, 0, 7, 1, None))
            store.after_commit(lambda: committed.set_result(None))
            await asyncio.wait_for(committed, 10)
        finally:
            store.close()
        rows = sqlite3.connect(tmp_path / "s.sqlite3").execute("SELECT seq, packet_id, state FROM outbound").fetchall()
        assert rows == [(2, 7, 1)]
    asyncio.run(main())

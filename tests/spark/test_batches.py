"""The writer's columnar encoder and partitioner (C extension, and the fallback to the
client's) against the client's encoder and partitioner (no Spark session)."""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from samsa.client.partitioner import partition_for_key
from samsa.protocol.records import encode_batch
from samsa.spark import batches
from samsa.spark.batches import NATIVE, binary_column, frame, header_column, key_partitions
from samsa.spark.produce import _Columns

HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))

paths = pytest.mark.parametrize("native", [
    pytest.param(True, marks=pytest.mark.skipif(not NATIVE, reason="C extension not built")),
    False])


@pytest.fixture
def use(native: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not native:
        monkeypatch.setattr(batches, "_native", None)


def _rows(rnd: random.Random, n: int) -> list[tuple[Any, ...]]:
    def blob(size: int) -> bytes:
        return bytes(rnd.getrandbits(8) for _ in range(size))

    return [(None if rnd.random() < 0.3 else blob(rnd.choice([0, 1, 9, 200])),
             None if rnd.random() < 0.1 else blob(rnd.choice([0, 3, 100, 9000])),
             None if rnd.random() < 0.3 else [
                 (f"h{j}", None if rnd.random() < 0.3 else blob(rnd.randint(0, 9)))
                 for j in range(rnd.choice([0, 1, 3]))])
            for _ in range(n)]


@pytest.mark.parametrize("seed", range(8))
def test_encoder_matches_the_clients(seed: int) -> None:
    """Rows picked from (sliced) Arrow columns in two chunks, as the bulk producer fills a
    batch over two Arrow batches, framed: the bytes encode_batch gives the same records
    (offset and timestamp deltas past one varint byte in the second chunk), and the bytes
    of the fallback (the rows as the client's record tuples, encoded by encode_batch)."""
    rnd = random.Random(seed)
    n = rnd.choice([2, 30, 300]) if seed else 9000
    pad = rnd.randint(0, 3)  # Spark's batches start at 0; slices must work too
    data = _rows(rnd, n + pad)
    keys = pa.array([r[0] for r in data], pa.binary()).slice(pad)
    values = pa.array([r[1] for r in data], pa.binary())
    if seed % 2:  # string values (the sink takes them)
        values = pa.array([None if r[1] is None else r[1].hex() for r in data])
    values = values.slice(pad)
    headers = pa.array([None if r[2] is None else [{"key": k, "value": v} for k, v in r[2]]
                        for r in data], HEADERS).slice(pad)
    with_headers = seed % 4 != 0
    rows = np.array(sorted(rnd.sample(range(n), rnd.randint(2, n))), np.int64)
    cut = rnd.randint(1, len(rows) - 1)
    ts_delta = rnd.choice([0, 70, 10**6])
    cols = _Columns(keys, values, headers if with_headers else None,
                    binary_column(keys, n), binary_column(values, n),
                    header_column(headers) if with_headers else None)
    ids = {"compression": 4, "producer_id": 7, "producer_epoch": 1, "base_sequence": 40}
    base_ts = 1_700_000_000_000
    fallback = encode_batch(cols.records(rows[:cut], base_ts)
                            + cols.records(rows[cut:], base_ts + ts_delta), **ids)
    if not NATIVE:
        pytest.skip("C extension not built")
    body = cols.encode(rows[:cut], 0, 0) + cols.encode(rows[cut:], cut, ts_delta)
    got = frame(body, len(rows), base_ts, base_ts + ts_delta, **ids)
    v = values.to_pylist()
    records = [(base_ts + (ts_delta if i >= cut else 0), data[pad + r][0],
                v[r].encode() if isinstance(v[r], str) else v[r],
                (data[pad + r][2] or ()) if with_headers else ())
               for i, r in enumerate(rows.tolist())]
    assert got == encode_batch(records, **ids) == fallback


@paths
@pytest.mark.usefixtures("use")
def test_key_partitions_match_the_client(native: bool) -> None:
    rnd = random.Random(3)
    keys = [None if rnd.random() < 0.2 else bytes(rnd.getrandbits(8)
                                                  for _ in range(rnd.randint(0, 40)))
            for _ in range(500)]
    for count in (1, 3, 64):
        got = key_partitions(binary_column(pa.array(keys, pa.binary()), len(keys)), count)
        assert got.tolist() == [-1 if k is None else partition_for_key(k, count)
                                for k in keys]

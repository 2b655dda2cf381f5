"""The Arrow decoders (C extension and numpy) against the row-by-row reference decoder, on
good and bad records; the record-batch encoder against an independent builder."""

from __future__ import annotations

import random
import struct

import pytest
from crc32c import crc32c

from samsa.protocol.records import (
    CorruptRecordError,
    ProducerRecordData,
    decode_batches,
    encode_batch,
)
from samsa.spark.arrow import Columns, decode_into
from samsa.spark.columnar import NATIVE, decode_chunk
from tests.protocol import recordbuild


def _random_chunk(rnd: random.Random) -> tuple[bytes, int]:
    def blob(n: int) -> bytes:
        return bytes(rnd.getrandbits(8) for _ in range(n))

    batches, offset = [], 0
    for _ in range(rnd.randint(1, 5)):
        records = [ProducerRecordData(
            1_700_000_000_000 + rnd.randint(-5000, 10**7),
            None if rnd.random() < 0.3 else blob(rnd.choice([0, 1, 5, 70, 300])),
            None if rnd.random() < 0.1 else blob(rnd.choice([0, 3, 100, 200, 5000])),
            [(f"h{j}", None if rnd.random() < 0.3 else blob(rnd.randint(0, 9)))
             for j in range(rnd.choice([0, 0, 1, 3]))])
            for _ in range(rnd.randint(1, 50))]
        batches.append(encode_batch(records, base_offset=offset,
                                    compression=rnd.choice([0, 0, 1, 2, 3, 4])))
        offset += len(records)
    data = b"".join(batches)
    if rnd.random() < 0.3:  # a fetch may end inside a batch
        data = data[: -rnd.randint(1, 30)]
    return data, offset


# The C decoder (when built) and the numpy one, each against the reference.
paths = pytest.mark.parametrize("native", [
    pytest.param(True, marks=pytest.mark.skipif(not NATIVE, reason="C extension not built")),
    False])


@paths
@pytest.mark.parametrize("seed", range(20))
def test_columnar_matches_reference(seed: int, native: bool) -> None:
    rnd = random.Random(seed)
    for _ in range(10):
        data, end = _random_chunk(rnd)
        start = rnd.randint(0, end)
        until = rnd.randint(start, end + 2)
        headers = rnd.random() < 0.5
        cols = Columns("t", 3, headers)
        expected_next = decode_into(cols, data, start, until)
        batch, nxt = decode_chunk(data, start, until, "t", 3, headers, native=native)
        assert nxt == expected_next
        if not len(cols):
            assert batch is None
            continue
        assert batch is not None
        assert batch.equals(cols.take())


@paths
def test_corrupt_batches_are_rejected(native: bool) -> None:
    data = bytearray(encode_batch([ProducerRecordData(1, b"k", b"v" * 20, ())] * 3))
    data[-5] ^= 0xFF
    with pytest.raises(CorruptRecordError, match="CRC"):
        decode_chunk(bytes(data), 0, 10, "t", 0, False, native=native)


def _refresh_crc(batch: bytearray) -> None:
    struct.pack_into(">I", batch, 17, crc32c(bytes(batch[21:])))


@paths
@pytest.mark.parametrize("damage", ["length", "count", "key"])
def test_bad_records_with_a_good_crc_are_rejected(native: bool, damage: str) -> None:
    """Both decoders refuse records that do not fit their batch (a bad producer's batch
    passes the CRC check)."""
    data = bytearray(encode_batch([ProducerRecordData(1, b"key", b"v" * 20, ())] * 3))
    if damage == "length":
        data[61] = 0x7E  # the first record claims 63 bytes
    elif damage == "count":
        struct.pack_into(">i", data, 57, 4)
    else:
        data[61 + 4] = 0x50  # the first key claims 40 bytes
    _refresh_crc(data)
    with pytest.raises(CorruptRecordError):
        decode_chunk(bytes(data), 0, 10, "t", 0, False, native=native)


@pytest.mark.parametrize("seed", range(10))
def test_encoder_matches_an_independent_builder(seed: int) -> None:
    """The writer's encoder (``encode_batch``, with its varint table) byte for byte against
    the test builder, including lengths and offset deltas past the table (-8192..8191)."""
    rnd = random.Random(seed)
    for _ in range(20):
        n = rnd.choice([1, 5, 200, 9000 if seed == 0 else 2])
        records = [(None if rnd.random() < 0.3 else bytes(rnd.randint(0, 20000)),
                    None if rnd.random() < 0.1 else bytes(rnd.choice([0, 3, 100, 9000])))
                   for _ in range(n)]
        timestamps = [1_700_000_000_000 + rnd.randint(-10**6, 10**6) for _ in range(n)]
        kw = {"compression": rnd.choice([0, 1, 4]), "producer_id": rnd.choice([-1, 7]),
              "producer_epoch": rnd.choice([-1, 0]), "base_sequence": rnd.choice([-1, 99])}
        got = encode_batch([(t, k, v, ()) for t, (k, v) in zip(timestamps, records,
                                                                 strict=True)], **kw)
        assert got == recordbuild.build(recordbuild.BatchSpec(
            records, timestamps=timestamps, leader_epoch=-1, **kw))


def test_encoder_headers_round_trip() -> None:
    rnd = random.Random(5)
    records = [ProducerRecordData(
        1_700_000_000_000 + i, None if i % 3 else b"k%d" % i, bytes(rnd.randint(0, 300)),
        [(f"h{j}", None if rnd.random() < 0.3 else b"v" * rnd.randint(0, 9000))
         for j in range(rnd.choice([0, 1, 3]))]) for i in range(300)]
    (decoded,) = decode_batches(encode_batch(records, base_offset=40))
    assert [(o, t, k, v, list(h)) for o, t, k, v, h in decoded.records] == [
        (40 + i, r.timestamp, r.key, r.value, list(r.headers)) for i, r in enumerate(records)]


@paths
@pytest.mark.parametrize("seed", range(6))
def test_runs_of_equal_sized_records_match_reference(seed: int, native: bool) -> None:
    """Batches of mostly equal-sized records (the numpy run check) with odd records between
    runs, timestamp deltas changing their varint size, and offsets past 8191."""
    rnd = random.Random(seed)
    batches, offset = [], 0
    for _ in range(3):
        n = rnd.choice([40, 300, 9000 if seed == 0 else 500])
        odd = {rnd.randrange(n) for _ in range(rnd.choice([0, 1, 3, 40]))}
        records = [ProducerRecordData(
            1_700_000_000_000 + (i // 50) * rnd.choice([1, 100]),
            None if i % 7 or seed % 2 else b"key%03d" % (i % 1000),
            b"x" * (rnd.randint(0, 300) if i in odd else 100), ()) for i in range(n)]
        batches.append(encode_batch(records, base_offset=offset,
                                    compression=rnd.choice([0, 0, 4])))
        offset += n
    data = b"".join(batches)
    start, until = rnd.randint(0, 50), offset - rnd.randint(0, 50)
    cols = Columns("t", 0, False)
    expected_next = decode_into(cols, data, start, until)
    batch, nxt = decode_chunk(data, start, until, "t", 0, False, native=native)
    assert nxt == expected_next and batch is not None
    assert batch.equals(cols.take())

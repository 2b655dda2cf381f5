import pytest

from samsa.coordinator.hashing import java_string_hash, kafka_abs, partition_for


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 97),
        ("Aa", 2112),
        ("BB", 2112),
        ("abc", 96354),
        ("hello", 99162322),
        ("test", 3556498),
        ("group", 98629247),
        # Java overflows int32: "polygenelubricants".hashCode() == Integer.MIN_VALUE
        ("polygenelubricants", -(2**31)),
        # non-BMP: U+1F600 is the surrogate pair D83D DE00 -> 0xD83D * 31 + 0xDE00
        ("\U0001f600", 0xD83D * 31 + 0xDE00),
        # BMP non-ASCII: one UTF-16 unit each
        ("é", 0xE9),
    ],
)
def test_java_string_hash_known_values(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def test_hash_matches_reference_polynomial() -> None:
    # s[0]*31^(n-1) + ... + s[n-1] over UTF-16 code units, wrapped to int32
    text = "console-consumer-\U0001f600-42"
    units = []
    for ch in text:
        cp = ord(ch)
        if cp > 0xFFFF:
            cp -= 0x10000
            units += [0xD800 + (cp >> 10), 0xDC00 + (cp & 0x3FF)]
        else:
            units.append(cp)
    h = sum(u * 31 ** (len(units) - 1 - i) for i, u in enumerate(units)) % 2**32
    h = h - 2**32 if h >= 2**31 else h
    assert java_string_hash(text) == h


def test_abs_of_min_int_is_zero() -> None:
    assert kafka_abs(-(2**31)) == 0
    assert kafka_abs(-5) == 5
    assert partition_for("polygenelubricants", 50) == 0


@pytest.mark.parametrize(("group", "expected"), [("", 0), ("a", 47), ("group", 47), ("hello", 22)])
def test_partition_for(group: str, expected: int) -> None:
    assert partition_for(group, 50) == expected
    assert 0 <= partition_for(group, 7) < 7


def test_negative_hash_uses_abs() -> None:
    # "hello world".hashCode() == 1794106052; "zzzzzzzz" wraps negative
    h = java_string_hash("zzzzzzzz")
    assert h < 0
    assert partition_for("zzzzzzzz", 50) == abs(h) % 50

# Types of the C extension samsa.spark._columnar (see _columnar.c); buffers are any objects
# with the buffer protocol (bytes, memoryview, numpy arrays, pyarrow buffers).
from typing import Any

_Column = tuple[Any, Any, Any]

def decode(buf: Any, batches: Any, start: int, until: int, headers: bool
           ) -> tuple[int, bytes, bytes, bytes, bytes, bytes, bytes | None, bytes, bytes,
                      bytes | None, bytes | None, bytes | None]: ...
def encode(rows: Any, first_delta: int, ts_delta: int, keys: _Column, values: _Column,
           headers: tuple[_Column, _Column, _Column] | None) -> bytes: ...
def partitions(keys: _Column, count: int) -> bytes: ...

"""A minimal blocking Kafka protocol client for tests that need raw frames."""

from __future__ import annotations

import socket
import struct
from typing import Any

from samsa.protocol.codec import decode_response, encode_request


class WireClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0) -> None:
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.correlation = 0

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read_frame(self) -> bytes:
        head = self._exact(4)
        (size,) = struct.unpack(">i", head)
        return self._exact(size)

    def _exact(self, n: int) -> bytes:
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise ConnectionError("closed by broker")
            buf += chunk
        return bytes(buf)

    def call(self, api_key: int, version: int, body: Any) -> Any:
        self.correlation += 1
        self.sock.sendall(encode_request(api_key, version, self.correlation, "wire-test", body))
        cid, response = decode_response(self.read_frame(), api_key, version)
        assert cid == self.correlation
        return response

    def is_closed(self, wait: float = 5.0) -> bool:
        self.sock.settimeout(wait)
        try:
            return self.sock.recv(1) == b""
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False

    def close(self) -> None:
        self.sock.close()


def call_once(bootstrap: str, api_key: int, version: int, body: Any) -> Any:
    """One request on a connection of its own; its decoded answer."""
    client = WireClient(bootstrap)
    try:
        return client.call(api_key, version, body)
    finally:
        client.close()

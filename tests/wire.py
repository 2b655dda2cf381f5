"""A minimal blocking Kafka protocol client for tests that need raw frames (over TLS and
SASL too: ``WireClient(address, tls=context, sasl=("SCRAM-SHA-256", "alice", "pw"))``)."""

from __future__ import annotations

import socket
import ssl
import struct
from typing import Any

from samsa.protocol.codec import decode_response, encode_request


class WireClient:
    def __init__(self, bootstrap: str, timeout: float = 10.0, source: str | None = None,
                 tls: ssl.SSLContext | None = None,
                 sasl: tuple[str, str, str] | None = None) -> None:
        """``source``: the local address to connect from (any of 127.0.0.0/8 on loopback;
        the broker sees it as the client's host); ``tls``: wrap the socket in TLS;
        ``sasl``: (mechanism, user, password) to authenticate with first."""
        host, port = bootstrap.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout,
                                             source_address=(source, 0) if source else None)
        self.correlation = 0
        try:
            if tls is not None:
                self.sock = tls.wrap_socket(self.sock, server_hostname=host)
            if sasl is not None:
                self.authenticate(*sasl)
        except BaseException:  # refused: closed here, not by the garbage collector
            self.sock.close()
            raise

    def authenticate(self, mechanism: str, user: str, password: str) -> None:
        """SaslHandshake v1 and SaslAuthenticate v2 until done (AssertionError if refused)."""
        from kio.schema.sasl_authenticate.v2.request import SaslAuthenticateRequest
        from kio.schema.sasl_handshake.v1.request import SaslHandshakeRequest

        from samsa.security.sasl.client import mechanism as client_mechanism

        mech = client_mechanism(mechanism, username=user, password=password)
        shake = self.call(17, 1, SaslHandshakeRequest(mechanism=mechanism))
        assert shake.error_code == 0, shake
        token: bytes | None = mech.first()
        while token is not None:
            answer = self.call(36, 2, SaslAuthenticateRequest(auth_bytes=token))
            assert answer.error_code == 0, answer.error_message
            token = mech.respond(bytes(answer.auth_bytes))

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
        except (ConnectionResetError, BrokenPipeError, ssl.SSLEOFError):
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

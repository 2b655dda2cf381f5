"""A TCP proxy for fault injection: it can swallow the response to one Produce request."""

from __future__ import annotations

import contextlib
import socket
import struct
import threading


class DropOnceProxy:
    """Forwards 127.0.0.1:port to ``target``; drops the first ``drop_api`` response once.

    When the response arrives the proxy closes the client's connection instead of passing it
    on: the request was applied by the broker but the client never learns it.
    """

    def __init__(self, drop_api: int = 0) -> None:
        self.drop_api = drop_api
        self.target: tuple[str, int] | None = None
        self.dropped = 0
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(16)
        self.port = self.listener.getsockname()[1]
        self._closed = False

    def start(self, target: tuple[str, int]) -> None:
        self.target = target
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        self._closed = True
        self.listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            assert self.target is not None
            upstream = socket.create_connection(self.target)
            watched: set[int] = set()
            threading.Thread(target=self._up, args=(client, upstream, watched),
                             daemon=True).start()
            threading.Thread(target=self._down, args=(upstream, client, watched),
                             daemon=True).start()

    @staticmethod
    def _frame(sock: socket.socket) -> bytes | None:
        head = b""
        while len(head) < 4:
            chunk = sock.recv(4 - len(head))
            if not chunk:
                return None
            head += chunk
        (size,) = struct.unpack(">i", head)
        body = bytearray()
        while len(body) < size:
            chunk = sock.recv(size - len(body))
            if not chunk:
                return None
            body += chunk
        return head + bytes(body)

    def _up(self, src: socket.socket, dst: socket.socket, watched: set[int]) -> None:
        with contextlib.suppress(OSError):
            while (frame := self._frame(src)) is not None:
                api, _, corr = struct.unpack_from(">hhi", frame, 4)
                if api == self.drop_api and not self.dropped:
                    watched.add(corr)
                dst.sendall(frame)
        self._shut(src, dst)

    def _down(self, src: socket.socket, dst: socket.socket, watched: set[int]) -> None:
        with contextlib.suppress(OSError):
            while (frame := self._frame(src)) is not None:
                (corr,) = struct.unpack_from(">i", frame, 4)
                if corr in watched and not self.dropped:
                    self.dropped += 1
                    break
                dst.sendall(frame)
        self._shut(src, dst)

    @staticmethod
    def _shut(a: socket.socket, b: socket.socket) -> None:
        for s in (a, b):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

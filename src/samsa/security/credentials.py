"""SCRAM credentials, stored salted as Kafka's ``UserScramCredentialRecord`` (salt, StoredKey,
ServerKey, iterations; never the password), and the stores that keep them.

* :class:`ScramCredential` and its makers (:func:`from_password`, :func:`from_salted_password`:
  AlterUserScramCredentials sends the salted password) and :func:`password_matches` (PLAIN
  users checked against the SCRAM store).
* :class:`CredentialStore`: users in memory, read on every authentication; :class:`FileStore`
  keeps them in ``<data dir>/security/scram-credentials.json`` (written atomically, mode
  0600). A cluster node's store over PostgreSQL is ``samsa.storage.pg.credentials``.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Kafka's SCRAM mechanisms: name -> (hash name, its digest size)
MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
#: Kafka's bounds on iterations (AlterUserScramCredentials, kafka-storage --add-scram)
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384
FILE_NAME = "scram-credentials.json"


class CredentialError(ValueError):
    """A credential that cannot be stored (unknown mechanism, iterations out of range)."""


@dataclass(frozen=True, slots=True)
class ScramCredential:
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int


def check_mechanism(mechanism: str, iterations: int | None = None) -> str:
    """The hash name of a SCRAM mechanism; CredentialError if unknown or ``iterations`` out
    of Kafka's range."""
    digest = MECHANISMS.get(mechanism)
    if digest is None:
        raise CredentialError(f"unknown SCRAM mechanism {mechanism!r} (expected "
                              f"{' or '.join(MECHANISMS)})")
    if iterations is not None and not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise CredentialError(f"iterations must be between {MIN_ITERATIONS} and "
                              f"{MAX_ITERATIONS}, got {iterations}")
    return digest


def from_salted_password(mechanism: str, salted: bytes, salt: bytes,
                         iterations: int) -> ScramCredential:
    """RFC 5802: StoredKey = H(HMAC(salted, "Client Key")), ServerKey = HMAC(salted,
    "Server Key")."""
    digest = check_mechanism(mechanism, iterations)
    client_key = hmac.new(salted, b"Client Key", digest).digest()
    return ScramCredential(salt, hashlib.new(digest, client_key).digest(),
                           hmac.new(salted, b"Server Key", digest).digest(), iterations)


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac(MECHANISMS[mechanism], password.encode(), salt, iterations)


def from_password(mechanism: str, password: str, iterations: int = MIN_ITERATIONS,
                  salt: bytes | None = None) -> ScramCredential:
    """A new credential with a random 32-byte salt (as Kafka's ScramFormatter)."""
    check_mechanism(mechanism, iterations)
    salt = secrets.token_bytes(32) if salt is None else salt
    return from_salted_password(mechanism, salted_password(mechanism, password, salt,
                                                           iterations), salt, iterations)


def password_matches(mechanism: str, credential: ScramCredential, password: str) -> bool:
    """Whether ``password`` makes ``credential`` (constant-time comparison)."""
    again = from_salted_password(mechanism, salted_password(
        mechanism, password, credential.salt, credential.iterations),
        credential.salt, credential.iterations)
    return hmac.compare_digest(again.stored_key, credential.stored_key)


class CredentialStore:
    """SCRAM credentials in memory: user -> mechanism -> credential."""

    def __init__(self, users: Mapping[str, Mapping[str, ScramCredential]] | None = None) -> None:
        self._users: dict[str, dict[str, ScramCredential]] = {
            u: dict(m) for u, m in (users or {}).items()}

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> dict[str, dict[str, int]]:
        """user -> mechanism -> iterations (what DescribeUserScramCredentials shows)."""
        return {u: {m: c.iterations for m, c in sorted(ms.items())}
                for u, ms in sorted(self._users.items()) if ms}

    def verify_plain(self, user: str, password: str) -> bool:
        """PLAIN against the SCRAM store: any of the user's credentials the password makes."""
        return any(password_matches(m, c, password) for m, c in self._users.get(user, {}).items())

    def replace_all(self, users: Mapping[str, Mapping[str, ScramCredential]]) -> None:
        self._users = {u: dict(m) for u, m in users.items()}

    def apply(self, upserts: Iterable[tuple[str, str, ScramCredential]],
              deletions: Iterable[tuple[str, str]]) -> None:
        """Change the in-memory users (a store that persists overrides :meth:`alter`)."""
        for user, mechanism in deletions:
            creds = self._users.get(user, {})
            creds.pop(mechanism, None)
            if not creds:
                self._users.pop(user, None)
        for user, mechanism, cred in upserts:
            self._users.setdefault(user, {})[mechanism] = cred

    async def alter(self, upserts: list[tuple[str, str, ScramCredential]],
                    deletions: list[tuple[str, str]]) -> None:
        """Persist a change and apply it (AlterUserScramCredentials)."""
        self.apply(upserts, deletions)

    async def refresh(self) -> None:
        """Re-read the users from where they are kept (a no-op in memory)."""


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def encode(users: Mapping[str, Mapping[str, ScramCredential]]) -> dict[str, Any]:
    return {u: {m: {"salt": _b64(c.salt), "stored_key": _b64(c.stored_key),
                    "server_key": _b64(c.server_key), "iterations": c.iterations}
                for m, c in ms.items()} for u, ms in users.items()}


def decode(data: Mapping[str, Any]) -> dict[str, dict[str, ScramCredential]]:
    return {u: {m: ScramCredential(base64.b64decode(c["salt"]), base64.b64decode(c["stored_key"]),
                                   base64.b64decode(c["server_key"]), int(c["iterations"]))
                for m, c in ms.items()} for u, ms in data.items()}


class FileStore(CredentialStore):
    """Credentials in ``<data dir>/security/scram-credentials.json``: read at start, rewritten
    on every change (``samsa users`` changes the file of a stopped broker)."""

    def __init__(self, data_dir: Path) -> None:
        self.path = Path(data_dir) / "security" / FILE_NAME
        self._stamp: tuple[int, int] | None = None
        super().__init__(self._read())

    def _read(self) -> dict[str, dict[str, ScramCredential]]:
        try:
            stat = self.path.stat()
            self._stamp = (stat.st_mtime_ns, stat.st_size)
            text = self.path.read_text()
        except FileNotFoundError:
            return {}
        try:
            return decode(json.loads(text))
        except (ValueError, KeyError, TypeError) as exc:
            raise CredentialError(f"{self.path}: not a SCRAM credential file ({exc})") from None

    def save(self) -> None:
        """Write every user atomically (a temporary file renamed over the old one)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(encode(self._users), f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        stat = self.path.stat()
        self._stamp = (stat.st_mtime_ns, stat.st_size)

    async def alter(self, upserts: list[tuple[str, str, ScramCredential]],
                    deletions: list[tuple[str, str]]) -> None:
        self.apply(upserts, deletions)
        self.save()

    async def refresh(self) -> None:
        """Re-read the file if it changed (``samsa users`` beside a running broker)."""
        try:
            stat = self.path.stat()
        except FileNotFoundError:
            return
        if (stat.st_mtime_ns, stat.st_size) != self._stamp:
            self.replace_all(self._read())

"""Test certificates, made fresh for each session with ``cryptography`` (no private key is
committed): a CA, the broker's certificate (127.0.0.1, localhost) and client certificates.

    pki = Pki(tmp_dir)                         # ca.pem
    server = pki.issue("broker", server=True)  # .pem (key + chain), .key, .crt
    alice = pki.issue("alice", ou="eng")       # subject CN=alice,OU=eng,O=samsa
"""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID


@dataclass(frozen=True)
class Issued:
    """One certificate's files: ``pem`` holds the key then the chain (Kafka's PEM keystore);
    ``key`` and ``crt`` hold them apart (librdkafka, kcat, kafka-python)."""

    pem: Path
    key: Path
    crt: Path
    subject: str


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey, password: str | None = None) -> bytes:
    encryption: serialization.KeySerializationEncryption = (
        serialization.BestAvailableEncryption(password.encode()) if password
        else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             encryption)


class Pki:
    """A CA that issues certificates into ``directory``."""

    def __init__(self, directory: Path, name: str = "samsa-test-ca") -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.key = _key()
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
                     .public_key(self.key.public_key()).serial_number(x509.random_serial_number())
                     .not_valid_before(now - datetime.timedelta(days=1))
                     .not_valid_after(now + datetime.timedelta(days=2))
                     .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
                     .sign(self.key, hashes.SHA256()))
        self.ca = self.dir / f"{name}.pem"
        self.ca.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, cn: str, *, server: bool = False, ou: str | None = None,
              password: str | None = None) -> Issued:
        key = _key()
        attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, "samsa")]
        if ou:
            attrs.append(x509.NameAttribute(NameOID.ORGANIZATIONAL_UNIT_NAME, ou))
        attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
        now = datetime.datetime.now(datetime.UTC)
        builder = (x509.CertificateBuilder().subject_name(x509.Name(attrs))
                   .issuer_name(self.cert.subject).public_key(key.public_key())
                   .serial_number(x509.random_serial_number())
                   .not_valid_before(now - datetime.timedelta(days=1))
                   .not_valid_after(now + datetime.timedelta(days=2)))
        if server:
            builder = builder.add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                False).add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                                     False)
        else:
            builder = builder.add_extension(
                x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), False)
        cert = builder.sign(self.key, hashes.SHA256())
        crt = cert.public_bytes(serialization.Encoding.PEM) + \
            self.cert.public_bytes(serialization.Encoding.PEM)
        out = Issued(self.dir / f"{cn}.pem", self.dir / f"{cn}.key", self.dir / f"{cn}.crt",
                     ",".join(a.rfc4514_string() for a in reversed(attrs)))
        out.key.write_bytes(_pem_key(key, password))
        out.crt.write_bytes(crt)
        out.pem.write_bytes(_pem_key(key, password) + crt)
        return out

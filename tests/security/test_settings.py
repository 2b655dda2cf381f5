"""Listener, TLS, JAAS and limit settings: parsed as Kafka's, bad values refused with one
clear message naming the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from samsa.broker.config import BrokerConfig, ConfigError
from samsa.security import jaas
from samsa.security.acl import parse_super_users
from samsa.security.limits import ConnectionLimits, parse_overrides
from samsa.security.listeners import Listener, parse_listeners
from samsa.security.tls import PrincipalMapper, subject_dn


def test_listeners_and_protocol_map() -> None:
    got = parse_listeners("SASL_SSL://127.0.0.1:9094, INTERNAL://[::1]:9095",
                          "INTERNAL:SASL_PLAINTEXT,SASL_SSL:SASL_SSL")
    assert got == [Listener("SASL_SSL", "127.0.0.1", 9094, "SASL_SSL"),
                   Listener("INTERNAL", "::1", 9095, "SASL_PLAINTEXT")]
    assert got[0].tls and got[0].sasl and not got[1].tls


def test_list_settings_ignore_spaces_and_empty_items() -> None:
    """Kafka's LIST settings, one reader for all (super.users separates with ``;``)."""
    assert parse_super_users(" User:admin ;; User:ops;") == frozenset({"User:admin",
                                                                      "User:ops"})
    assert parse_super_users(None) == frozenset()
    assert parse_overrides(" 127.0.0.1:5, ,10.0.0.1:7 ") == {"127.0.0.1": 5, "10.0.0.1": 7}
    with pytest.raises(ValueError, match="expected <type>:<name>"):
        parse_super_users("admin")


@pytest.mark.parametrize(("overrides", "message"), [
    ({"listeners": "FOO://127.0.0.1:1"}, "FOO has no security protocol"),
    ({"listeners": "PLAINTEXT://127.0.0.1"}, "expected NAME://HOST:PORT"),
    ({"listeners": "PLAINTEXT://a:1,PLAINTEXT://a:2"}, "given twice"),
    ({"listeners": "SSL://127.0.0.1:0"}, "ssl.keystore.location"),
    ({"listeners": "PLAINTEXT://a:1", "advertised.listeners": "SSL://b:2"}, "not in listeners"),
    ({"listeners": "SASL_PLAINTEXT://a:1", "sasl.enabled.mechanisms": "GSSAPI"}, "GSSAPI"),
    ({"listeners": "SASL_PLAINTEXT://a:1", "sasl.enabled.mechanisms": "OAUTHBEARER"},
     "sasl.oauthbearer.jwks.endpoint.url"),
    ({"listener.name.ssl.ssl.nonsense": "1"}, "unknown broker config"),
    ({"ssl.keystore.type": "JKS", "listeners": "SSL://a:1"}, "only PEM"),
])
def test_bad_settings_name_the_setting(overrides: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BrokerConfig.create(overrides=overrides)


def test_per_listener_and_per_mechanism_settings() -> None:
    config = BrokerConfig.create(overrides={
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_ssl.sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": "x",
    })
    assert config.for_listener("PLAINTEXT", "sasl.enabled.mechanisms") == "PLAIN"
    assert config.for_listener("SASL_SSL", "sasl.enabled.mechanisms") == "SCRAM-SHA-512"
    assert config.for_listener("SASL_SSL", "sasl.jaas.config", "PLAIN") == "x"
    assert config.for_listener("SASL_SSL", "sasl.jaas.config", "SCRAM-SHA-256") == ""


def test_subject_dn_is_java_rfc2253() -> None:
    cert = {"subject": ((("countryName", "US"),), (("organizationName", "A, Inc."),),
                        (("organizationalUnitName", "eng"), ("commonName", "alice")),
                        (("emailAddress", "a@x.io"),))}
    assert subject_dn(cert) == ("1.2.840.113549.1.9.1=#1606614078_2e696f".replace("_", "")
                                + ",OU=eng+CN=alice,O=A\\, Inc.,C=US")


@pytest.mark.parametrize(("rules", "dn", "name"), [
    ("DEFAULT", "CN=alice,OU=eng,O=samsa", "CN=alice,OU=eng,O=samsa"),
    ("RULE:^CN=(.*?),OU=(.*?),O=(.*)$/$1@$2/L,DEFAULT", "CN=Alice,OU=ENG,O=samsa", "alice@eng"),
    ("RULE:^CN=(.*?),OU=(.*?).*$/$1/U, DEFAULT", "CN=alice,OU=eng,O=x", "ALICE"),
    ("RULE:^CN=([a-z]+),.*$/$1/,DEFAULT", "OU=eng,CN=bob", "OU=eng,CN=bob"),
    ("RULE:^CN=(.*)$/$1 \\/ $3/", "CN=x", "x / $3"),
])
def test_principal_mapping_rules(rules: str, dn: str, name: str) -> None:
    assert PrincipalMapper(rules).name(dn) == name


def test_principal_mapping_without_a_matching_rule() -> None:
    with pytest.raises(ValueError, match=r"no ssl\.principal\.mapping\.rules"):
        PrincipalMapper("RULE:^CN=x$/y/").name("CN=z")
    with pytest.raises(ValueError, match="invalid rule"):
        PrincipalMapper("RULE:abc")


def test_jaas_plain_users_and_client_credentials(tmp_path: Path) -> None:
    text = ('org.apache.kafka.common.security.plain.PlainLoginModule required\n'
            '  username="admin" password="a\\"b" user_admin="a\\"b" user_alice="s3";')
    assert jaas.plain_users(jaas.parse_config(text)) == {"admin": 'a"b', "alice": "s3"}
    assert jaas.credentials(text) == ("admin", 'a"b')
    f = tmp_path / "jaas.conf"
    f.write_text("// comment\nKafkaServer {\n" + text + "\n};\n"
                 "sasl_ssl.KafkaServer { x.PlainLoginModule required user_bob=pw; };\n")
    sections = jaas.read_file(str(f))
    assert jaas.plain_users(sections["sasl_ssl.KafkaServer"]) == {"bob": "pw"}
    with pytest.raises(jaas.JaasError):
        jaas.parse_config("Module required user_x=")


def test_connection_limits() -> None:
    limits = ConnectionLimits(max_total=4, per_ip=2,
                              overrides=parse_overrides("10.0.0.9:3,[::1]:0"),
                              per_listener={"SSL": 1})
    assert limits.admit("PLAINTEXT", "10.0.0.1") is None
    assert limits.admit("PLAINTEXT", "10.0.0.1") is None
    assert "per.ip (2)" in str(limits.admit("PLAINTEXT", "10.0.0.1"))
    assert limits.admit("SSL", "10.0.0.9") is None
    assert "listener SSL" in str(limits.admit("SSL", "10.0.0.9"))
    assert "per.ip (0)" in str(limits.admit("PLAINTEXT", "::1"))
    assert limits.admit("PLAINTEXT", "10.0.0.9") is None
    assert "max.connections (4)" in str(limits.admit("PLAINTEXT", "10.0.0.9"))
    limits.release("PLAINTEXT", "10.0.0.1")
    assert limits.admit("PLAINTEXT", "10.0.0.9") is None
    assert limits.refused == 4

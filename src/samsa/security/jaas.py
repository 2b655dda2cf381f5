"""Kafka's JAAS configuration text: ``sasl.jaas.config`` values and JAAS files.

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

On a broker, a PlainLoginModule's ``user_<name>="<password>"`` options are PLAIN users (as
Kafka's ``PlainServerCallbackHandler``). A JAAS file (named by the broker setting
``java.security.auth.login.config``, the JVM property Kafka operators set) holds sections,
``KafkaServer { ... };`` and ``<listener>.KafkaServer { ... };``. On a client,
``username`` and ``password`` are the credentials.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

_TOKEN = re.compile(r'\s*(?:"((?:[^"\\]|\\.)*)"|([^\s=;"{}]+)|(=)|(;)|(\{)|(\}))', re.S)


class JaasError(ValueError):
    """JAAS text that does not parse."""


@dataclass(frozen=True, slots=True)
class LoginModule:
    name: str
    flag: str
    options: dict[str, str]


def _tokens(text: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    pos = 0
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None:
            raise JaasError(f"cannot parse JAAS configuration near {text[pos:pos + 20]!r}")
        quoted, word, eq, semi, lbrace, rbrace = m.groups()
        if quoted is not None:
            out.append(("str", re.sub(r"\\(.)", r"\1", quoted)))
        elif word is not None:
            out.append(("word", word))
        else:
            out.append(("sym", eq or semi or lbrace or rbrace or ""))
        pos = m.end()
    return out


def _modules(tokens: list[tuple[str, str]], i: int, end: str | None) -> tuple[list[LoginModule],
                                                                              int]:
    modules: list[LoginModule] = []
    while i < len(tokens) and tokens[i] != ("sym", end or ""):
        if i + 1 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1][0] != "word":
            raise JaasError("expected '<LoginModule class> <flag> key=value ...;'")
        name, flag = tokens[i][1], tokens[i + 1][1]
        i += 2
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i] != ("sym", ";"):
            if (i + 2 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1] != ("sym", "=")
                    or tokens[i + 2][0] not in ("word", "str")):
                raise JaasError(f"expected key=value in the options of {name}")
            options[tokens[i][1]] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise JaasError(f"missing ';' after the options of {name}")
        modules.append(LoginModule(name, flag, options))
        i += 1
    return modules, i


def parse_config(text: str) -> list[LoginModule]:
    """A ``sasl.jaas.config`` value: login modules, each ending with ``;``."""
    return _modules(_tokens(text), 0, None)[0]


def parse_file(text: str) -> dict[str, list[LoginModule]]:
    """A JAAS file: section name -> its login modules."""
    tokens = _tokens(text)
    sections: dict[str, list[LoginModule]] = {}
    i = 0
    while i < len(tokens):
        if tokens[i][0] != "word" or i + 1 >= len(tokens) or tokens[i + 1] != ("sym", "{"):
            raise JaasError("expected 'Section { ... };'")
        name = tokens[i][1]
        modules, i = _modules(tokens, i + 2, "}")
        if i >= len(tokens):
            raise JaasError(f"section {name} is not closed with '}}'")
        i += 1
        if i < len(tokens) and tokens[i] == ("sym", ";"):
            i += 1
        sections[name] = modules
    return sections


def read_file(path: str) -> dict[str, list[LoginModule]]:
    try:
        return parse_file(Path(path).read_text())
    except OSError as exc:
        raise JaasError(f"java.security.auth.login.config: cannot read {path}: "
                        f"{exc.strerror}") from None


def plain_users(modules: list[LoginModule]) -> dict[str, str]:
    """``user_<name>`` options of PlainLoginModules: name -> password."""
    out: dict[str, str] = {}
    for m in modules:
        if m.name.endswith("PlainLoginModule"):
            out.update({k[5:]: v for k, v in m.options.items() if k.startswith("user_")})
    return out


def credentials(text: str) -> tuple[str, str] | None:
    """(username, password) of a client's ``sasl.jaas.config``, if it names both."""
    for m in parse_config(text):
        if "username" in m.options and "password" in m.options:
            return m.options["username"], m.options["password"]
    return None

"""Every version of the config, ApiVersions, consumer-protocol, ListOffsets and Metadata
APIs, over TCP with raw requests.

The handlers build their answers typed, as the newest version they serve; the broker
converts them to the version asked. Each version must decode and carry the same facts.
"""

from __future__ import annotations

from typing import Any

import pytest
from kio.schema.errors import ErrorCode

from samsa.broker.handlers import MODULES, alter_configs, api_versions, incremental_alter_configs
from samsa.protocol.api_keys import ApiKey
from tests.broker.test_admin_api_versions import create
from tests.broker.test_group_api_versions import call, unique, versions
from tests.brokerproc import BrokerProcess
from tests.wire import WireClient

NONE = ErrorCode.none
TOPIC, BROKER = 2, 4


@pytest.fixture(scope="module")
def client(broker: BrokerProcess) -> Any:
    c = WireClient(broker.bootstrap)
    yield c
    c.close()


def topic(c: WireClient) -> str:
    name = unique("cfg")
    assert create(c, 7, {"name": name}).topics[0].error_code == NONE
    return name


def retention(c: WireClient, name: str) -> str | None:
    resp = call(c, ApiKey.DESCRIBE_CONFIGS, 4, include_synonyms=False,
                include_documentation=False, resources=[
                    {"resource_type": TOPIC, "resource_name": name,
                     "configuration_keys": ["retention.ms"]}])
    value: str | None = resp.results[0].configs[0].value
    return value


@pytest.mark.parametrize("version", versions(alter_configs))
def test_alter_configs(client: WireClient, version: int) -> None:
    name = topic(client)
    good = {"resource_type": TOPIC, "resource_name": name,
            "configs": [{"name": "retention.ms", "value": "60000"}]}
    resp = call(client, ApiKey.ALTER_CONFIGS, version, validate_only=False, resources=[
        good, {"resource_type": TOPIC, "resource_name": unique("cfg-missing"), "configs": []},
        {"resource_type": BROKER, "resource_name": "99", "configs": []}])
    assert [(r.resource_type, r.error_code) for r in resp.responses] == [
        (TOPIC, NONE), (TOPIC, ErrorCode.unknown_topic_or_partition),
        (BROKER, ErrorCode.invalid_request)]
    assert resp.responses[0].resource_name == name and resp.responses[0].error_message is None
    assert resp.responses[1].error_message and resp.responses[2].error_message
    assert retention(client, name) == "60000"
    bad = {**good, "configs": [{"name": "retention.ms", "value": "soon"}]}
    (r,) = call(client, ApiKey.ALTER_CONFIGS, version, validate_only=True,
                resources=[bad]).responses
    assert r.error_code == ErrorCode.invalid_config and r.error_message
    (r,) = call(client, ApiKey.ALTER_CONFIGS, version, validate_only=False,
                resources=[{**good, "configs": []}]).responses
    assert r.error_code == NONE and retention(client, name) != "60000"


@pytest.mark.parametrize("version", versions(incremental_alter_configs))
def test_incremental_alter_configs(client: WireClient, version: int) -> None:
    name = topic(client)

    def alter(op: int, value: str | None, validate_only: bool = False) -> Any:
        return call(client, ApiKey.INCREMENTAL_ALTER_CONFIGS, version,
                    validate_only=validate_only, resources=[
                        {"resource_type": TOPIC, "resource_name": name, "configs": [
                            {"name": "retention.ms", "config_operation": op,
                             "value": value}]}]).responses

    (r,) = alter(0, "60000", validate_only=True)
    assert (r.resource_type, r.resource_name, r.error_code) == (TOPIC, name, NONE)
    assert retention(client, name) != "60000"
    (r,) = alter(0, "60000")
    assert r.error_code == NONE and r.error_message is None
    assert retention(client, name) == "60000"
    (r,) = alter(2, "1")  # APPEND to a number
    assert r.error_code == ErrorCode.invalid_config and r.error_message
    (r,) = alter(1, None)
    assert r.error_code == NONE and retention(client, name) != "60000"


@pytest.mark.parametrize("version", versions(api_versions))
def test_api_versions(client: WireClient, version: int) -> None:
    fields = dict(client_software_name="samsa-test", client_software_version="1.0")
    resp = call(client, ApiKey.API_VERSIONS, version, **fields)
    assert resp.error_code == NONE
    served = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
    assert served == {int(m.API_KEY): m.VERSIONS for m in MODULES}
    assert [k.api_key for k in resp.api_keys] == sorted(served)
    if version >= 1:
        assert resp.throttle_time.total_seconds() == 0
    if version >= 3:
        refused = call(client, ApiKey.API_VERSIONS, version,
                       **{**fields, "client_software_name": "bad name"})
        assert refused.error_code == ErrorCode.invalid_request
        assert refused.api_keys == resp.api_keys

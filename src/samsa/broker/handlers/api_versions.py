"""ApiVersions (key 18): advertise exactly the APIs and versions this broker serves, and
its cluster features (KIP-584, table in :mod:`samsa.broker.features`).

Versions: v1 throttle_time; v3 flexible, client_software_name/version (KIP-511: a name or
version that is not alphanumerics, '.' and '-' gets INVALID_REQUEST), and the tagged
SupportedFeatures, FinalizedFeaturesEpoch and FinalizedFeatures; v4 the same layout, but
supported features whose minimum level is 0 are listed too (v3 leaves them out,
KAFKA-17011). Error answers carry no features. A version this broker does not serve is
answered UNSUPPORTED_VERSION in a v0 body, as Kafka does. The answer is built as v4, typed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kio.schema.api_versions.v0.response import ApiVersionsResponse as ApiVersionsResponseV0
from kio.schema.api_versions.v4.response import (
    ApiVersion,
    ApiVersionsResponse,
    FinalizedFeatureKey,
    SupportedFeatureKey,
)
from kio.schema.errors import ErrorCode
from kio.static.primitive import i16, i64

from samsa.broker import features
from samsa.broker.context import RequestContext
from samsa.broker.handlers.consumer_group_heartbeat import (
    CONSUMER_PROTOCOL_APIS,
    consumer_protocol_enabled,
)
from samsa.protocol.api_keys import ApiKey
from samsa.protocol.build import NO_THROTTLE, convert

if TYPE_CHECKING:
    from samsa.broker.context import Services

API_KEY = ApiKey.API_VERSIONS
VERSIONS = (0, 4)


def _answer(broker: Services, code: ErrorCode, version: int = 0) -> ApiVersionsResponse:
    hidden = () if consumer_protocol_enabled(broker.config) else CONSUMER_PROTOCOL_APIS
    keys = tuple(ApiVersion(api_key=i16(key), min_version=i16(lo), max_version=i16(hi))
                 for key, (lo, hi) in sorted(broker.supported.items()) if key not in hidden)
    if code != ErrorCode.none:
        return ApiVersionsResponse(error_code=code, throttle_time=NO_THROTTLE, api_keys=keys)
    return ApiVersionsResponse(
        error_code=code, throttle_time=NO_THROTTLE, api_keys=keys,
        supported_features=tuple(
            SupportedFeatureKey(name=name, min_version=i16(lo), max_version=i16(hi))
            for name, lo, hi in features.supported(version)),
        finalized_features_epoch=i64(broker.features_epoch),
        finalized_features=tuple(
            FinalizedFeatureKey(name=name, min_version_level=i16(level),
                                max_version_level=i16(level))
            for name, level in features.finalized(
                broker.config, clustered=broker.leadership.leases).items()))


def unsupported_version_response(broker: Services) -> ApiVersionsResponseV0:
    """Kafka's answer to an ApiVersions version it does not know: a v0 body."""
    return convert(_answer(broker, ErrorCode.unsupported_version), ApiVersionsResponseV0)


async def handle(ctx: RequestContext) -> ApiVersionsResponse:
    body = ctx.body
    if ctx.version >= 3:
        name = body.client_software_name
        ver = body.client_software_version
        if not _valid_software(name) or not _valid_software(ver):
            return _answer(ctx.broker, ErrorCode.invalid_request)
    return _answer(ctx.broker, ErrorCode.none, ctx.version)


def _valid_software(value: str) -> bool:
    """KIP-511: alphanumerics, '.', '-', starting and ending with an alphanumeric."""
    if not value:
        return False
    ok = all(c.isascii() and (c.isalnum() or c in ".-") for c in value)
    return ok and value[0].isalnum() and value[-1].isalnum()

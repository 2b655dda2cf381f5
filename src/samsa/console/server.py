"""The HTTP side: Prometheus metrics, the console's page and its JSON API v1, on aiohttp.

One :class:`HttpServer` per process, on the event loop it is started from (the broker's, in
``samsa serve --metrics-port``), so reads of broker state never race the loop's changes.

=========================================  =============================================
``GET /metrics``                           Prometheus text (when a registry is given)
``GET /console/``                          the console (static files, no build step)
``GET /api/v1``                            version, source kind, features
``GET /api/v1/groups``                     every group
``GET /api/v1/groups/{group}``             one group: members, epochs, assignments
``GET /api/v1/groups/{group}/history``     its rebalance history (samsa brokers)
``GET /api/v1/groups/{group}/lag``         lag per partition, series, verdicts
``GET /api/v1/groups/{group}/share-partitions``  a share group's share partitions: start
                                           offset, lag, in-flight records by state
``POST /api/v1/groups/{group}/offsets/preview``  an offset reset's plan (dry run)
``POST /api/v1/groups/{group}/offsets/reset``    execute it (when actions are on)
``GET /api/v1/audit``                      the audit log (``?group=`` filters)
``GET /api/v1/health``                     coordinator shards, leases (samsa brokers)
``GET /api/v1/stream``                     server-sent events: ``groups`` every interval,
                                           ``group`` too with ``?group=``; ``failure``
                                           when the data could not be read
=========================================  =============================================

A group the console's principal may not DESCRIBE answers 403 (see
:mod:`samsa.console.source` for what the console acts as).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from samsa.broker.parking import wait_event
from samsa.console.source import ActionError, Source, now_ms
from samsa.console.views import API_VERSION

log = logging.getLogger("samsa.console")

STATIC = Path(__file__).parent / "static"
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _json(data: Any, status: int = 200) -> web.Response:
    return web.json_response(data, status=status, dumps=lambda d: json.dumps(d, default=str))


def _error(status: int, message: str) -> web.Response:
    return _json({"error": message}, status)


@web.middleware
async def _refusals(request: web.Request, handler: Handler) -> web.StreamResponse:
    """An :class:`ActionError` of any handler (a refused action, a group the console's
    principal may not see) answers its status with ``{"error": ...}``."""
    try:
        return await handler(request)
    except ActionError as exc:
        return _error(exc.status, str(exc))


class HttpServer:
    """Serves metrics (optional), the console and its API until stopped."""

    def __init__(self, host: str, port: int, source: Source, registry: Any = None) -> None:
        self.host = host
        self.requested_port = port
        self.source = source
        self.registry = registry
        self.interval = max(source.options.sample_interval_ms, 100) / 1000
        self._runner: web.AppRunner | None = None
        self._site: web.TCPSite | None = None
        self._closing = asyncio.Event()
        self._sampler: asyncio.Task[None] | None = None

    @property
    def port(self) -> int:
        assert self._runner is not None
        for address in self._runner.addresses:
            return int(address[1])
        raise RuntimeError("the console server is not listening")

    def app(self) -> web.Application:
        app = web.Application(middlewares=[_refusals])
        r = app.router
        if self.registry is not None:
            r.add_get("/metrics", self.metrics)
        r.add_get("/", self.root)
        r.add_get("/console", self.root)
        r.add_get("/console/", self.index)
        r.add_static("/console/static/", STATIC, append_version=False)
        r.add_get("/api/v1", self.info)
        r.add_get("/api/v1/groups", self.groups)
        r.add_get("/api/v1/groups/{group:.+}/history", self.history)
        r.add_get("/api/v1/groups/{group:.+}/lag", self.lag)
        r.add_get("/api/v1/groups/{group:.+}/share-partitions", self.share_partitions)
        r.add_post("/api/v1/groups/{group:.+}/offsets/preview", self.preview)
        r.add_post("/api/v1/groups/{group:.+}/offsets/reset", self.reset)
        r.add_get("/api/v1/groups/{group:.+}", self.group)
        r.add_get("/api/v1/audit", self.audit)
        r.add_get("/api/v1/health", self.health)
        r.add_get("/api/v1/stream", self.stream)
        return app

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await self._runner.setup()
        self._site = web.TCPSite(self._runner, self.host, self.requested_port)
        try:
            await self._site.start()
        except OSError:
            await self._runner.cleanup()
            raise
        if self.registry is not None:
            log.info("samsa metrics on http://%s:%d/metrics", self.host, self.port)
        log.info("samsa console on http://%s:%d/console/", self.host, self.port)
        self._sampler = asyncio.create_task(self._sample_forever())

    async def stop(self) -> None:
        self._closing.set()
        if self._sampler is not None:
            self._sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sampler
        if self._runner is not None:
            await self._runner.cleanup()
        self.source.close()

    async def run(self, stop: asyncio.Event, ready: asyncio.Event | None = None) -> None:
        """Start once ``ready`` is set, serve until ``stop`` is set."""
        if ready is not None:
            await ready.wait()
        try:
            await self.start()
        except OSError:
            stop.set()  # the operator asked for this port: do not run without it
            raise
        try:
            await stop.wait()
        finally:
            await self.stop()

    async def _sample_forever(self) -> None:
        while not self._closing.is_set():
            try:
                await self.source.sample()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("sampling lag failed")
            await self._pause(self.interval)

    async def _pause(self, seconds: float) -> None:
        await wait_event(self._closing, seconds)

    # ------------------------------------------------------------------ pages

    async def metrics(self, request: web.Request) -> web.Response:
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        body = generate_latest(self.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def root(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("/console/")

    async def index(self, request: web.Request) -> web.StreamResponse:
        return web.FileResponse(STATIC / "index.html")

    # ------------------------------------------------------------------ API

    async def info(self, request: web.Request) -> web.Response:
        return _json({"version": API_VERSION, "source": self.source.kind,
                      "features": self.source.features, "principal":
                      self.source.options.principal, "interval_ms": int(self.interval * 1000)})

    async def groups(self, request: web.Request) -> web.Response:
        return _json({"at_ms": now_ms(), "groups": await self.source.groups()})

    async def group(self, request: web.Request) -> web.Response:
        gid = request.match_info["group"]
        found = await self.source.group(gid)
        if found is None:
            return _error(404, f"group {gid} not found")
        return _json({"at_ms": now_ms(), "group": found})

    async def history(self, request: web.Request) -> web.Response:
        gid = request.match_info["group"]
        events = await self.source.history(gid)
        if events is None:
            return _error(404, "this console's source keeps no rebalance history "
                               "(a samsa broker does)")
        return _json({"group_id": gid, "events": events})

    async def lag(self, request: web.Request) -> web.Response:
        return _json(self.source.lag(request.match_info["group"]))

    async def share_partitions(self, request: web.Request) -> web.Response:
        gid = request.match_info["group"]
        found = await self.source.share_partitions(gid)
        if found is None:
            return _error(404, f"{gid} is not a share group (or has no share partitions "
                               "this console can see)")
        return _json({"at_ms": now_ms(), "group_id": gid, "partitions": found})

    async def preview(self, request: web.Request) -> web.Response:
        return await self._reset(request, execute=False)

    async def reset(self, request: web.Request) -> web.Response:
        return await self._reset(request, execute=True)

    async def _reset(self, request: web.Request, execute: bool) -> web.Response:
        try:
            body = await request.json()
        except ValueError:
            return _error(400, "expected a JSON body")
        if not isinstance(body, dict):
            return _error(400, "expected a JSON object")
        return _json(await self.source.reset_offsets(request.match_info["group"], body, execute))

    async def audit(self, request: web.Request) -> web.Response:
        return _json({"entries": self.source.audit_entries(request.query.get("group"))})

    async def health(self, request: web.Request) -> web.Response:
        found = await self.source.health()
        if found is None:
            return _error(404, "coordinator health is known to samsa brokers only")
        return _json(found)

    async def stream(self, request: web.Request) -> web.StreamResponse:
        """Server-sent events: the groups every interval; with ``?group=``, the group too
        (detail, lag and history)."""
        gid = request.query.get("group") or None
        if gid is not None:
            self.source.check_visible(gid)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
        await resp.prepare(request)
        try:
            while not self._closing.is_set():
                try:
                    groups = await self.source.groups()
                    group = None if gid is None else {
                        "at_ms": now_ms(), "group_id": gid,
                        "group": await self.source.group(gid), "lag": self.source.lag(gid),
                        "history": await self.source.history(gid)}
                except ActionError as exc:  # a group the principal may not see
                    await self._send(resp, "failure", {"at_ms": now_ms(), "error": str(exc)})
                except Exception as exc:  # the cluster is unreachable: say so, keep trying
                    log.warning("console stream: %s", exc)
                    await self._send(resp, "failure", {"at_ms": now_ms(), "error": str(exc)})
                else:
                    await self._send(resp, "groups", {"at_ms": now_ms(), "groups": groups})
                    if group is not None:
                        await self._send(resp, "group", group)
                await self._pause(self.interval)
        except (ConnectionResetError, asyncio.CancelledError):
            pass
        return resp

    @staticmethod
    async def _send(resp: web.StreamResponse, event: str, data: Any) -> None:
        await resp.write(f"event: {event}\ndata: {json.dumps(data, default=str)}\n\n".encode())

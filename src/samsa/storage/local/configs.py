"""The dynamic configs of a single node: ``dynamic-configs.json`` in its data directory,
replaced atomically (and fsynced) on every change."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from samsa.broker.storage import StoredConfigs


class LocalConfigStore:
    """A :class:`~samsa.broker.storage.ConfigStore` in ``data_dir``."""

    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / "dynamic-configs.json"
        self._brokers: dict[str, dict[str, str]] = {}
        self._groups: dict[str, dict[str, str]] = {}
        self._read = False

    def snapshot(self) -> StoredConfigs | None:
        """The file's configs the first time (only this node writes it), then None."""
        if self._read:
            return None
        self._read = True
        if self.path.exists():
            data = json.loads(self.path.read_text())
            self._brokers = _layers(data.get("brokers", {}))
            self._groups = _layers(data.get("groups", {}))
        return self._stored()

    async def save_broker(self, name: str, props: Mapping[str, str]) -> StoredConfigs:
        _put(self._brokers, name, props)
        return self._save()

    async def save_group(self, group_id: str, props: Mapping[str, str]) -> StoredConfigs:
        _put(self._groups, group_id, props)
        return self._save()

    def _stored(self) -> StoredConfigs:
        return StoredConfigs(_layers(self._brokers), _layers(self._groups))

    def _save(self) -> StoredConfigs:
        self._read = True
        data = {"brokers": self._brokers, "groups": self._groups}
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
        return self._stored()


def _layers(data: Mapping[str, Mapping[str, object]]) -> dict[str, dict[str, str]]:
    return {str(name): {str(k): str(v) for k, v in props.items()}
            for name, props in data.items()}


def _put(layers: dict[str, dict[str, str]], name: str, props: Mapping[str, str]) -> None:
    if props:
        layers[name] = dict(props)
    else:
        layers.pop(name, None)

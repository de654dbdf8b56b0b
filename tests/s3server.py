"""A real S3-protocol server on loopback for the shared-cache tests: moto's standalone
``moto_server`` in a process of its own (as s3fs's own suite runs it), so a test can
stop it. IAM is enforced: a bucket ``team-cache`` that user ``ci`` may read and write
and user ``dev`` may only read (a bucket many can read but few can write)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

BUCKET = "team-cache"
# Requests moto answers before it enforces IAM: the setup below (a bucket, two users,
# their policies and keys).
_SETUP_REQUESTS = 7


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@dataclass
class S3Server:
    url: str  # the endpoint, http://127.0.0.1:PORT
    process: subprocess.Popen[bytes]
    keys: dict[str, tuple[str, str]] = field(default_factory=dict)  # user -> (key id, secret)

    def env(self, user: str) -> dict[str, str]:
        """The environment of a process that reaches the store as ``user``. A lookup
        may wait up to 60 s for this store (``$EXPORTLENS_STORE_LOOKUP_S``): moto, a
        Python server beside the suite's exports on a loaded 2-core machine, can take
        longer than the default 2 s to answer, and a lookup past its bound is a miss.
        The tests of the bound itself reach stores that never answer, without it."""
        key, secret = self.keys[user]
        return {
            "AWS_ENDPOINT_URL": self.url,
            "AWS_ACCESS_KEY_ID": key,
            "AWS_SECRET_ACCESS_KEY": secret,
            "AWS_DEFAULT_REGION": "us-east-1",
            "AWS_REGION": "us-east-1",
            "EXPORTLENS_STORE_LOOKUP_S": "60",
        }

    def client(self, user: str = "ci"):  # type: ignore[no-untyped-def]
        import boto3

        key, secret = self.keys[user]
        return boto3.client("s3", endpoint_url=self.url, region_name="us-east-1", aws_access_key_id=key, aws_secret_access_key=secret)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start(log: Path) -> S3Server:
    """A fresh server with the bucket and the two users."""
    moto = Path(sys.executable).with_name("moto_server")
    env = dict(os.environ, INITIAL_NO_AUTH_ACTION_COUNT=str(_SETUP_REQUESTS))
    deadline = time.monotonic() + 120
    server = None
    while server is None:
        # moto takes a port number, not a socket: another process may bind the free
        # number first (a server of another test), and then moto exits at once; a
        # new number is the way round that, never a second try at the same one.
        port = free_port()
        with open(log, "ab") as out:
            process = subprocess.Popen([str(moto), "-H", "127.0.0.1", "-p", str(port)], env=env, stdout=out, stderr=subprocess.STDOUT)
        candidate = S3Server(f"http://127.0.0.1:{port}", process)
        while True:
            try:
                with urllib.request.urlopen(candidate.url + "/moto-api/", timeout=5) as answer:  # not counted as an S3 request
                    answer.read()
                server = candidate
                break
            except OSError:
                if time.monotonic() > deadline:
                    candidate.stop()
                    raise RuntimeError(f"moto_server did not start; see {log}") from None
                if process.poll() is not None:
                    break  # it could not bind the number: take another
                time.sleep(0.2)
    import boto3

    admin = {"endpoint_url": server.url, "region_name": "us-east-1", "aws_access_key_id": "admin", "aws_secret_access_key": "admin"}
    boto3.client("s3", **admin).create_bucket(Bucket=BUCKET)
    iam = boto3.client("iam", **admin)
    for user, actions in (("ci", ["s3:GetObject", "s3:PutObject", "s3:ListBucket"]), ("dev", ["s3:GetObject", "s3:ListBucket"])):
        iam.create_user(UserName=user)
        policy = {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": actions, "Resource": [f"arn:aws:s3:::{BUCKET}", f"arn:aws:s3:::{BUCKET}/*"]}]}
        iam.put_user_policy(UserName=user, PolicyName="cache", PolicyDocument=json.dumps(policy))
        key = iam.create_access_key(UserName=user)["AccessKey"]
        server.keys[user] = (key["AccessKeyId"], key["SecretAccessKey"])
    return server


def refused_port() -> tuple[socket.socket, str]:
    """A port held by a socket that does not listen, and its URL: a connection is
    refused, as by a store that stopped, and no other process can take the number
    while the socket is open (a number freed and remembered could be)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return s, f"http://127.0.0.1:{s.getsockname()[1]}"


def silent_port() -> tuple[socket.socket, str]:
    """A listening socket that accepts and never answers (a store that hangs), and its URL."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(64)
    return s, f"http://127.0.0.1:{s.getsockname()[1]}"


def paced_server(body: bytes, pause_s: float, chunks: int, stop_after: int | None = None) -> tuple[object, str]:
    """An HTTP server that answers every GET at once with ``body``'s length, then sends
    it in ``chunks`` pieces ``pause_s`` apart -- or, with ``stop_after``, sends that
    many pieces and then nothing more (a store that stalls). Its ``shutdown()``
    stops it; the URL is its endpoint."""
    import email.utils
    import http.server
    import threading

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("ETag", '"paced"')
            self.send_header("Last-Modified", email.utils.formatdate(usegmt=True))
            self.end_headers()
            size = -(-len(body) // chunks)
            for i in range(chunks):
                if stop_after is not None and i >= stop_after:
                    time.sleep(60)  # answered, then silent
                    return
                self.wfile.write(body[i * size : (i + 1) * size])
                self.wfile.flush()
                time.sleep(pause_s)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"

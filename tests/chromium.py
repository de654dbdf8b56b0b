"""Debian's chromium, headless, driven over the DevTools protocol (no driver library).

For the tests of the graph page (Model Explorer's web app draws with WebGL in a web
worker, so the test waits in real time, polling the page, never sleeping a fixed
time). ``install()`` puts chromium in place the way the editor tests do
(``apt-get install chromium`` when it is missing); :class:`Browser` starts it with a
throw-away profile and records every request the page makes, so a test can say that
none left the machine.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Callable
from typing import Any

from websockets.sync.client import ClientConnection, connect

CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")


def install() -> str:
    """The chromium binary, installed from Debian when missing (as
    ``editors/vscode/scripts/setup-code-server.sh`` does)."""
    if os.access(CHROMIUM, os.X_OK):
        return CHROMIUM
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run([*sudo, "apt-get", "update", "-q"], check=True, capture_output=True, env=env, timeout=900)
    subprocess.run([*sudo, "apt-get", "install", "-y", "-q", "--no-install-recommends", "chromium"], check=True, capture_output=True, env=env, timeout=1800)
    assert os.access(CHROMIUM, os.X_OK), f"no chromium at {CHROMIUM} after apt-get install"
    return CHROMIUM


class Browser:
    """One headless chromium with one page; ``requests`` lists every URL it asked for."""

    def __init__(self, width: int = 1280, height: int = 800) -> None:
        self.profile = tempfile.mkdtemp(prefix="exportlens-chromium-")
        self.proc = subprocess.Popen(
            [
                install(),
                "--headless=new",
                "--no-sandbox",
                "--disable-gpu-sandbox",
                "--use-angle=swiftshader",
                "--enable-unsafe-swiftshader",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--metrics-recording-only",
                # Frames of other origins in the page's own process: their DOM is then
                # reachable from the page's target (Page.getFrameTree, isolated worlds).
                "--disable-site-isolation-trials",
                "--disable-features=IsolateOrigins,site-per-process",
                f"--window-size={width},{height}",
                f"--user-data-dir={self.profile}",
                "--remote-debugging-port=0",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        port_file = os.path.join(self.profile, "DevToolsActivePort")
        deadline = time.monotonic() + 60
        while not os.path.exists(port_file) or not open(port_file).read().strip():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"chromium did not start (exit {self.proc.poll()})")
            time.sleep(0.1)
        port = int(open(port_file).read().split()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as r:
            pages = [t for t in json.loads(r.read()) if t["type"] == "page"]
        self.ws: ClientConnection = connect(pages[0]["webSocketDebuggerUrl"], max_size=None, open_timeout=30)
        self._ids = itertools.count(1)
        self.requests: list[str] = []
        self.console: list[str] = []
        self.call("Network.enable")
        self.call("Page.enable")
        self.call("Runtime.enable")

    def _event(self, msg: dict[str, Any]) -> None:
        method = msg.get("method")
        if method == "Network.requestWillBeSent":
            self.requests.append(msg["params"]["request"]["url"])
        elif method == "Runtime.consoleAPICalled":
            self.console.append(" ".join(str(a.get("value", a.get("description", ""))) for a in msg["params"]["args"]))

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        mid = next(self._ids)
        self.ws.send(json.dumps({"id": mid, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv(timeout=120))
            if msg.get("id") == mid:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            self._event(msg)

    def pump(self) -> None:
        """Read the events that arrived (requests, console) without waiting."""
        while True:
            try:
                msg = json.loads(self.ws.recv(timeout=0.01))
            except TimeoutError:
                return
            self._event(msg)

    def go(self, url: str) -> None:
        self.call("Page.navigate", url=url)

    def js(self, expression: str, context: int | None = None) -> Any:
        """``expression``'s value in the page (or in the execution ``context``, as
        :meth:`frame_context` gives: a frame's DOM, not its script's globals)."""
        extra = {"contextId": context} if context is not None else {}
        found = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True, **extra)
        if "exceptionDetails" in found:
            raise RuntimeError(f"{expression[:80]}: {found['exceptionDetails']}")
        return found["result"].get("value")

    def text(self, context: int | None = None) -> str:
        """The page's visible text ("" before it has a body)."""
        return str(self.js("(document.body && document.body.innerText) || ''", context))

    def frame_context(self) -> int | None:
        """An execution context in the page's first frame (an ``<iframe>``), once it has one."""
        children = self.call("Page.getFrameTree")["frameTree"].get("childFrames") or []
        if not children:
            return None
        world = self.call("Page.createIsolatedWorld", frameId=children[0]["frame"]["id"], worldName="exportlens-test")
        return int(world["executionContextId"])

    def wait(self, what: str, check: Callable[[], Any], timeout: float = 90) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}; console: {self.console[-10:]}")
            self.pump()
            time.sleep(0.2)

    def screenshot(self, path: str) -> bytes:
        data = base64.b64decode(self.call("Page.captureScreenshot", format="png")["data"])
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
        return data

    def search_result(self, label: str) -> str:
        """Type ``label`` into Model Explorer's search and wait for its result: the
        JavaScript expression of the result's element. ``window.__exportlensSelected``
        is cleared, so the next selection is the one a click on it makes (Alt+click:
        Model Explorer selects the node and expands the layers that hold it)."""
        self.js(
            "(() => { const i = document.querySelector('input[placeholder*=\"Search\"]'); i.focus();"
            f" i.value = {label!r}; i.dispatchEvent(new Event('input', {{bubbles: true}})); }})()"
        )
        found = f"Array.from(document.querySelectorAll('div.label > span.node-label')).find(e => e.textContent.trim() === {label!r})"
        self.wait("search results", lambda: self.js(f"!!{found}"), timeout=120)
        self.js("window.__exportlensSelected = null")
        return found

    def alt_click(self, element: str) -> None:
        """Alt+click the element the JavaScript expression ``element`` names."""
        self.js(f"{element}.dispatchEvent(new MouseEvent('click', {{bubbles: true, altKey: true}}))")

    def close(self) -> None:
        try:
            self.ws.close()
        finally:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

"""A real berth daemon serving its dashboard (``--http 127.0.0.1:0``) over fake GPUs.

``web`` (fixture) -> :class:`WebRig`: the daemon rig of tests/daemon/conftest.py (``.daemon``:
submit, call, workload...) plus ``.url``, ``.token`` (root's, from the ``web_token`` request),
``.get(path, token=...)`` / ``.post(path, token=..., headers=...)`` -> (status, headers, body),
``.json(path)``, ``.raw(bytes)`` (what the server answers to bytes sent as they are) and
``.token_for(uid)`` (a token the daemon would make for another uid, from its secret).
"""

from __future__ import annotations

import http.client
import importlib.util
import json
import os
import socket
from collections.abc import Iterator
from typing import Any

import pytest

TESTS = os.path.dirname(os.path.dirname(__file__))


def _daemon_rig() -> Any:
    path = os.path.join(TESTS, "daemon", "conftest.py")
    spec = importlib.util.spec_from_file_location("berth_tests_daemon_rig_web", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.DaemonRig


class WebRig:
    def __init__(self, daemon: Any) -> None:
        self.daemon = daemon
        self.url = ""
        self.token = ""
        self.host = "127.0.0.1"
        self.port = 0

    def start(self, *flags: str, gpus: int = 4, memory: str = "80G") -> WebRig:
        self.daemon.fake.setup(n=gpus, memory=memory)
        self.daemon.start("--http", "127.0.0.1:0", "--poll-interval", "0.2", *flags)
        reply = self.daemon.call("web_token")
        self.url, self.token = reply["url"], reply["token"]
        assert self.url.startswith("http://127.0.0.1:"), self.url
        self.port = int(self.url.rstrip("/").rsplit(":", 1)[1])
        return self

    def token_for(self, uid: int) -> str:
        from berth.web.auth import load_secret, make_token

        return make_token(load_secret(self.daemon.state_dir), uid)

    def request(
        self,
        method: str,
        path: str,
        token: str | None = None,
        headers: dict[str, str] | None = None,
        body: bytes | None = None,
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
        try:
            h = dict(headers or {})
            if token:
                h["Authorization"] = f"Bearer {token}"
            if method == "POST" and body is None:
                body = b""
            conn.request(method, path, body=body, headers=h)
            r = conn.getresponse()
            return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        finally:
            conn.close()

    def get(self, path: str, **kw: Any) -> tuple[int, dict[str, str], bytes]:
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> tuple[int, dict[str, str], bytes]:
        return self.request("POST", path, **kw)

    def json(self, path: str, token: str | None = None) -> Any:
        status, _, body = self.get(path, token=token)
        assert status == 200, (status, body)
        return json.loads(body)

    def raw(self, data: bytes, timeout: float = 10) -> bytes:
        """Send bytes as they are; what comes back until the server closes."""
        with socket.create_connection((self.host, self.port), timeout=timeout) as s:
            s.sendall(data)
            out = b""
            while chunk := s.recv(65536):
                out += chunk
            return out


@pytest.fixture
def web(fake_gpus: Any) -> Iterator[WebRig]:
    rig = _daemon_rig()(fake_gpus)
    try:
        yield WebRig(rig)
    finally:
        rig.cleanup()


CHROMIUM = ("/usr/bin/chromium", "/usr/bin/chromedriver")


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Chromium (Debian's chromium + chromium-driver) driven through selenium; one
    for the session. Missing, the browser tests are skipped, except in CI (.ci/run installs
    them, so their absence there is a broken machine)."""
    missing = [p for p in CHROMIUM if not os.path.exists(p)]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("selenium (pip install -e '.[test]')")
    if missing:
        why = f"no headless browser: missing {', '.join(missing)}; apt-get install chromium chromium-driver"
        if os.environ.get("CI") == "true":
            pytest.fail(f"{why}; .ci/run should have installed it")
        pytest.skip(why)
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM[0]
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--window-size=1400,1000", "--disable-extensions", "--no-first-run"):  # fmt: skip
        opts.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMIUM[1]), options=opts)
    try:
        yield driver
    finally:
        driver.quit()

"""The dashboard in a real browser, for browser tests: the API served over HTTP on a loopback port with real
`fire-rules worker` processes and an API key (:class:`Served`), Debian's headless chromium through Playwright
(:func:`launch_chromium`, never a browser download), signing in, and full-page screenshots at two widths
(:func:`shoot`) that also check the page neither scrolls sideways nor shows an object where it means its content."""

import shutil
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
import uvicorn
from redis import Redis

from app.main import create_app
from tests.support.data import REPO_ROOT
from tests.support.service import WorkerProcess, make_settings, remove_session_keys

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
API_KEY = "dashboard-test-key"
SIZES = {"1280": {"width": 1280, "height": 800}, "400": {"width": 400, "height": 800}}
ARTIFACTS = REPO_ROOT / "test-artifacts"


class Served:
    """The API on a loopback port (uvicorn in a thread) and ``n_workers`` `fire-rules worker` processes; ``api`` an
    HTTP client with the key. ``settings`` override the session's (another ``queue_name`` on the same ``key_prefix``:
    the same data, jobs that no worker of the first takes); ``clean_keys=False`` leaves the keys to another."""

    def __init__(self, n_workers: int = 2, clean_keys: bool = True, **settings):
        self.settings = make_settings(api_keys=[API_KEY], **settings)
        self.clean_keys = clean_keys
        self.redis = Redis.from_url(self.settings.redis_url)
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.base_url = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(create_app(self.settings), log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.socket]}, daemon=True)
        self.workers = [WorkerProcess(self.settings) for _ in range(n_workers)]
        self.api = httpx.Client(base_url=self.base_url, headers={"X-API-Key": API_KEY}, timeout=30)

    def __enter__(self) -> "Served":
        self.thread.start()
        try:
            deadline = time.monotonic() + 30
            while not self.server.started:
                assert time.monotonic() < deadline, "uvicorn did not start"
                time.sleep(0.05)
            for worker in self.workers:
                worker.wait_registered(self.redis)
        except BaseException:
            self.__exit__(None, None, None)  # no worker is left behind
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.api.close()
        self.server.should_exit = True
        self.thread.join(timeout=10)
        for worker in self.workers:
            worker.process.terminate()  # all at once: each then waits for its own warm shutdown
        for worker in self.workers:
            worker.stop()
        if self.clean_keys:
            remove_session_keys(self.redis, self.settings)

    def wait_for_job(self, job_id: str, timeout: float = 180.0) -> dict:
        """The job once it has ended (any terminal status)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.api.get(f"/v1/jobs/{job_id}").json()
            if job["status"] in ("succeeded", "failed", "canceled"):
                return job
            time.sleep(0.2)
        raise TimeoutError(job_id)


@contextmanager
def launch_chromium() -> Iterator:
    """Debian's chromium through Playwright (skips where either is missing)."""
    sync_api = pytest.importorskip("playwright.sync_api")
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (apt-get install chromium)")
    with sync_api.sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            yield chromium
        finally:
            chromium.close()


def new_page(browser, errors: list[str]):
    """A page at 1280x800 whose script errors are appended to ``errors``."""
    page = browser.new_page(viewport=SIZES["1280"])
    page.on("pageerror", lambda error: errors.append(str(error)))
    return page


def sign_in(page, base_url: str, path: str) -> None:
    """Open ``path`` and enter the API key for the tab."""
    page.goto(f"{base_url}{path}")
    page.get_by_label("API key").fill(API_KEY)
    page.get_by_role("button", name="Use", exact=True).click()


def shoot(page, folder: str, name: str, element: str | None = None) -> Path:
    """Full-page screenshots (of the ``element`` a selector names, where given) at 1280x800 and 400 px wide under
    test-artifacts/{folder}/, the page without a horizontal scroll bar and what is shot without "[object ...]"; the
    path of the wide one."""
    shown = page.locator(element or "body")
    assert "[object " not in shown.inner_text(), f"{name} shows an object where it means its content"
    directory = ARTIFACTS / folder
    directory.mkdir(parents=True, exist_ok=True)
    for label, size in SIZES.items():
        page.set_viewport_size(size)
        page.wait_for_timeout(400)  # charts and trees are drawn again at the new width
        scroll_width = page.evaluate("document.documentElement.scrollWidth")
        assert scroll_width <= size["width"], f"{name} scrolls sideways at {label} px: {scroll_width}"
        if element is None:
            page.screenshot(path=directory / f"{name}-{label}.png", full_page=True)
        else:
            shown.screenshot(path=directory / f"{name}-{label}.png")
    page.set_viewport_size(SIZES["1280"])
    return directory / f"{name}-1280.png"

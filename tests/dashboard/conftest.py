"""Fixtures of the dashboard's tests: a database with traffic (SQLite file or PostgreSQL), a real
dashboard serving it, and a real headless Chromium driven by Selenium.

The browser is the distribution's (``scripts/install-system-deps`` installs ``chromium`` and
``chromium-driver``); nothing is downloaded.  Without it the browser tests fail, loudly."""

from __future__ import annotations

import http.client
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from urllib.parse import urlsplit

import pytest

import durableq
from durableq import dashboard


@dataclass
class Served:
    """A running dashboard over ``location``: ``url`` carries the token, ``base`` does not."""

    location: str
    url: str
    token: str

    @property
    def base(self) -> str:
        return self.url.split("?", 1)[0]

    def request(
        self, method: str, path: str, *, body: str | None = None, headers: dict[str, str] | None = None
    ) -> Answer:
        """One request over a new connection (no cookie jar: the test says what it sends)."""
        parts = urlsplit(self.base)
        conn = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=30)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            response = conn.getresponse()
            return Answer(response.status, response.headers, response.read().decode())
        finally:
            conn.close()


@dataclass
class Answer:
    status: int
    headers: Message
    body: str


@pytest.fixture
def traffic(target: str, db_path: Path) -> str:
    """A database with a job queue (history on) holding 7 messages, its dead-letter queue holding 3
    poison messages, and a FIFO queue; returns where it is."""
    from tests.conftest import payload_dir

    with durableq.open(target, durability="normal", payload_dir=payload_dir(target, db_path)) as broker:
        dlq = broker.create_queue("jobs-dlq")
        jobs = broker.create_queue(
            "jobs", history=True, redrive_policy=durableq.RedrivePolicy("jobs-dlq", 1), visibility_timeout=0
        )
        broker.create_queue("orders.fifo", fifo=True)
        for i in range(3):
            jobs.send(f"poison {i}")
        for message in jobs.receive(max_messages=10):  # receive count 1: the next receive moves them
            assert message.receive_count == 1
        assert jobs.receive(max_messages=10) == []
        assert dlq.stats().approximate_number_of_messages == 3
        for i in range(7):
            jobs.send(f"job {i}", attributes={"kind": "resize"})
    return target


@pytest.fixture
def served(traffic: str, db_path: Path) -> Iterator[Served]:
    from tests.conftest import payload_dir

    with dashboard.start(traffic, port=0, payload_dir=payload_dir(traffic, db_path)) as running:
        yield Served(traffic, running.url, running.token)


@pytest.fixture(scope="session")
def chromium() -> Iterator[object]:
    """A headless Chromium (the system's), driven by Selenium through the system's chromedriver."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if browser is None or driver is None:
        pytest.fail(
            "the dashboard's browser tests need chromium and chromedriver: run scripts/install-system-deps"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000"):
        options.add_argument(argument)
    chrome = webdriver.Chrome(options=options, service=Service(executable_path=driver))
    try:
        yield chrome
    finally:
        chrome.quit()

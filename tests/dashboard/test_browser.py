"""The dashboard in a real browser (headless Chromium): live depths, charts that render, a redrive
that moves the messages, and the refusals a browser meets."""

from __future__ import annotations

from typing import Any

import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

import durableq
from tests.conftest import until

from .conftest import Served

pytestmark = pytest.mark.sqlite_only(
    "the browser sees the same pages on either engine: test_access runs both"
)

WAIT = 30


def _cell(chrome: Any, queue: str, state: str) -> int:
    return int(
        chrome.find_element(By.CSS_SELECTOR, f'tr[data-queue="{queue}"] td[data-state="{state}"]').text
    )


def test_the_overview_follows_the_queues_without_a_reload(chromium: Any, served: Served) -> None:
    chromium.get(served.url)
    assert chromium.current_url == served.base  # the token left the address bar
    assert _cell(chromium, "jobs", "visible") == 7
    assert _cell(chromium, "jobs-dlq", "visible") == 3
    marker = chromium.execute_script("window.__same_page = 1; return window.__same_page")
    with durableq.open(served.location, create=False) as broker:
        for i in range(5):
            broker.get_queue("jobs").send(f"more {i}")
    WebDriverWait(chromium, WAIT).until(lambda c: _cell(c, "jobs", "visible") == 12)
    assert chromium.execute_script("return window.__same_page") == marker  # updated in place


def test_a_queues_charts_render(chromium: Any, served: Served) -> None:
    chromium.get(served.url)
    chromium.find_element(By.LINK_TEXT, "jobs").click()
    charts = chromium.find_elements(By.CSS_SELECTOR, "svg.chart")
    assert len(charts) == 2
    sent = chromium.find_element(By.CSS_SELECTOR, 'polyline[data-series="sent"]')
    box = chromium.execute_script("const b = arguments[0].getBBox(); return [b.width, b.height]", sent)
    assert box[0] > 100 and box[1] > 0  # drawn across the chart, and the 10 sends of the minute lift it
    # History is on for jobs: a waiting message links to its events.
    chromium.find_element(By.CSS_SELECTOR, "table.messages a").click()
    events = [
        e.get_attribute("data-event") for e in chromium.find_elements(By.CSS_SELECTOR, "tr[data-event]")
    ]
    assert events == ["sent"]


def test_redrive_from_the_dead_letter_queue_moves_the_messages(chromium: Any, served: Served) -> None:
    chromium.get(served.url)
    chromium.find_element(By.LINK_TEXT, "jobs-dlq").click()
    chromium.find_element(By.LINK_TEXT, "Redrive dead letters…").click()
    chromium.find_element(By.ID, "confirm").click()
    WebDriverWait(chromium, WAIT).until(lambda c: c.current_url.endswith("/queues/jobs-dlq"))
    with durableq.open(served.location, create=False) as broker:
        until(lambda: broker.get_queue("jobs-dlq").stats().approximate_number_of_messages == 0, "the move")
        assert broker.get_queue("jobs").stats().approximate_number_of_messages == 10
        [task] = broker.list_message_moves("jobs-dlq")
    WebDriverWait(chromium, WAIT).until(
        lambda c: (
            c.find_element(By.CSS_SELECTOR, f'tr[data-task="{task.task_handle}"]').get_attribute(
                "data-status"
            )
            == "COMPLETED"
        )
    )


def test_without_the_token_the_browser_gets_401(chromium: Any, served: Served) -> None:
    chromium.delete_all_cookies()
    chromium.get(served.base)
    assert "401 Unauthorized" in chromium.find_element(By.TAG_NAME, "body").text


def test_a_form_on_another_origin_cannot_purge(chromium: Any, served: Served, tmp_path: Any) -> None:
    """A page on another port of the same host (same site: the cookie goes along) posts the purge
    form, even with the right CSRF value: its Origin is refused."""
    import http.server
    import threading

    chromium.get(served.url)  # the browser holds the dashboard's cookie
    csrf = _csrf_of(chromium, served)
    (tmp_path / "index.html").write_text(
        f'<form id="f" method="post" action="{served.base}queues/jobs/purge">'
        f'<input name="csrf" value="{csrf}"></form><script>document.getElementById("f").submit()</script>'
    )
    handler = lambda *a: http.server.SimpleHTTPRequestHandler(*a, directory=str(tmp_path))  # noqa: E731
    evil = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    try:
        chromium.get(f"http://127.0.0.1:{evil.server_address[1]}/index.html")
        WebDriverWait(chromium, WAIT).until(
            lambda c: "403 Forbidden" in c.find_element(By.TAG_NAME, "body").text
        )
    finally:
        evil.shutdown()
    with durableq.open(served.location, create=False) as broker:
        assert broker.get_queue("jobs").stats().approximate_number_of_messages == 7


def _csrf_of(chromium: Any, served: Served) -> str:
    chromium.get(served.base + "queues/jobs/purge")
    value = chromium.find_element(By.NAME, "csrf").get_attribute("value")
    assert value
    return str(value)

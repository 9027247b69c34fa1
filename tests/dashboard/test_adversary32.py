"""Adversary 32: what breaks the dashboard's access rules, its errors and where it meets the other
features.  Each test states what the dashboard should do and fails on the current code (xfail strict:
a fix turns it into an XPASS that asks for the mark to go)."""

from __future__ import annotations

import http.cookiejar
import http.server
import re
import socket
import threading
import urllib.error
import urllib.request
from typing import ClassVar

import pytest

import durableq
from durableq import dashboard
from tests.conftest import raw_connection, until

from .conftest import Served


def _browser() -> urllib.request.OpenerDirector:
    """A client with a cookie jar that follows redirects, as a browser does (one jar per browser)."""
    return urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))


def _status(browser: urllib.request.OpenerDirector, url: str) -> int:
    try:
        with browser.open(url, timeout=30) as answer:
            status: int = answer.status
            return status
    except urllib.error.HTTPError as refused:
        return refused.code


@pytest.mark.sqlite_only("the token check, before any database read")
@pytest.mark.parametrize(
    "how",
    [
        {"path": "/?token=%C3%A9"},
        {"path": "/", "headers": {"Authorization": "Bearer \xe9"}},
        {"path": "/", "headers": {"Cookie": "durableq_dashboard=\xe9"}},
    ],
    ids=["query", "bearer", "cookie"],
)
def test_a_non_ascii_credential_is_a_401_not_a_500(served: Served, how: dict[str, object]) -> None:
    """``hmac.compare_digest`` raises TypeError on a non-ASCII str: anyone, without the token, gets
    the server's 500 (a traceback in its log, and an answer without the security headers)."""
    headers = how.get("headers", {})
    assert isinstance(headers, dict)
    answer = served.request("GET", str(how["path"]), headers=headers)
    assert answer.status == 401, (answer.status, answer.body)


@pytest.mark.sqlite_only("the printed address, before any database read")
def test_the_printed_address_opens_with_a_token_holding_url_characters(traffic: str) -> None:
    """``--token "$(openssl rand -base64 24)"`` (or $DURABLEQ_DASHBOARD_TOKEN) holds ``+``, ``/``, ``=``:
    the address is printed with the token unquoted, so ``+`` arrives as a space (and ``&``/``#``
    cut it short) and the printed address answers 401."""
    with dashboard.start(traffic, port=0, token="k3J+9xQ/abcd+efgh=") as running:
        assert _status(_browser(), running.url) == 200


@pytest.mark.sqlite_only("the cookie, before any database read")
def test_two_dashboards_on_one_host_keep_their_own_sessions(traffic: str) -> None:
    """Cookies are not kept apart by port: the second dashboard's cookie (same name, host and path)
    replaces the first's in the browser, and the first one's tab gets 401 at its next refresh."""
    with dashboard.start(traffic, port=0) as first, dashboard.start(traffic, port=0) as second:
        browser = _browser()
        assert _status(browser, first.url) == 200
        assert _status(browser, second.url) == 200
        assert _status(browser, first.url.split("?", 1)[0]) == 200


def _bearer(running: dashboard.Dashboard) -> dict[str, str]:
    return {"Authorization": f"Bearer {running.token}"}


@pytest.mark.sqlite_only("SQLite's write lock, that a reader in WAL mode never waits for")
def test_a_long_writer_elsewhere_neither_blocks_the_overview_nor_makes_it_a_client_error(
    served: Served,
) -> None:
    """The overview only reads, yet each queue's ``stats()`` is a write transaction (its expiry
    sweep): while another connection holds the write lock (a long purge, a migration, an application
    transaction) every refresh of every tab waits the whole busy timeout, then answers 400 Bad
    Request, a client's fault, for the server's ``DatabaseLocked``.  A reader should be served (WAL
    readers never wait for the writer), or at worst be told to retry (503)."""
    cookie = {"Authorization": f"Bearer {served.token}"}
    assert served.request("GET", "/", headers=cookie).status == 200
    with raw_connection(served.location) as writer:
        writer.execute("BEGIN EXCLUSIVE")
        try:
            answer = served.request("GET", "/", headers=cookie)
        finally:
            writer.execute("ROLLBACK")
    assert answer.status in (200, 503), (answer.status, answer.body[-400:])


def _csrf(served: Served, headers: dict[str, str]) -> str:
    page = served.request("GET", "/queues/jobs/purge", headers=headers)
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page.body)
    assert found is not None, page.body
    return found.group(1)


@pytest.mark.sqlite_only("the dashboard's answer to a redrive, the same on both engines")
def test_a_redrive_of_a_queue_that_is_no_dead_letter_queue_is_not_reported_done(served: Served) -> None:
    """``jobs`` is no queue's dead-letter queue (its page offers no redrive), but its redrive URL
    works: the POST answers 303 to the queue's page as a success, the task fails at once ("a message
    has no source queue to go back to") and that page never shows it (it lists move tasks of
    dead-letter queues only).  The user is told nothing; it should be refused, or its failure
    shown."""
    headers = {"Authorization": f"Bearer {served.token}"}
    form = {**headers, "Content-Type": "application/x-www-form-urlencoded"}
    answer = served.request(
        "POST", "/queues/jobs/redrive", body=f"csrf={_csrf(served, headers)}", headers=form
    )
    if answer.status != 303:
        assert answer.status in (400, 404, 409), answer.status  # refused: the user is told
        return
    with durableq.open(served.location, create=False) as broker:
        [task] = broker.list_message_moves("jobs")
        until(lambda: broker.list_message_moves("jobs")[0].status != "RUNNING", "the task ends")
        failure = broker.list_message_moves("jobs")[0]
    page = served.request("GET", answer.headers["location"], headers=headers)
    assert failure.status == "COMPLETED" or "FAILED" in page.body, (task, failure)


class _Recorder(http.server.BaseHTTPRequestHandler):
    """Another web server on the same host (a dev server, a notebook...): notes the cookies it is sent."""

    cookies: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        self.cookies.append(self.headers.get("Cookie", ""))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.sqlite_only("the cookie, before any database read")
@pytest.mark.xfail(
    strict=True,
    reason="adversary 32, not fixed: browsers scope cookies by host, not port (RFC 6265 section 8.5), "
    "and plain HTTP allows no __Host- cookie; documented in docs/guides/dashboard.md",
)
def test_the_session_cookie_is_no_credential_for_another_server_on_the_host(served: Served) -> None:
    """Cookies are scoped to a host, not a port: after the dashboard is opened, the browser sends its
    cookie to any other server the user visits on 127.0.0.1 (SameSite does not help: the user goes
    there).  That cookie never expires and is all the dashboard asks for: replayed, it reads every
    page, takes the CSRF value from one and purges a queue."""
    _Recorder.cookies.clear()
    other = http.server.HTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        browser = _browser()
        assert _status(browser, served.url) == 200
        assert _status(browser, f"http://127.0.0.1:{other.server_address[1]}/") == 200
    finally:
        other.shutdown()
        other.server_close()
    [sent] = _Recorder.cookies
    replayed = {"Cookie": sent} if sent else {}
    page = served.request("GET", "/queues/jobs/purge", headers=replayed)
    if page.status == 200:  # show what it gives: the queue's contents gone
        form = {**replayed, "Content-Type": "application/x-www-form-urlencoded"}
        served.request("POST", "/queues/jobs/purge", body=f"csrf={_csrf(served, replayed)}", headers=form)
    with durableq.open(served.location, create=False) as broker:
        assert broker.get_queue("jobs").stats().approximate_number_of_messages == 7
    assert page.status == 401


@pytest.mark.sqlite_only("the token rule, before any database read")
@pytest.mark.parametrize(
    "token", ["a", "x" * 15, "\xe9" * 24], ids=["one-character", "15-characters", "non-ascii"]
)
def test_start_refuses_a_token_the_command_line_refuses(traffic: str, token: str) -> None:
    """``durableq dashboard --token`` refuses a token under 16 characters; ``dashboard.start``, the
    library's door, serves behind a one-character token (guessed at the first try).  A non-ASCII
    token starts too, then every request made with it is a 500 (``hmac.compare_digest``)."""
    with pytest.raises(durableq.InvalidParameterValue):
        dashboard.start(traffic, port=0, token=token).stop()


@pytest.mark.sqlite_only("the audit page's reading, the same on both engines")
def test_the_audit_page_shows_the_newest_calls_of_a_long_trail(served: Served) -> None:
    """The page asks ``broker.audit(limit=100_000)``, which returns the *oldest* events first, and
    shows the last 500 of those: once the trail is longer, a purge made now never appears (nor
    any later call), however the page is filtered."""
    with raw_connection(served.location) as conn:
        conn.execute(
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 100000) "
            'INSERT INTO durableq_audit_events (at, pid, "user", action, queue, outcome, detail) '
            "SELECT 0, 1, 'ops', 'SetQueueAttributes', 'jobs', 'OK', '{}' FROM n"
        )
    headers = {"Authorization": f"Bearer {served.token}"}
    form = {**headers, "Content-Type": "application/x-www-form-urlencoded"}
    done = served.request("POST", "/queues/jobs/purge", body=f"csrf={_csrf(served, headers)}", headers=form)
    assert done.status == 303
    page = served.request("GET", "/audit?action=PurgeQueue", headers=headers)
    assert page.status == 200 and 'data-action="PurgeQueue"' in page.body


@pytest.mark.sqlite_only("where it listens, before any database read")
def test_an_empty_host_is_refused_not_every_interface(traffic: str) -> None:
    """``--host "$DASHBOARD_HOST"`` with the variable unset: ``""`` is the wildcard address to the
    socket layer, so the dashboard listens on every interface of the machine (the network, not
    this machine only, as the default promises) and prints the address ``http://:PORT/?token=...``,
    which opens nothing."""
    try:
        running = dashboard.start(traffic, host="", port=0)
    except durableq.InvalidParameterValue:
        return
    with running:
        assert "http://:" not in running.url
        port = int(running.url.split(":")[2].split("/")[0])
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            # Another address of this machine than the loopback one: 127.0.0.2 is loopback too, but
            # not the address the default listens on.
            reached = probe.connect_ex(("127.0.0.2", port)) == 0
        assert not reached, "listening on every interface"


@pytest.mark.sqlite_only("the token's redirect, before any database read")
def test_the_token_redirect_never_leaves_the_dashboard(served: Served) -> None:
    """``//evil.example/?token=...`` (a path of two slashes): the redirect that drops the token goes
    to a path of the dashboard, never to the protocol-relative ``//evil.example/``."""
    answer = served.request("GET", f"//evil.example/?token={served.token}")
    assert answer.status == 303 and answer.headers["location"].startswith("/")
    assert not answer.headers["location"].startswith("//")

"""Who gets in: the token (query, cookie, bearer), never without it; a POST only from the
dashboard's own page (its CSRF value and, from a browser, its own Origin). Over real HTTP."""

from __future__ import annotations

import re
from urllib.parse import urlencode

import pytest

import durableq

from .conftest import Served


def _cookie(served: Served) -> dict[str, str]:
    """Open the printed address as a browser would: the answer sets the cookie and drops the token."""
    answer = served.request("GET", "/?" + urlencode({"token": served.token}))
    assert answer.status == 303 and answer.headers["location"] == "/"
    set_cookie = answer.headers["set-cookie"]
    assert "httponly" in set_cookie.lower() and "samesite=strict" in set_cookie.lower()
    assert served.token not in set_cookie  # the cookie is derived from the token, not the token itself
    return {"Cookie": set_cookie.split(";", 1)[0]}


def _csrf(served: Served, cookie: dict[str, str], path: str) -> str:
    page = served.request("GET", path, headers=cookie)
    assert page.status == 200, page.body
    found = re.search(r'name="csrf" value="([0-9a-f]+)"', page.body)
    assert found is not None, page.body
    return found.group(1)


@pytest.mark.parametrize("path", ["/", "/fragments/queues", "/audit", "/queues/jobs", "/queues/jobs/purge"])
def test_without_the_token_every_page_is_401(served: Served, path: str) -> None:
    answer = served.request("GET", path)
    assert answer.status == 401 and "?token=" in answer.body
    wrong = served.request("GET", path + "?token=not-the-token")
    assert wrong.status == 401
    assert served.request("GET", path, headers={"Authorization": "Bearer not-the-token"}).status == 401
    assert served.request("GET", path, headers={"Cookie": "durableq_dashboard=forged"}).status == 401


def test_the_token_opens_it_by_query_cookie_or_bearer(served: Served) -> None:
    cookie = _cookie(served)
    overview = served.request("GET", "/", headers=cookie)
    assert overview.status == 200 and 'data-queue="jobs"' in overview.body
    bearer = served.request("GET", "/queues/jobs", headers={"Authorization": f"Bearer {served.token}"})
    assert bearer.status == 200 and "<svg" in bearer.body
    # The package's own static files need no token (they hold nothing of the database's).
    assert served.request("GET", "/static/dashboard.js").status == 200


def test_overview_shows_the_real_depths(served: Served, traffic: str) -> None:
    with durableq.open(traffic, create=False) as broker:
        # A temporary queue lives while its broker does: this one's, open during the request.
        temporary = broker.temporary_queue("reply-", idle_timeout=600)
        page = served.request("GET", "/fragments/queues", headers=_cookie(served)).body
        row = re.search(rf'<tr data-queue="{re.escape(temporary.name)}">(.*?)</tr>', page, re.S)
        assert row is not None and "temporary" in row.group(1)
        for name in broker.list_queues():
            stats = broker.get_queue(name).stats()
            row = re.search(rf'<tr data-queue="{re.escape(name)}">(.*?)</tr>', page, re.S)
            assert row is not None, name
            visible = re.search(r'data-state="visible">(\d+)<', row.group(1))
            assert visible is not None and int(visible.group(1)) == stats.approximate_number_of_messages
    assert "dead-letter queue" in page and "FIFO" in page


def test_a_post_needs_the_pages_csrf_value(served: Served) -> None:
    cookie = _cookie(served)
    form = {"Content-Type": "application/x-www-form-urlencoded", **cookie}
    answer = served.request("POST", "/queues/jobs/purge", body="csrf=0000", headers=form)
    assert answer.status == 403
    answer = served.request("POST", "/queues/jobs/purge", body="", headers=form)
    assert answer.status == 403
    with durableq.open(served.location, create=False) as broker:
        assert broker.get_queue("jobs").stats().approximate_number_of_messages == 7  # nothing purged


def test_a_post_from_a_foreign_origin_is_refused_even_with_the_csrf_value(served: Served) -> None:
    cookie = _cookie(served)
    csrf = _csrf(served, cookie, "/queues/jobs/purge")
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Origin": "http://evil.example", **cookie}
    answer = served.request("POST", "/queues/jobs/purge", body=f"csrf={csrf}", headers=headers)
    assert answer.status == 403
    with durableq.open(served.location, create=False) as broker:
        assert broker.get_queue("jobs").stats().approximate_number_of_messages == 7
    # From its own page (same Origin), the purge is done.
    own = {**headers, "Origin": served.base.rstrip("/")}
    answer = served.request("POST", "/queues/jobs/purge", body=f"csrf={csrf}", headers=own)
    assert answer.status == 303 and answer.headers["location"] == "/queues/jobs"
    with durableq.open(served.location, create=False) as broker:
        assert broker.get_queue("jobs").stats().approximate_number_of_messages == 0
        [call] = [e for e in broker.audit(queue="jobs") if e.action == "PurgeQueue"]
        assert call.outcome == "OK"


def test_a_queue_that_does_not_exist_is_404_with_its_error(served: Served) -> None:
    answer = served.request("GET", "/queues/nope", headers=_cookie(served))
    assert answer.status == 404 and "QueueDoesNotExist" in answer.body


def test_bodies_are_shown_only_when_asked(served: Served, traffic: str) -> None:
    page = served.request("GET", "/queues/jobs", headers=_cookie(served)).body
    assert "job 0" not in page and "poison" not in page
    from durableq import dashboard

    with dashboard.start(traffic, port=0, show_bodies=True) as shown:
        answer = Served(traffic, shown.url, shown.token).request(
            "GET", "/queues/jobs", headers={"Authorization": f"Bearer {shown.token}"}
        )
        assert "job 0" in answer.body


def test_a_standard_queues_group_ids_are_shown(served: Served) -> None:
    """A fair queue's tenants (group ids on a standard queue) show as FIFO groups do."""
    with durableq.open(served.location, create=False) as broker:
        broker.create_queue("tenants").send("for tenant a", group_id="tenant-a")
    page = served.request("GET", "/queues/tenants", headers=_cookie(served)).body
    assert "<th>group</th>" in page and "<td>tenant-a</td>" in page
    plain = served.request("GET", "/queues/jobs", headers=_cookie(served)).body
    assert "<th>group</th>" not in plain  # a queue without group ids shows no empty column


def test_a_missing_database_is_not_created(tmp_path: object) -> None:
    from pathlib import Path

    from durableq import dashboard

    missing = Path(str(tmp_path)) / "none.db"
    with pytest.raises(durableq.DurableQError):
        dashboard.start(missing, port=0)
    assert not missing.exists()


def test_what_the_database_holds_is_shown_as_text_never_run(served: Served, traffic: str) -> None:
    """Bodies (and names, settings...) are data: a body holding markup is escaped, and the answer
    forbids framing (clickjacking a confirmation page) and any script but the package's own."""
    from durableq import dashboard

    with durableq.open(traffic, create=False) as broker:
        broker.create_queue("markup").send("<script>alert(1)</script>")
    with dashboard.start(traffic, port=0, show_bodies=True) as shown:
        bearer = {"Authorization": f"Bearer {shown.token}"}
        page = Served(traffic, shown.url, shown.token).request("GET", "/queues/markup", headers=bearer)
    assert "<script>alert(1)" not in page.body and "&lt;script&gt;alert(1)" in page.body
    answer = served.request("GET", "/queues/jobs", headers=_cookie(served))
    assert answer.headers["x-frame-options"] == "DENY"
    policy = answer.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in policy and "script-src 'self'" in policy
    assert served.request("GET", "/").headers["x-frame-options"] == "DENY"  # the 401 too


def test_the_overview_lists_the_schedules(served: Served, traffic: str) -> None:
    with durableq.open(traffic, create=False) as broker:
        broker.create_schedule("nightly", "jobs", "cron(0 3 * * ? *)", "clean up", timezone="Europe/Paris")
        broker.create_schedule("paused", "jobs", "rate(5 minutes)", "x", enabled=False)
        nightly = broker.get_schedule("nightly")
    page = served.request("GET", "/", headers=_cookie(served)).body
    row = re.search(r'<tr data-schedule="nightly">(.*?)</tr>', page, re.S)
    assert row is not None and "cron(0 3 * * ? *)" in row.group(1) and "Europe/Paris" in row.group(1)
    assert nightly.next_fire is not None
    assert nightly.next_fire.strftime("%Y-%m-%d %H:%M:%S UTC") in row.group(1)
    paused = re.search(r'<tr data-schedule="paused">(.*?)</tr>', page, re.S)
    assert paused is not None and "paused" in paused.group(1)

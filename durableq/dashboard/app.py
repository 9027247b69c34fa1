"""The dashboard's pages: a Starlette app over one broker, rendered with Jinja2 on the server.

Every page is plain HTML (the charts are SVG drawn in ``charts.py``); one small script of the
package's own (``static/dashboard.js``) refreshes the parts marked live.  Handlers are plain
functions, which Starlette runs in its thread pool: the library's calls block, and each thread
keeps its own connection.
"""

from __future__ import annotations

import hmac
from datetime import UTC, datetime
from importlib.resources import files
from typing import Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

import durableq
from durableq import limits

from . import data
from .auth import TokenGate, csrf_value, same_origin

_HERE = files("durableq.dashboard")
#: What a confirmation page can do: purge a queue, start a dead-letter redrive, cancel a move task.
ACTIONS = ("purge", "redrive", "cancel")
#: A posted form is a CSRF value, a queue name and a task handle: a few hundred bytes at most.
MAX_FORM_BYTES = 4_096
#: Status of the error page for each kind of refusal (everything else a client does wrong is 400).
_STATUS = {"QueueDoesNotExist": 404, "ResourceNotFoundException": 404}


class Pages:
    """The handlers, bound to a broker and the dashboard's settings."""

    def __init__(self, broker: durableq.Broker, token: str, *, show_bodies: bool) -> None:
        self.broker = broker
        self.show_bodies = show_bodies
        self.csrf = csrf_value(token)
        self.templates = Jinja2Templates(directory=str(_HERE / "templates"))  # autoescapes .html
        self.templates.env.filters["age"] = _age
        self.templates.env.filters["when"] = _when

    def render(self, request: Request, name: str, status: int = 200, **context: Any) -> Response:
        context.update(csrf=self.csrf, show_bodies=self.show_bodies)
        return self.templates.TemplateResponse(request, name, context, status_code=status)

    def overview(self, request: Request) -> Response:
        return self.render(
            request, "overview.html", queues=data.overview(self.broker), schedules=data.schedules(self.broker)
        )

    def queues_fragment(self, request: Request) -> Response:
        return self.render(request, "queues_table.html", queues=data.overview(self.broker))

    def queue(self, request: Request) -> Response:
        hours = _int(request, "hours", limits.DASHBOARD_CHART_HOURS, 1, limits.DASHBOARD_MAX_CHART_HOURS)
        page = data.queue_page(
            self.broker,
            request.path_params["name"],
            hours=hours,
            limit=limits.DASHBOARD_MESSAGES,
            now=datetime.now(UTC),
        )
        return self.render(request, "queue.html", page=page, hours=hours)

    def queue_fragment(self, request: Request) -> Response:
        page = data.queue_page(
            self.broker,
            request.path_params["name"],
            hours=1,
            limit=limits.DASHBOARD_MESSAGES,
            now=datetime.now(UTC),
        )
        part = "queue_messages.html" if request.query_params.get("part") == "messages" else "queue_live.html"
        return self.render(request, part, page=page)

    def message(self, request: Request) -> Response:
        name, message_id = request.path_params["name"], request.path_params["message_id"]
        events = data.message_history(self.broker, name, message_id, limits.DASHBOARD_HISTORY_SCAN)
        return self.render(request, "message.html", queue=name, message_id=message_id, events=events)

    def audit(self, request: Request) -> Response:
        query = request.query_params
        events = data.audit(
            self.broker,
            queue=query.get("queue"),
            action=query.get("action"),
            outcome=query.get("outcome"),
            limit=limits.DASHBOARD_AUDIT_ROWS,
        )
        return self.render(request, "audit.html", events=events, query=query)

    def confirm(self, request: Request) -> Response:
        """The confirmation page of a purge, a redrive or a cancel: a form that posts back here."""
        if request.path_params["action"] not in ACTIONS:
            return PlainTextResponse("404 Not Found", 404)
        return self.render(
            request,
            "confirm.html",
            action=request.path_params["action"],
            queue=request.path_params["name"],
            task=request.query_params.get("task"),
            row=data.overview_row(self.broker, request.path_params["name"]),
        )

    async def act(self, request: Request) -> Response:
        form = await _form(request)
        if not hmac.compare_digest(form.get("csrf", "").encode(), self.csrf.encode()) or not same_origin(
            request.headers, request.url.scheme
        ):
            return PlainTextResponse("403 Forbidden: not posted from the dashboard's own page", 403)
        name, action = request.path_params["name"], request.path_params["action"]
        if action not in ACTIONS:
            return PlainTextResponse("404 Not Found", 404)
        destination = form.get("destination") or None
        task = form.get("task", "")
        await run_in_threadpool(self._act, name, action, destination, task)
        return RedirectResponse(f"/queues/{name}", status_code=303)

    def _act(self, name: str, action: str, destination: str | None, task: str) -> None:
        if action == "purge":
            self.broker.get_queue(name).purge()
        elif action == "redrive":
            self.broker.start_message_move(name, destination)  # (refused for no queue's dead-letter queue)
        else:  # "cancel": the route allows nothing else
            self.broker.cancel_message_move(task)


def create_app(broker: durableq.Broker, token: str, *, show_bodies: bool = False) -> TokenGate:
    """The dashboard as an ASGI app: ``token`` opens it (see ``auth.py``)."""
    pages = Pages(broker, token, show_bodies=show_bodies)
    actions = "{action:str}"
    app = Starlette(
        routes=[
            Route("/", pages.overview),
            Route("/fragments/queues", pages.queues_fragment),
            Route("/audit", pages.audit),
            Route("/queues/{name:str}", pages.queue),
            Route("/queues/{name:str}/live", pages.queue_fragment),
            Route("/queues/{name:str}/messages/{message_id:str}", pages.message),
            Route(f"/queues/{{name:str}}/{actions}", pages.confirm, methods=["GET"]),
            Route(f"/queues/{{name:str}}/{actions}", pages.act, methods=["POST"]),
            Mount("/static", StaticFiles(directory=str(_HERE / "static")), name="static"),
        ],
        exception_handlers={durableq.DurableQError: lambda r, e: _error(pages, r, e)},
    )
    return TokenGate(app, token)


def _error(pages: Pages, request: Request, exc: Exception) -> Response:
    assert isinstance(exc, durableq.DurableQError)
    if isinstance(exc, durableq.DatabaseError):  # the database's trouble (locked, full...), not the user's
        answer = pages.render(request, "error.html", status=503, error=exc)
        answer.headers["Retry-After"] = "1"
        return answer
    return pages.render(request, "error.html", status=_STATUS.get(exc.code, 400), error=exc)


async def _form(request: Request) -> dict[str, str]:
    """A posted form's fields (urlencoded, as the pages' forms send them; at most a few fields).

    Parsed here rather than with Starlette's ``request.form()``, which needs python-multipart for
    what these small forms never send."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM_BYTES:
            return {}
    return dict(parse_qsl(body.decode("utf-8", "replace"), keep_blank_values=True))


def _int(request: Request, name: str, default: int, low: int, high: int) -> int:
    try:
        value = int(request.query_params.get(name, default))
    except ValueError:
        return default
    return min(max(value, low), high)


def _age(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min"
    if seconds < 86_400:
        return f"{seconds // 3600} h {seconds % 3600 // 60} min"
    return f"{seconds // 86_400} d {seconds % 86_400 // 3600} h"


def _when(moment: datetime | None) -> str:
    return "-" if moment is None else moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")

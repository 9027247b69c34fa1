"""What keeps web pages away from the queues: the browser rule, the Host rule and the GET rule.

Without credentials the endpoint runs any request that reaches it, so a web
page open in a browser on the same machine could reach it too: a form posted
to ``http://127.0.0.1:9324/`` purges a queue, an ``<img>`` fetches a URL, and
with DNS rebinding (a name of the attacker's that resolves to 127.0.0.1) its
scripts can read the answers.  So:

- a request carrying ``Origin``, or ``Sec-Fetch-Site: cross-site``/``same-site``
  (headers browsers add and SDKs never send), is refused;
- a request whose ``Host`` is a *name* other than ``localhost``, the name the
  server was started on, or one given with ``--allow-host`` is refused (a
  rebinding page always uses a name of its own; IP addresses are accepted);
- a ``GET`` runs only actions that change nothing (links and images are GETs).
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable

from .errors import WireError
from .wire import Headers

#: Actions that change nothing: the only ones a GET may run.
READ_ONLY_ACTIONS = frozenset(
    {
        "GetQueueAttributes",
        "GetQueueUrl",
        "ListDeadLetterSourceQueues",
        "ListMessageMoveTasks",
        "ListQueueTags",
        "ListQueues",
    }
)
#: ``--allow-host '*'`` accepts every Host (behind a proxy that checks it).
ANY_HOST = "*"
_BROWSER_SITES = ("cross-site", "same-site")


class HostRule:
    """Which Host names the server answers to (IP addresses always)."""

    def __init__(self, bind_host: str, allowed: Iterable[str] = ()) -> None:
        names = {"localhost", *(_normal(name) for name in allowed)}
        if not _is_address(bind_host):
            names.add(_normal(bind_host))
        self._any = ANY_HOST in names
        self._names = frozenset(names)

    def allows(self, host: str | None) -> bool:
        if self._any or not host:  # no Host: not a browser (browsers always send one)
            return True
        name = _strip_port(host)
        return _is_address(name) or _normal(name) in self._names


def check_browser(headers: Headers, hosts: HostRule) -> None:
    """Refuse what a web page could have sent (see the module docstring)."""
    if "Origin" in headers or headers.get("Sec-Fetch-Site", "").lower() in _BROWSER_SITES:
        raise WireError(
            "AccessDenied",
            "requests from web browsers are refused (the request carries an Origin or Sec-Fetch-Site "
            "header); call the endpoint from a program",
            status=403,
        )
    host = headers.get("Host")
    if not hosts.allows(host):
        raise WireError(
            "AccessDenied",
            f"the Host {(host or '')[:100]!r} is not a name this server answers to; use its address, "
            "localhost, or start it with --allow-host NAME",
            status=403,
        )


def check_method(method: str, action: str) -> None:
    """A GET may only read: state-changing actions need a POST."""
    if method != "POST" and action not in READ_ONLY_ACTIONS:
        raise WireError(
            "MethodNotAllowed",
            f"{action[:100]} changes state and is refused from a {method}; send it as a POST",
            status=405,
        )


def _strip_port(host: str) -> str:
    if host.startswith("["):  # [::1]:9324
        return host[1:].partition("]")[0]
    name, colon, port = host.rpartition(":")
    return name if colon and port.isdigit() and ":" not in name else host


def _normal(name: str) -> str:
    return name.strip().rstrip(".").lower()


@functools.lru_cache(maxsize=256)
def _is_address(name: str) -> bool:
    # Cached: a client sends the same Host on every request, and parsing an address is a good part
    # of the loop's own time per request (the cache is bounded: any Host may be sent).
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True

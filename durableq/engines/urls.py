"""A PostgreSQL URL: telling one from a file's path, and showing it without its secrets.

Apart from :mod:`.location` (which opens the engine a location names), so that the PostgreSQL engine
can quote its own URL in errors without importing the module that imports it."""

from __future__ import annotations

from urllib.parse import unquote_plus, urlsplit, urlunsplit

#: The URL schemes of a PostgreSQL database.
POSTGRES_SCHEMES = ("postgresql://", "postgres://", "postgresql+psycopg://")
#: The parameters of a libpq URL that hold a secret (compared with the name decoded, in any case).
_SECRET_PARAMETERS = frozenset({"password", "sslpassword"})
#: What stands for a secret where a location is shown.
HIDDEN = "***"


def postgres_url(location: str) -> bool:
    """Does ``location`` name a PostgreSQL database (rather than a SQLite file)?"""
    return location.startswith(POSTGRES_SCHEMES)


def redacted(location: str) -> str:
    """``location`` as it may be shown (a repr, an error message, a log, a CLI line): a PostgreSQL
    URL with every secret libpq reads from it replaced by ``***`` (the password of ``user:password@``,
    and the ``password`` and ``sslpassword`` parameters, their names in any case or percent-encoded);
    a file's path as it is.  The one place that decides what of a location is shown."""
    if not postgres_url(location):
        return location
    parts = urlsplit(location)
    # Split by hand: urlsplit's hostname and port refuse libpq's lists of hosts ("h1:5432,h2:5433").
    userinfo, at, hosts = parts.netloc.rpartition("@")
    if ":" in userinfo:
        userinfo = f"{userinfo.partition(':')[0]}:{HIDDEN}"
    query = "&".join(_hidden_parameter(pair) for pair in parts.query.split("&")) if parts.query else ""
    return urlunsplit(parts._replace(netloc=f"{userinfo}{at}{hosts}", query=query))


def _hidden_parameter(pair: str) -> str:
    name, equals, _ = pair.partition("=")
    return f"{name}={HIDDEN}" if equals and unquote_plus(name).lower() in _SECRET_PARAMETERS else pair


def _secrets(location: str) -> list[str]:
    """The secrets written in ``location`` (as written, and decoded), longest first: what a driver's
    own message might quote and :func:`scrubbed` takes out."""
    if not postgres_url(location):
        return []
    parts = urlsplit(location)
    userinfo = parts.netloc.rpartition("@")[0]
    found = [userinfo.partition(":")[2]] if ":" in userinfo else []
    for pair in parts.query.split("&"):
        name, equals, value = pair.partition("=")
        if equals and unquote_plus(name).lower() in _SECRET_PARAMETERS:
            found.append(value)
    spellings = {spelling for secret in found if secret for spelling in (secret, unquote_plus(secret))}
    return sorted(spellings, key=len, reverse=True)


def scrubbed(text: str, location: str) -> str:
    """``text`` (a driver's message about ``location``, which may quote the URL or a piece of it:
    libpq does, for a malformed one) with every secret of ``location`` hidden."""
    text = text.replace(location, redacted(location))
    for secret in _secrets(location):
        text = text.replace(secret, HIDDEN)
    return text

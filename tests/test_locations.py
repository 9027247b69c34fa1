"""How a database is named to people: a PostgreSQL URL never shows its password, in any of libpq's
spellings (``user:password@``, ``?password=``, in any case, percent-encoded); and a URL without the
``postgres`` extra installed is a clear error, not a ``ModuleNotFoundError``."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner
from durableq.cli import main

import durableq
from durableq.engines.urls import redacted

SECRET = "s3cr%65t"  # percent-encoded: libpq reads "s3cret"; neither spelling may show


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://u:pw@h:5432/db", "postgresql://u:***@h:5432/db"),
        (
            "postgresql://u@h/db?password=pw&sslmode=require",
            "postgresql://u@h/db?password=***&sslmode=require",
        ),
        ("postgres://h/db?sslmode=require&PassWord=pw", "postgres://h/db?sslmode=require&PassWord=***"),
        ("postgresql://h/db?pass%77ord=pw", "postgresql://h/db?pass%77ord=***"),
        ("postgresql://h/db?sslpassword=pw", "postgresql://h/db?sslpassword=***"),
        ("postgresql+psycopg://u:p%40ss@[::1]:5432/db", "postgresql+psycopg://u:***@[::1]:5432/db"),
        (
            "postgresql://u:pw@h1:5432,h2:5433/db?password=x",
            "postgresql://u:***@h1:5432,h2:5433/db?password=***",
        ),
        (
            "postgresql://u@h/db?application_name=a&options=-c%20x%3Dy",
            "postgresql://u@h/db?application_name=a&options=-c%20x%3Dy",
        ),
        ("/srv/password=x/queue.db", "/srv/password=x/queue.db"),  # a file's path is shown as it is
    ],
)
def test_every_spelling_of_a_password_is_redacted(url: str, shown: str) -> None:
    assert redacted(url) == shown


def test_repr_and_errors_never_show_a_password_given_as_a_parameter(pg_url: str) -> None:
    url = f"{pg_url}?password={SECRET}"  # the test cluster trusts: the password is not checked
    with durableq.open(url) as broker:
        queue = broker.create_queue("jobs")
        assert broker.location == url  # what opens it again, whole
        for shown in (repr(broker), repr(queue)):
            assert "s3cr" not in shown and "password=***" in shown
    host, _, rest = pg_url.removeprefix("postgresql://").partition("/")
    user = host.split("@")[0]
    dead = f"postgresql://{user}@127.0.0.1:1/{rest}?password={SECRET}"
    with pytest.raises(durableq.DatabaseError, match="cannot reach the database") as raised:
        durableq.open(dead, busy_timeout=1)
    assert "s3cr" not in str(raised.value) and "password=***" in str(raised.value)
    # libpq quotes a malformed URL in its own words: the secret is taken out of those too.
    for malformed in (f"postgresql://{user}:{SECRET}%zz@127.0.0.1:1/db", f"{pg_url}?PASSWORD={SECRET}"):
        with pytest.raises(durableq.DatabaseError) as raised:
            durableq.open(malformed, busy_timeout=1)
        assert "s3cr" not in str(raised.value) and "***" in str(raised.value)


def test_a_cli_line_never_shows_the_password(pg_url: str) -> None:
    url = f"{pg_url}?password={SECRET}"
    result = CliRunner().invoke(main, ["--db", url, "init"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "password=***" in result.output and "s3cr" not in result.output


_WITHOUT_PSYCOPG = """
import sys

class NoPsycopg:
    # As if the postgres extra were not installed.
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("psycopg", "psycopg_binary", "psycopg_c"):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, NoPsycopg())
import durableq

try:
    durableq.open("postgresql://someone@127.0.0.1:1/queues?password=s3cret")
except durableq.DurableQError as exc:
    print(type(exc).__name__, exc)
with durableq.open(sys.argv[1]) as broker:  # a file still opens
    print("file", broker.list_queues())
"""


def test_a_postgresql_url_without_the_postgres_extra_says_what_to_install(tmp_path: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_WITHOUT_PSYCOPG), f"{tmp_path}/queue.db"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    error, file = done.stdout.splitlines()
    assert error.startswith("UnsupportedOperation ") and "pip install 'durableq[postgres]'" in error
    assert "s3cret" not in error and "password=***" in error
    assert file == "file []"

"""``OpenOptions`` names a database as any other repr does: never with its password."""

from __future__ import annotations

import pytest

import durableq

SECRET = "s3cr%65t"  # percent-encoded: libpq reads "s3cret"; neither spelling may show


@pytest.mark.parametrize(
    "url",
    [
        f"postgresql://app:{SECRET}@db.example:5432/queues",
        f"postgresql://app@db.example/queues?password={SECRET}",
        f"postgres://db.example/queues?sslpassword={SECRET}",
    ],
)
def test_open_options_never_show_a_password(url: str) -> None:
    options = durableq.OpenOptions(url, durability="normal")
    for shown in (repr(options), str(options), f"{options!r}"):
        assert "s3cr" not in shown and "***" in shown, shown

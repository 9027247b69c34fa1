"""The statements spell durableq's table and index names out (``FROM durableq_messages``); every name
they use is one ``schema.py`` declares (from ``fileformat.PREFIX``), and none is an unprefixed one."""

from __future__ import annotations

import re
from pathlib import Path

import durableq
from durableq.engines.fileformat import PREFIX, VERSION_TABLE
from durableq.engines.schema import metadata

ROOT = Path(durableq.__file__).parent
#: Where the statements are.
SOURCES = [*ROOT.glob("ops/*.py"), *ROOT.glob("engines/**/*.py"), *ROOT.glob("analytics/*.py")]
#: Names of the prefix that are no table or index of schema.py: PostgreSQL's catalog counter (made by
#: the migrations on PostgreSQL only), the version tables (now and before 0009), the trigger, the aliases
#: of the analytics' JDBC queries, and names of other things (a logger, a config key, a frame, a
#: savepoint).
OTHERS = {
    "durableq_catalog",
    VERSION_TABLE,
    "durableq_version",
    "durableq_messages_payload_gone",
    "durableq_events",
    "durableq_audit",
    "durableq_metrics",
    "durableq_depth",
    "durableq_unswept",
    "durableq_management_call",
    "durableq_database",
    "durableq_operation",  # the savepoint of each operation inside a joined transaction (ops/joined.py)
}
_UNPREFIXED = {table.name.removeprefix(PREFIX) for table in metadata.tables.values()}
_AFTER_KEYWORD = re.compile(r"\b(?:FROM|INTO|UPDATE|JOIN|TABLE|INDEXED BY)\s+([a-z_]+)\b")


def _declared() -> set[str]:
    names = set(metadata.tables)
    for table in metadata.tables.values():
        names |= {index.name for index in table.indexes if index.name}
        names |= {c.name for c in table.constraints if isinstance(c.name, str)}
    return names


def test_every_name_is_declared_once_with_the_prefix() -> None:
    assert all(name.startswith(PREFIX) for name in _declared() if not name.startswith("sqlite_"))


def test_every_prefixed_name_in_the_statements_is_declared() -> None:
    declared = _declared() | OTHERS
    used = {
        (path.name, name)
        for path in SOURCES
        for name in re.findall(rf"\b{PREFIX}[a-z_]+\b", path.read_text())
    }
    assert {(file, name) for file, name in used if name not in declared} == set()
    assert {name for _, name in used} >= set(metadata.tables)


def test_no_statement_names_a_table_without_the_prefix() -> None:
    unprefixed = {
        (path.name, name)
        for path in SOURCES
        for name in _AFTER_KEYWORD.findall(path.read_text())
        if name in _UNPREFIXED
    }
    assert unprefixed == set()

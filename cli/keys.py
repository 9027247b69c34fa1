"""``durableq keys ...``: create, list and rotate the master keys of the ``--keyring`` file.

These commands work on the keyring file alone: they never open a database.
"""

from __future__ import annotations

import click

import durableq

from .base import keyring_path
from .output import emit, json_option, table


def _keyring() -> durableq.Keyring:
    """The keyring file of this invocation (MissingParameter without ``--keyring``)."""
    return durableq.Keyring(keyring_path())


def _versions(first: int, last: int) -> str:
    """``version 1`` or ``versions 1 to 3``."""
    return f"version {first}" if first == last else f"versions {first} to {last}"


@click.group()
def keys() -> None:
    """Create, list and rotate the master keys of encrypted queues (in the --keyring file).

    A queue created with `queue create --kms-key ALIAS` encrypts its messages
    with data keys wrapped by that master key; sending to it and receiving from
    it need the same --keyring (or DURABLEQ_KEYRING). The file is readable by
    its owner only (mode 600); keep a copy: without it, the messages cannot be
    read.
    """


@keys.command()
@click.argument("alias")
@json_option
def create(alias: str, as_json: bool) -> None:
    """Create a master key ALIAS (NAME or alias/NAME), creating the keyring file if there is none.

    \b
      durableq --keyring keys.json keys create orders
    """
    ring = _keyring()
    info = ring.create(alias)
    text = f"created key alias/{info.alias} (version {info.current_version}) in {ring.path}"
    emit(as_json, info, text)


@keys.command("list")
@json_option
def list_keys(as_json: bool) -> None:
    """List the master keys: alias, key id, current version, number of versions, and when the
    current version was created (never the key material).

    \b
      durableq --keyring keys.json keys list
    """
    ring = _keyring()
    found = ring.list()
    emit(as_json, found, lambda: _keys_text(found) if found else f"no keys in {ring.path}")


def _keys_text(found: list[durableq.KeyInfo]) -> str:
    # The columns are the keys of --json, and the alias is spelled as there (`alias/` left out).
    headers = ("alias", "key_id", "current_version", "versions", "created_at")
    return table(headers, [(k.alias, k.key_id, k.current_version, k.versions, k.created_at) for k in found])


@keys.command()
@click.argument("alias")
@json_option
def rotate(alias: str, as_json: bool) -> None:
    """Add a new version of master key ALIAS and make it current.

    New messages use the new version; the older versions stay in the keyring,
    so messages encrypted under them still decrypt.

    \b
      durableq --keyring keys.json keys rotate orders
    """
    info = _keyring().rotate(alias)
    older = _versions(1, info.current_version - 1)
    text = (
        f"rotated key alias/{info.alias}: version {info.current_version} is current; "
        f"messages under {older} still decrypt"
    )
    emit(as_json, info, text)


COMMANDS = [keys]

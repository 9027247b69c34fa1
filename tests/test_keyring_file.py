"""The keyring file (issue 27): a path with no file behind it is an error (``KmsNotFound``), never a new
keyring made on its own (only ``Keyring.create`` makes one); a file whose contents are wrong is a clear
durableq error naming the file and what is wrong, whichever way it is read (``Keyring`` or
``durableq.open``), and never shows key material."""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import durableq
from durableq import limits

from .conftest import FakeClock, payload_dir

#: Key material the broken files hold: no error message may show it.
MATERIAL = base64.b64encode(b"k" * 32).decode()
SHORT = base64.b64encode(b"s" * 16).decode()


def _valid() -> dict[str, Any]:
    return {
        "format": "durableq-keyring",
        "version": 1,
        "keys": {
            "orders": {
                "key_id": "6d7c1a52-0000-4000-8000-000000000001",
                "current": 1,
                "versions": {"1": {"material": MATERIAL, "created_at": "2026-11-22T13:50:44+00:00"}},
            }
        },
    }


def _changed(change: Callable[[dict[str, Any]], object]) -> str:
    document = _valid()
    change(document)
    return json.dumps(document)


def _version(document: dict[str, Any]) -> dict[str, Any]:
    version: dict[str, Any] = document["keys"]["orders"]["versions"]["1"]
    return version


#: (what the file holds, what the error must say)
SHAPES: dict[str, tuple[str, str]] = {
    "empty": ("", "is not JSON"),
    "not JSON": ('{"format": "durableq-keyring", "keys": {', "is not JSON"),
    "a JSON array": ("[]", "is a JSON array, not an object"),
    "no format": (_changed(lambda d: d.pop("format")), "is not a durableq keyring"),
    "another format": (_changed(lambda d: d.update(format="aws-kms")), "is not a durableq keyring"),
    "a newer version": (_changed(lambda d: d.update(version=2)), "version 2"),
    "keys is a list": (_changed(lambda d: d.update(keys=[])), '"keys" must be an object'),
    "a bad alias": (_changed(lambda d: d["keys"].update({"bad alias!": d["keys"]["orders"]})), "bad alias!"),
    "a key is a string": (
        _changed(lambda d: d["keys"].update(orders="x")),
        "alias/orders: must be an object",
    ),
    "no key id": (_changed(lambda d: d["keys"]["orders"].pop("key_id")), 'alias/orders: "key_id" is missing'),
    "no current": (
        _changed(lambda d: d["keys"]["orders"].pop("current")),
        'alias/orders: "current" is missing',
    ),
    "current is text": (
        _changed(lambda d: d["keys"]["orders"].update(current="1")),
        'alias/orders: "current" must be a version number',
    ),
    "current is absent": (
        _changed(lambda d: d["keys"]["orders"].update(current=3)),
        "alias/orders: its current version 3 is not among its versions (1)",
    ),
    "no versions": (_changed(lambda d: d["keys"]["orders"].update(versions={})), "alias/orders: no versions"),
    "a version name": (
        _changed(lambda d: d["keys"]["orders"]["versions"].update(one=_version(d))),
        "alias/orders: version 'one' is not a number",
    ),
    "no material": (_changed(lambda d: _version(d).pop("material")), 'version 1: "material" is missing'),
    "material not base64": (
        _changed(lambda d: _version(d).update(material=MATERIAL[:-3] + "*!")),
        'version 1: "material" is not base64',
    ),
    "a short key": (
        _changed(lambda d: _version(d).update(material=SHORT)),
        'version 1: "material" must be 32 bytes (AES-256); it holds 16',
    ),
    "material a number": (_changed(lambda d: _version(d).update(material=7)), '"material" is not base64'),
    "no date": (_changed(lambda d: _version(d).pop("created_at")), 'version 1: "created_at" is missing'),
    "a bad date": (
        _changed(lambda d: _version(d).update(created_at="yesterday")),
        'version 1: "created_at" is not an ISO 8601 time',
    ),
}


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    os.chmod(path, limits.KEYRING_FILE_MODE)
    return path


def test_the_valid_document_is_valid(tmp_path: Path) -> None:
    # The control: the shapes below differ from this one by one thing each.
    ring = durableq.Keyring(_write(tmp_path / "keys.json", json.dumps(_valid())))
    assert [k.alias for k in ring.list()] == ["orders"]
    assert ring.material("orders") == (1, b"k" * 32)


@pytest.mark.parametrize("shape", SHAPES)
def test_a_malformed_keyring_is_a_clear_error(shape: str, tmp_path: Path) -> None:
    text, says = SHAPES[shape]
    path = _write(tmp_path / "keys.json", text)
    reads: list[Callable[[], object]] = [
        lambda: durableq.Keyring(path).list(),
        lambda: durableq.Keyring(path).material("orders"),
        lambda: durableq.Keyring(path).rotate("orders"),
        lambda: durableq.open(tmp_path / "q.db", keyring=path),
    ]
    for read in reads:
        with pytest.raises(durableq.KmsAccessDenied) as raised:
            read()
        message = raised.value.message
        assert message.startswith(f"the keyring {path} is not a usable durableq keyring: "), message
        assert says in message, message
        for secret in (MATERIAL, SHORT, MATERIAL[:20], SHORT[:12]):
            assert secret not in message
            assert secret not in str(raised.value.__cause__ or "")
    assert path.read_text(encoding="utf-8") == text  # left as it was
    assert not (tmp_path / "q.db").exists()  # open refused it before making anything


# -- a keyring path that does not exist ------------------------------------------------


def _open(target: str, db_path: Path, clock: FakeClock, keyring: Any) -> durableq.Broker:
    return durableq.open(
        target, clock=clock, durability="normal", keyring=keyring, payload_dir=payload_dir(target, db_path)
    )


def test_a_keyring_that_does_not_exist_is_an_error_never_created(
    target: str, db_path: Path, clock: FakeClock, tmp_path: Path
) -> None:
    ours = durableq.Keyring(tmp_path / "keys.json")
    ours.create("aws/sqs")
    with _open(target, db_path, clock, ours) as broker:
        broker.create_queue("orders", sqs_managed_sse_enabled=True)
    missing = tmp_path / "typo.json"
    for given in (missing, str(missing), durableq.Keyring(missing)):
        with pytest.raises(durableq.KmsNotFound, match=f"no keyring file at {missing}.*keys create"):
            _open(target, db_path, clock, given)
    assert not missing.exists()
    # A keyring file removed while a broker has it open is not made again by a send either.
    spare = tmp_path / "spare.json"
    durableq.Keyring(spare).create("aws/sqs")
    with _open(target, db_path, clock, spare) as broker:
        spare.unlink()
        with pytest.raises(durableq.KmsNotFound, match=f"no keyring file at {spare}"):
            broker.get_queue("orders").send("into the void")
        assert broker.get_queue("orders").stats().approximate_number_of_messages == 0
    assert not spare.exists()


def test_a_missing_keyring_file_is_not_created_by_reading_it(tmp_path: Path) -> None:
    ring = durableq.Keyring(tmp_path / "none.json")
    with pytest.raises(durableq.KmsNotFound, match="no keyring file at"):
        ring.list()
    with pytest.raises(durableq.KmsNotFound, match="no keyring file at"):
        ring.material("orders")
    with pytest.raises(durableq.KmsNotFound, match="no keyring file at"):
        ring.rotate("orders")
    assert not ring.path.exists()
    assert ring.create("orders").current_version == 1  # the explicit way to make one
    assert [k.alias for k in ring.list()] == ["orders"]

"""The keyring (`keys create|list|rotate`, --keyring, DURABLEQ_KEYRING), encrypted queues, and large
payloads (`queue create --large-payloads`, `send --payload`, `receive --save-payloads`, --payload-dir)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner
from durableq.cli import main

import durableq
from durableq.ops.payload_owner import MARKER

from ..conftest import payload_dir, sql_rows
from .conftest import Run
from .test_error_lines import ERROR_LINE

#: A 3 MB payload: over the largest message a queue takes inline (1 MiB), and binary.
PAYLOAD_SIZE = 3_000_000


@pytest.fixture
def keyring(tmp_path: Path) -> Path:
    """Where the tests' keyring file goes (not created: `keys create` makes it)."""
    return tmp_path / "keys.json"


@pytest.fixture
def blob(tmp_path: Path) -> Path:
    """A file of 3 MB random bytes (not UTF-8)."""
    path = tmp_path / "scan.bin"
    path.write_bytes(os.urandom(PAYLOAD_SIZE))
    return path


def _refused(run: Run, *args: str, env: dict[str, str] | None = None) -> str:
    """Run a command that must be refused; returns its one error line (without the newline)."""
    result = run(*args, code=1, env=env)
    assert ERROR_LINE.fullmatch(result.stderr), result.stderr
    return result.stderr.rstrip("\n")


def _encrypted_queue(run: Run, keyring: Path, name: str = "secure") -> None:
    run("--keyring", str(keyring), "keys", "create", "orders")
    run("--keyring", str(keyring), "queue", "create", name, "--kms-key", "alias/orders")


def _stored(location: str, db: Path) -> list[bytes]:
    """What the database holds, as bytes: its files (the SQLite file and those beside it, such as
    its WAL), or every row of its tables (PostgreSQL)."""
    if not location.startswith("postgresql://"):
        return [
            path.read_bytes()
            for path in db.parent.iterdir()
            if path.name.startswith(db.name) and path.is_file()
        ]
    tables = sql_rows(
        location, "SELECT table_name FROM information_schema.tables WHERE table_schema = 'durableq'"
    )
    return [repr(sql_rows(location, f'SELECT * FROM "{table}"')).encode() for (table,) in tables]


# -- keys --------------------------------------------------------------------------


def test_keys_create_list_and_rotate(run: Run, keyring: Path, db: Path) -> None:
    ring = ("--keyring", str(keyring))
    created = run(*ring, "keys", "create", "orders")
    assert created.stdout == f"created key alias/orders (version 1) in {keyring}\n"
    assert stat.S_IMODE(keyring.stat().st_mode) == 0o600
    run(*ring, "keys", "create", "alias/billing")
    listed = run(*ring, "keys", "list").stdout.splitlines()
    # The text's columns are the JSON's keys, and the alias is spelled as there.
    as_json = json.loads(run(*ring, "keys", "list", "--json").stdout)
    assert (
        listed[0].split()
        == list(as_json[0])
        == ["alias", "key_id", "current_version", "versions", "created_at"]
    )
    assert [line.split()[0] for line in listed[1:]] == [k["alias"] for k in as_json] == ["billing", "orders"]

    rotated = run(*ring, "keys", "rotate", "orders")
    assert rotated.stdout == (
        "rotated key alias/orders: version 2 is current; messages under version 1 still decrypt\n"
    )
    again = run(*ring, "keys", "rotate", "alias/orders")
    assert "version 3 is current; messages under versions 1 to 2 still decrypt" in again.stdout
    assert not db.exists()  # the keys commands never touch a database
    assert stat.S_IMODE(keyring.stat().st_mode) == 0o600  # still private after being rewritten


def test_keys_json(run: Run, keyring: Path) -> None:
    ring = ("--keyring", str(keyring))
    created = json.loads(run(*ring, "keys", "create", "orders", "--json").stdout)
    assert (created["alias"], created["current_version"], created["versions"]) == ("orders", 1, 1)
    rotated = json.loads(run(*ring, "keys", "rotate", "orders", "--json").stdout)
    assert rotated["key_id"] == created["key_id"]  # the same key, a new version
    assert (rotated["current_version"], rotated["versions"]) == (2, 2)
    [listed] = json.loads(run(*ring, "keys", "list", "--json").stdout)
    assert listed == rotated
    assert "material" not in listed  # never the key material


@pytest.mark.parametrize(
    "args", [("keys", "list"), ("keys", "create", "orders"), ("keys", "rotate", "orders")]
)
def test_the_keys_commands_need_a_keyring(run: Run, db: Path, args: tuple[str, ...]) -> None:
    line = _refused(run, *args, env={"DURABLEQ_KEYRING": ""})  # empty: as if unset
    assert line.startswith("error: MissingParameter: ")
    assert "--keyring" in line and "DURABLEQ_KEYRING" in line
    assert not db.exists()


def test_the_keys_refusals(run: Run, keyring: Path) -> None:
    ring = ("--keyring", str(keyring))
    run(*ring, "keys", "create", "orders")
    assert _refused(run, *ring, "keys", "create", "alias/orders").startswith(
        f"error: InvalidParameterValue: key alias/orders exists in {keyring}"
    )
    assert _refused(run, *ring, "keys", "rotate", "missing") == (
        f"error: KmsNotFound: the keyring {keyring} has no key alias/missing"
    )
    assert _refused(run, *ring, "keys", "create", "bad name").startswith(
        "error: InvalidParameterValue: key alias 'bad name' is not allowed"
    )
    keyring.chmod(0o644)
    assert _refused(run, *ring, "keys", "list").startswith("error: KmsAccessDenied: ")


def test_the_keyring_from_the_environment(run: Run, keyring: Path) -> None:
    env = {"DURABLEQ_KEYRING": str(keyring)}
    assert "created key alias/orders" in run("keys", "create", "orders", env=env).stdout
    run("queue", "create", "secure", "--kms-key", "orders", env=env)
    sent = json.loads(run("send", "secure", "from the environment", "--json", env=env).stdout)
    [received] = json.loads(run("receive", "secure", "--json", env=env).stdout)
    assert (received["message_id"], received["body"]) == (sent["message_id"], "from the environment")


@pytest.mark.parametrize(
    "args",
    [
        ("keys", "list"),
        ("keys", "rotate", "orders"),
        ("queue", "list"),
        ("send", "secure", "x"),
        ("receive", "secure"),
    ],
)
def test_a_keyring_path_with_no_file_is_refused_never_made(
    run: Run, keyring: Path, args: tuple[str, ...]
) -> None:
    _encrypted_queue(run, keyring)
    typo = keyring.with_name("kyes.json")
    line = _refused(run, "--keyring", str(typo), *args)
    assert line == (
        f"error: KmsNotFound: there is no keyring file at {typo}: create one with `durableq keys create "
        "ALIAS` (or Keyring(path).create(alias)), or give the path of the keyring that holds the keys"
    )
    assert not typo.exists()


@pytest.mark.parametrize(
    ("contents", "says"),
    [
        ("[]", "it is a JSON array, not an object"),
        (
            '{"format": "durableq-keyring", "version": 1, "keys": {"orders": {"key_id": "k", "current": 1, '
            '"versions": {"1": {"material": "c2VjcmV0LWtleS1ieXRlcw==", "created_at": "2026-01-01"}}}}}',
            'alias/orders, version 1: "material" must be 32 bytes (AES-256); it holds 16',
        ),
    ],
    ids=["array", "short key"],
)
def test_a_malformed_keyring_is_one_error_line(
    run: Run, keyring: Path, db: Path, contents: str, says: str
) -> None:
    run("init")
    keyring.write_text(contents)
    keyring.chmod(0o600)
    for args in (("keys", "list"), ("queue", "list")):
        line = _refused(run, "--keyring", str(keyring), *args)
        assert line == (
            f"error: KmsAccessDenied: the keyring {keyring} is not a usable durableq keyring: {says}; "
            "restore it from your copy (durableq never rewrites a keyring it cannot read)"
        )
        assert "c2VjcmV0" not in line  # never the key material
    assert keyring.read_text() == contents


# -- encrypted queues ---------------------------------------------------------------


def test_an_encrypted_queue_round_trip(run: Run, keyring: Path, db: Path, location: str) -> None:
    run("--keyring", str(keyring), "keys", "create", "orders")
    created = run("--keyring", str(keyring), "queue", "create", "secure", "--kms-key", "orders")
    assert created.stdout == "created standard queue secure (encrypted with alias/orders)\n"
    shown = run("queue", "show", "secure").stdout
    assert "encryption:" in shown and "alias/orders; each data key is used for 300 s" in shown
    run("--keyring", str(keyring), "send", "secure", "card 4242")
    stored = _stored(location, db)
    assert stored and not any(b"card 4242" in data for data in stored)  # stored encrypted
    received = run("--keyring", str(keyring), "receive", "secure", "--delete").stdout
    assert "\ncard 4242\n" in received and "deleted 1 of 1 messages" in received
    with durableq.open(location) as broker:
        assert broker.get_queue("secure").peek() == []


def test_receive_without_the_keyring_is_refused_and_the_message_stays(
    run: Run, keyring: Path, location: str
) -> None:
    _encrypted_queue(run, keyring)
    sent = json.loads(run("--keyring", str(keyring), "send", "secure", "secret", "--json").stdout)
    line = _refused(run, "receive", "secure", env={"DURABLEQ_KEYRING": ""})
    assert line.startswith("error: KmsAccessDenied: ") and "--keyring" in line
    [peeked] = json.loads(run("peek", "secure", "--json").stdout)
    assert (peeked["message_id"], peeked["state"], peeked["receive_count"]) == (
        sent["message_id"],
        "visible",
        0,
    )
    assert peeked["encrypted"] is True and peeked["body"] is None
    assert "(encrypted: no key in this keyring)" in run("peek", "secure").stdout
    with durableq.open(location, keyring=keyring) as broker:  # the right keyring still reads it
        [message] = broker.get_queue("secure").receive()
    assert (message.message_id, message.body) == (sent["message_id"], "secret")


def test_receive_shows_an_unreadable_message_and_keeps_it(
    run: Run, keyring: Path, location: str, db: Path
) -> None:
    # A message sealed under a key of another keyring (the same alias, other material) does not stop
    # the others: it is shown as unreadable, never saved or deleted, and the exit status says so.
    _encrypted_queue(run, keyring)
    stranger = durableq.Keyring(keyring.with_name("stranger.json"))
    stranger.create("orders")
    with durableq.open(location, keyring=stranger, payload_dir=payload_dir(location, db)) as broker:
        poison = broker.get_queue("secure").send("sealed elsewhere").message_id
    run("--keyring", str(keyring), "send", "secure", "readable")
    result = run("--keyring", str(keyring), "receive", "secure", "-n", "10", "--delete", code=1)
    assert "\nreadable\n" in result.stdout
    assert f"message id:     {poison}" in result.stdout
    assert "(unreadable: KmsAccessDenied: not received with its body)" in result.stdout
    assert "deleted 1 of 2 messages" in result.stdout
    assert result.stderr.splitlines() == [
        f"message {poison}: KmsAccessDenied: key alias/orders (version 1) of the keyring cannot unwrap "
        "data key 1: it is not the key the message was encrypted with",
        "error: EntriesFailed: 1 of 2 messages failed",
    ]
    [kept] = json.loads(run("peek", "secure", "--json").stdout)
    assert (kept["message_id"], kept["state"], kept["receive_count"]) == (poison, "in_flight", 1)
    run("--keyring", str(keyring), "change-visibility", "secure", _handle(location, poison), "0")
    [again] = json.loads(run("--keyring", str(keyring), "receive", "secure", "--json", code=1).stdout)
    assert (again["message_id"], again["body"], again["md5_of_body"]) == (poison, None, None)
    assert again["unreadable"]["code"] == "KmsAccessDenied"


def _handle(location: str, message_id: str) -> str:
    [(handle,)] = sql_rows(
        location, "SELECT receipt_handle FROM durableq_messages WHERE message_id = ?", message_id
    )
    return str(handle)


def test_queue_create_encryption_and_payload_options(
    run: Run, db: Path, location: str, keyring: Path
) -> None:
    run("--keyring", str(keyring), "keys", "create", "aws/sqs")  # a keyring file is made explicitly
    created = run(
        "--keyring", str(keyring), "queue", "create", "managed", "--sse", "--kms-reuse", "120",
        "--large-payloads", "--json",
    )  # fmt: skip
    description = json.loads(created.stdout)
    assert description["sqs_managed_sse_enabled"] is True and description["large_payloads"] is True
    assert description["kms_data_key_reuse_period"] == 120 and description["kms_master_key_id"] is None
    assert "alias/aws/sqs (SQS-managed)" in run("queue", "show", "managed").stdout
    assert _refused(run, "queue", "create", "other", "--kms-reuse", "5") == (
        "error: InvalidAttributeValue: --kms-reuse must be from 60 to 86400 seconds; got 5"
    )
    assert _refused(run, "queue", "create", "both", "--kms-key", "orders", "--sse").startswith(
        "error: InvalidAttributeValue: queue 'both' can use one kind of server-side encryption"
    )
    assert _refused(run, "queue", "create", "odd", "--kms-key", "no spaces").startswith(
        "error: InvalidParameterValue: key alias 'no spaces' is not allowed"
    )
    with durableq.open(location, payload_dir=payload_dir(location, db)) as broker:
        assert broker.get_queue("managed").attributes()["large_payloads"] is True
        assert broker.list_queues() == ["managed"]


# -- large payloads ------------------------------------------------------------------


def test_a_large_binary_payload_round_trip(
    run: Run, db: Path, location: str, blob: Path, tmp_path: Path
) -> None:
    created = run("queue", "create", "scans", "--large-payloads")
    assert created.stdout == "created standard queue scans (large payloads)\n"
    sent = run("send", "scans", "--payload", str(blob)).stdout
    assert sent.startswith("sent message ") and sent.endswith(f" from {blob} (3,000,000 bytes)\n")
    message_id = sent.split()[2]
    assert "(payload stored outside, 3,000,000 bytes)" in run("peek", "scans").stdout

    out = tmp_path / "incoming"
    received = run("receive", "scans", "--save-payloads", str(out), "--delete").stdout
    assert "payload:        3,000,000 bytes stored outside\n" in received
    assert f"saved to:       {out / message_id}\n" in received
    assert "deleted 1 of 1 messages" in received
    assert (out / message_id).read_bytes() == blob.read_bytes()
    assert stat.S_IMODE((out / message_id).stat().st_mode) == 0o600
    assert os.listdir(out) == [message_id]  # no partial file left behind
    with durableq.open(location, payload_dir=payload_dir(location, db)) as broker:
        assert broker.get_queue("scans").peek() == []


def test_send_payload_from_stdin_and_receive_json(run: Run, broker: durableq.Broker) -> None:
    broker.create_queue("scans", large_payloads=True)
    data = bytes(range(256)) * 5_000  # 1.28 MB, binary
    sent = json.loads(run("send", "scans", "--payload", "-", "--json", input=data).stdout)  # type: ignore[arg-type]
    assert sent["bytes"] == len(data)
    [received] = json.loads(run("receive", "scans", "--json").stdout)
    assert received["message_id"] == sent["message_id"]
    assert (received["body"], received["payload_size"]) == (None, len(data))
    [message] = broker.get_queue("scans").peek()
    assert message.payload_size == len(data)


def test_a_small_text_payload_is_sent_inline_and_saved(
    run: Run, broker: durableq.Broker, tmp_path: Path
) -> None:
    broker.create_queue("jobs")  # no large payloads: a file that fits is an ordinary message
    note = tmp_path / "note.txt"
    note.write_text("résumé attached\n", encoding="utf-8")
    sent = run("send", "jobs", "--payload", str(note)).stdout
    assert sent.endswith(f" from {note} ({len(note.read_bytes())} bytes)\n")
    out = tmp_path / "out"
    received = run("receive", "jobs", "--save-payloads", str(out)).stdout
    assert received.endswith("\nrésumé attached\n\n")  # an inline body is still printed
    assert "payload:" not in received
    [saved] = out.iterdir()
    assert saved.read_bytes() == note.read_bytes()
    assert f"saved to:       {saved}\n" in received


def test_a_large_payload_needs_a_queue_that_takes_them(run: Run, broker: durableq.Broker, blob: Path) -> None:
    broker.create_queue("jobs")
    line = _refused(run, "send", "jobs", "--payload", str(blob))
    assert line.startswith("error: InvalidParameterValue: ")
    assert "`durableq queue set QUEUE large_payloads=true`" in line
    assert broker.get_queue("jobs").peek() == []


@pytest.mark.parametrize("extra", [("a body",), ("--file", "-")])
def test_send_payload_goes_alone(
    run: Run, broker: durableq.Broker, blob: Path, extra: tuple[str, ...]
) -> None:
    broker.create_queue("scans", large_payloads=True)
    result = run("send", "scans", *extra, "--payload", str(blob), code=2, input="")
    assert "--payload sends a file's bytes as the message: give no BODY or --file with it" in result.stderr
    assert broker.get_queue("scans").peek() == []


def test_delete_waits_for_the_payload_to_be_saved(
    run: Run, broker: durableq.Broker, blob: Path, tmp_path: Path
) -> None:
    broker.create_queue("scans", large_payloads=True)
    message_id = json.loads(run("send", "scans", "--payload", str(blob), "--json").stdout)["message_id"]
    out = tmp_path / "out"
    (out / f".{message_id}.partial").mkdir(parents=True)  # where the payload would be written: it cannot be
    line = _refused(run, "receive", "scans", "--save-payloads", str(out), "--delete")
    assert line.startswith("error: InvalidParameterValue: ")
    [message] = broker.get_queue("scans").peek()
    assert (message.message_id, message.state, message.receive_count) == (message_id, "in_flight", 1)
    assert not (out / message_id).exists()


def test_the_payload_dir_option_and_variable(
    run: Run, db: Path, location: str, blob: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    run("--payload-dir", str(store), "queue", "create", "scans", "--large-payloads")
    assert (
        f"large_payloads:            yes, stored in {store}\n"
        in run("--payload-dir", str(store), "queue", "show", "scans").stdout
    )
    run("--payload-dir", str(store), "send", "scans", "--payload", str(blob))
    stored = [p for p in store.rglob("*") if p.is_file() and p.name != MARKER]
    assert len(stored) == 1 and stored[0].stat().st_size >= PAYLOAD_SIZE
    assert not Path(f"{db}.payloads").exists()
    out = tmp_path / "out"
    # Not through `run`, which passes --payload-dir on PostgreSQL: the variable alone names the store.
    received = CliRunner().invoke(
        main,
        ["--db", location, "receive", "scans", "--save-payloads", str(out)],
        env={"DURABLEQ_PAYLOAD_DIR": str(store)},
        catch_exceptions=False,
    )
    assert received.exit_code == 0, received.output
    [saved] = out.iterdir()
    assert saved.read_bytes() == blob.read_bytes()


def test_the_payload_dir_option_touches_only_the_stores_own_files(
    run: Run, db: Path, location: str, tmp_path: Path
) -> None:
    share = tmp_path / "share"  # a folder of the user's own that holds other files, as a home folder does
    share.mkdir(mode=0o700)
    others = [share / "notes.txt", share / "ab" / "old.log", share / "tmp" / "draft.txt"]
    for path in others:
        path.parent.mkdir(exist_ok=True)
        path.write_text("not a payload")
        os.utime(path, (0, 0))  # older than any grace period
    run("--payload-dir", str(share), "queue", "create", "jobs")
    assert run("--payload-dir", str(share), "queue", "list").stdout == "jobs\n"
    assert all(path.exists() for path in others)
    share.chmod(0o777)
    line = _refused(run, "--payload-dir", str(share), "queue", "list")
    assert line.startswith(f"error: InvalidParameterValue: the payload store {share} ")
    assert f"chmod 700 {share}" in line
    if not location.startswith("postgresql://"):  # a SQLite file's folder holds the database
        line = _refused(run, "--payload-dir", str(db.parent), "queue", "list")
        assert line.startswith(f"error: InvalidParameterValue: the payload store {db.parent} holds ")
    assert all(path.exists() for path in others)

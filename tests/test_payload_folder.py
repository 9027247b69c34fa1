"""The payload store's folder: it touches only files it made, inside its own folder, by names it
recognises; it never follows a symbolic link, refuses a folder that is not private to it (or that holds
the database), refuses trash entries that are not plain names of its own files, says so when its disk is
full, and hands out no byte of a payload that fails its check (issue 27)."""

from __future__ import annotations

import io
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import durableq
from durableq import limits
from durableq.ops.payload_owner import MARKER

from .conftest import FakeClock, payload_dir, sql_rows, sql_run

BIG = 1_100_000  # over the default size limit of 1,048,576 bytes
OLD = time.time() - 2 * 86_400  # two days ago: well past the orphan grace period
REF = "ab" + "c" * 30  # a name of the store's own kind (32 hex digits)


def _old(*paths: Path) -> None:
    for path in paths:
        os.utime(path, (OLD, OLD), follow_symlinks=False)


def _plant(path: Path, text: str = "not a payload") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    _old(path)
    return path


def _open(target: str, clock: FakeClock, store: Path | str | None) -> durableq.Broker:
    return durableq.open(target, clock=clock, durability="normal", payload_dir=store)


@pytest.fixture
def private(tmp_path: Path) -> Path:
    """A folder of the user's own (mode 0700), as a home folder is: where other files live too."""
    folder = tmp_path / "share"
    folder.mkdir(mode=0o700)
    return folder


def _payload_files(root: Path) -> list[Path]:
    """The files of the store's own layout: ``AB/ABCD…`` (32 hex digits)."""
    return sorted(
        p
        for p in root.glob("*/*")
        if p.is_file() and re.fullmatch("[0-9a-f]{32}", p.name) and p.parent.name == p.name[:2]
    )


# -- the sweep --------------------------------------------------------------------------------


def test_a_sweep_of_a_shared_folder_removes_only_the_stores_own_files(
    target: str, clock: FakeClock, private: Path, tmp_path: Path
) -> None:
    outside = _plant(tmp_path / "outside" / ("12" + "3" * 30))
    others = [
        _plant(private / "notes.txt"),
        _plant(private / "projects" / "report.pdf"),
        _plant(private / "projects" / ("0" * 32)),  # a payload's name, outside the store's layout
        _plant(private / "ab" / "readme"),  # a folder named like a shard, holding other files
        _plant(private / "ab" / (REF + ".bak")),
        _plant(private / "cd" / ("ef" + "0" * 30)),  # a payload's name in the wrong shard
        _plant(private / "tmp" / "draft.txt"),
        _plant(private / "tmp" / "x.partial"),
        _plant(private / "AB" / ("AB" + "C" * 30)),  # upper case: not a name the store makes
    ]
    link = private / "12" / outside.name  # a link named like a payload, to a file elsewhere
    link.parent.mkdir()
    link.symlink_to(outside)
    _old(link)
    (private / "34" / ("34" + "5" * 30)).mkdir(parents=True)  # a folder named like a payload
    orphan = _plant(private / "ef" / ("ef" + "1" * 30), "left by a crashed send")
    partial = _plant(private / "tmp" / (("9" * 32) + ".partial"), "an unfinished write")
    with _open(target, clock, private) as broker:
        big = broker.create_queue("big", large_payloads=True)
        big.send("x" * BIG)
        ((ref,),) = sql_rows(target, "SELECT payload_ref FROM durableq_messages")
        stored = private / str(ref)[:2] / str(ref)
        _old(stored)
        assert broker.sweep_payloads(grace=0) == 2  # the orphan and the unfinished write: nothing else
        broker.list_queues()  # a broker's own sweep (when it settles) touches nothing else either
    assert all(p.exists() for p in others) and outside.exists() and link.is_symlink()
    assert (private / "34" / ("34" + "5" * 30)).is_dir()
    assert not orphan.exists() and not partial.exists() and stored.exists()


def test_a_planted_symlink_is_refused_and_nothing_elsewhere_is_touched(
    target: str, clock: FakeClock, db_path: Path, tmp_path: Path
) -> None:
    elsewhere = tmp_path / "elsewhere"
    victims = [_plant(elsewhere / REF[:2] / REF), _plant(elsewhere / "tmp" / (REF + ".partial"))]
    elsewhere.chmod(0o700)
    link = Path(f"{db_path}.payloads")  # where a SQLite file keeps its store (and the tests', on PostgreSQL)
    link.symlink_to(elsewhere, target_is_directory=True)
    with pytest.raises(durableq.InvalidParameterValue, match="is a symbolic link") as refused:
        _open(target, clock, payload_dir(target, db_path))
    assert str(link) in str(refused.value)
    # A link planted after the broker opened is refused when the store is next used.
    link.unlink()
    with _open(target, clock, payload_dir(target, db_path)) as broker:
        big = broker.create_queue("big", large_payloads=True)
        big.send("s" * BIG)
        shutil.rmtree(link)  # the store the send made (its message is now one whose file is gone)
        link.symlink_to(elsewhere, target_is_directory=True)
        with pytest.raises(durableq.InvalidParameterValue, match="is a symbolic link"):
            broker.sweep_payloads(grace=0)
        with pytest.raises(durableq.InvalidParameterValue, match="is a symbolic link"):
            big.send("y" * BIG)
        broker.list_queues()
    assert all(p.exists() for p in victims) and sorted(p.name for p in elsewhere.rglob("*")) == sorted(
        ["ab", "tmp", REF, REF + ".partial"]
    )


@pytest.mark.sqlite_only("the database's folder is the folder of a SQLite file")
def test_a_payload_dir_that_holds_the_database_is_refused(
    target: str, clock: FakeClock, db_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    for where in (tmp_path, tmp_path.parent, Path("."), str(tmp_path) + "/", db_path):
        with pytest.raises(durableq.InvalidParameterValue, match=r"(holds|is) the database") as refused:
            _open(target, clock, where)
        assert str(db_path) in str(refused.value)
    assert not db_path.exists()  # refused before the file was made
    with pytest.raises(durableq.InvalidParameterValue, match="payload_dir must be a folder path"):
        _open(target, clock, "")
    with _open(target, clock, tmp_path / "store") as broker:  # a folder beside it is fine
        broker.create_queue("big", large_payloads=True).send("z" * BIG)
        assert len(_payload_files(tmp_path / "store")) == 1


# -- the trash --------------------------------------------------------------------------------


def test_trash_entries_that_are_not_the_stores_names_unlink_nothing(
    target: str, clock: FakeClock, tmp_path: Path
) -> None:
    (tmp_path / "deep").mkdir()
    store = tmp_path / "deep" / "store"
    store.mkdir(mode=0o700)
    absolute = _plant(tmp_path / "victim-absolute")
    dotted = _plant(tmp_path / "victim-dotted")  # store/../../victim-dotted, as the old layout joined it
    linked = _plant(tmp_path / "linked" / REF)
    (store / REF[:2]).symlink_to(linked.parent, target_is_directory=True)  # a shard that is a link
    refs = [str(absolute), "../victim-dotted", "", ".", "..", REF, REF.upper(), REF + "/..", "tmp"]
    with _open(target, clock, store) as broker:
        big = broker.create_queue("big", large_payloads=True)
        for ref in refs:
            sql_run(target, "INSERT INTO durableq_payload_trash (ref) VALUES (?)", ref)
        broker.sweep_payloads()
        assert sql_rows(target, "SELECT ref FROM durableq_payload_trash") == []  # refused, logged and dropped
        assert absolute.exists() and dotted.exists() and linked.exists() and store.is_dir()
        # The store's own files still go with their rows.
        (store / REF[:2]).unlink()
        big.send("w" * BIG)
        (message,) = big.receive()
        big.delete(message.receipt_handle)
        assert _payload_files(store) == []


# -- the folder's owner and mode --------------------------------------------------------------


@pytest.mark.parametrize("mode", [0o777, 0o750, 0o701])
def test_a_payload_folder_others_can_reach_is_refused(
    target: str, clock: FakeClock, tmp_path: Path, mode: int
) -> None:
    store = tmp_path / "store"
    store.mkdir()
    store.chmod(mode)
    inside = _plant(store / REF[:2] / REF)
    with pytest.raises(durableq.InvalidParameterValue, match=f"chmod 700 {store}") as refused:
        _open(target, clock, store)
    assert f"mode {mode:o}" in str(refused.value)
    store.chmod(0o700)
    with _open(target, clock, store) as broker:
        store.chmod(mode)  # opened alike later: the store refuses it when next used
        with pytest.raises(durableq.InvalidParameterValue, match="chmod 700"):
            broker.sweep_payloads(grace=0)
        store.chmod(0o700)
    assert inside.exists()


def test_a_new_payload_folder_is_private_and_a_file_is_refused(
    target: str, clock: FakeClock, tmp_path: Path
) -> None:
    plain_file = _plant(tmp_path / "a-file")
    with pytest.raises(durableq.InvalidParameterValue, match="is not a folder"):
        _open(target, clock, plain_file)
    store = tmp_path / "new"
    with _open(target, clock, store) as broker:
        broker.create_queue("big", large_payloads=True).send("n" * BIG)
    assert store.stat().st_mode & 0o777 == limits.PAYLOAD_DIR_MODE
    folders = [p for p in store.iterdir() if p.name != MARKER]
    assert all(p.stat().st_mode & 0o777 == limits.PAYLOAD_DIR_MODE for p in folders)
    assert (store / MARKER).stat().st_mode & 0o777 == 0o600  # the database it serves


@pytest.mark.skipif(os.geteuid() != 0, reason="only root can give a folder to another user")
def test_a_payload_folder_of_another_user_is_refused(target: str, clock: FakeClock, tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.mkdir(mode=0o700)
    os.chown(store, 65534, 65534)  # nobody
    with pytest.raises(durableq.InvalidParameterValue, match="belongs to user 65534"):
        _open(target, clock, store)


# -- a full disk ------------------------------------------------------------------------------

FILLER = """
import io, os, resource, signal, sys
import durableq
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
with durableq.open(sys.argv[1], payload_dir=sys.argv[2], durability="normal") as broker:
    big = broker.get_queue("big")
    limit = int(sys.argv[3])
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    try:
        big.send_file(io.BytesIO(os.urandom(3 * limit)))
    except durableq.DurableQError as exc:
        print(exc.code, exc.message)
    else:
        print("sent")
"""


def test_a_full_disk_under_the_store_is_a_durableq_error_and_leaves_no_file(
    target: str, clock: FakeClock, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    limit = 2 * limits.PAYLOAD_CHUNK_SIZE  # far above the database's own files
    with _open(target, clock, store) as broker:
        big = broker.create_queue("big", large_payloads=True)
        kept = big.send("k" * BIG)
        before = _payload_files(store)
        done = subprocess.run(
            [sys.executable, "-c", FILLER, target, str(store), str(limit)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        code, _, message = done.stdout.strip().partition(" ")
        assert code == "DatabaseFull", done.stdout
        assert str(store) in message and "full" in message
        assert _payload_files(store) == before and list(store.rglob("*.partial")) == []
        (message_kept,) = big.receive()  # the acknowledged message is whole
        assert message_kept.message_id == kept.message_id and message_kept.body == "k" * BIG


# -- a damaged payload ------------------------------------------------------------------------


@pytest.fixture
def damaged(broker: durableq.Broker, target: str) -> Iterator[tuple[durableq.Message, Path, bytes]]:
    """A received message of three chunks, its payload file, and what it holds."""
    big = broker.create_queue("big", large_payloads=True)
    data = os.urandom(3 * limits.PAYLOAD_CHUNK_SIZE)
    big.send_file(io.BytesIO(data))
    (message,) = big.receive()
    ((ref,),) = sql_rows(target, "SELECT payload_ref FROM durableq_messages")
    yield message, Path(broker.payload_dir) / str(ref)[:2] / str(ref), data


@pytest.mark.parametrize("how", ["flip a bit of the last chunk", "cut the last chunk off", "extend"])
def test_a_damaged_payload_returns_no_byte(damaged: tuple[durableq.Message, Path, bytes], how: str) -> None:
    message, file, data = damaged
    with message.open_payload() as stream:  # intact: streamed in parts
        assert stream.read(10) == data[:10] and stream.read() == data[10:]
    content = bytearray(file.read_bytes())
    if how.startswith("flip"):
        content[-100] ^= 1
    elif how.startswith("cut"):
        del content[2 * (limits.PAYLOAD_CHUNK_SIZE + 16) :]
    else:
        content += b"\0"
    file.write_bytes(bytes(content))
    with message.open_payload() as stream, pytest.raises(durableq.MessageCorrupt):
        stream.read(1)
    out = io.BytesIO()
    with message.open_payload() as stream, pytest.raises(durableq.MessageCorrupt):
        shutil.copyfileobj(stream, out)
    assert out.getvalue() == b""
    with message.open_payload() as stream, pytest.raises(durableq.MessageCorrupt):
        stream.read()


def test_a_payload_file_replaced_by_a_symlink_is_not_followed(
    damaged: tuple[durableq.Message, Path, bytes], tmp_path: Path
) -> None:
    message, file, _ = damaged
    copy = tmp_path / "copy"
    shutil.copyfile(file, copy)  # the very bytes, but not the store's file
    file.unlink()
    file.symlink_to(copy)
    with pytest.raises(durableq.MessageCorrupt, match="not a regular file"):
        message.open_payload()
    assert copy.exists()  # the link's target is left alone

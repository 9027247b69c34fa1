"""Commands on messages: receive, delete, change-visibility, and peek (which changes nothing)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

import click

import durableq
from durableq import limits
from durableq.types import MESSAGE_STATES

from .base import fail_entries, open_queue, speaks
from .output import attribute_text, emit, fields, json_option, message_json, preview, table
from .parsing import ranged_option

#: --state words and the library's names for them (None: every state).
PEEK_STATES = {**{state.name.replace("_", "-"): state.name for state in MESSAGE_STATES}, "all": None}


@click.command()
@click.argument("queue")
@click.option(
    "-n",
    "--max-messages",
    type=int,
    default=limits.DEFAULT_MAX_MESSAGES,
    show_default=True,
    help=f"How many messages to receive at most, 1-{limits.MAX_MESSAGES_PER_RECEIVE}.",
)
@ranged_option(
    "--visibility-timeout",
    "Seconds the messages stay hidden",
    0,
    limits.MAX_VISIBILITY_TIMEOUT,
    "the queue's",
)
@ranged_option(
    "--wait", "Long poll: seconds to wait for a message", 0, limits.MAX_RECEIVE_WAIT_TIME, "the queue's"
)
@click.option(
    "--attempt-id", help="FIFO receive attempt id: a retry within 5 minutes gets the same messages."
)
@click.option(
    "--delete",
    is_flag=True,
    help="Delete the messages once they are printed (and saved, with --save-payloads).",
)
@click.option(
    "--save-payloads",
    "save_dir",
    metavar="DIR",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write each message's payload (or body) to DIR/MESSAGE_ID, readable by you only.",
)
@json_option
@speaks(
    max_messages="--max-messages",
    visibility_timeout="--visibility-timeout",
    wait_time="--wait",
    attempt_id="--attempt-id",
)
def receive(
    queue: str,
    max_messages: int,
    visibility_timeout: int | None,
    wait: int | None,
    attempt_id: str | None,
    delete: bool,
    save_dir: Path | None,
    as_json: bool,
) -> None:
    """Receive messages: print each one's body, id, receipt handle and receive count.

    The messages stay hidden for the visibility timeout; delete them with their
    receipt handle (or pass --delete), or they become visible again. A payload
    stored outside the file (a queue with large payloads) is not printed: its
    size is; --save-payloads writes it to a file. A message the --keyring cannot
    open is shown as unreadable, never saved or deleted, and makes the exit
    status 1.

    \b
      durableq receive jobs -n 10 --wait 20
      durableq receive jobs --delete --json
      durableq receive scans --save-payloads incoming/ --delete
    """
    source = open_queue(queue)
    messages = source.receive(
        max_messages, visibility_timeout=visibility_timeout, wait_time=wait, attempt_id=attempt_id
    )
    # A message this keyring cannot open is shown as such, never saved or deleted: it comes back
    # (the queue's redrive policy counts it), and the command ends with exit status 1.
    readable = [m for m in messages if m.unreadable is None]
    saved = {m.message_id: _save_payload(m, save_dir) for m in readable} if save_dir is not None else {}
    emit(as_json, [_received_json(m, saved) for m in messages], lambda: _received_text(messages, saved))
    failed = [
        (f"message {m.message_id}", m.unreadable.code, m.unreadable.message)
        for m in messages
        if m.unreadable is not None
    ]
    if delete and readable:
        result = source.delete_batch([m.receipt_handle for m in readable])
        if not as_json:
            click.echo(f"deleted {len(result.successful)} of {len(messages)} messages")
        failed += [(f"message {readable[int(f.id)].message_id}", f.code, f.message) for f in result.failed]
    fail_entries(failed, len(messages), "messages")


def _save_payload(message: durableq.Message, folder: Path) -> Path:
    """Stream ``message``'s payload (an inline body: its UTF-8 bytes) to ``folder/MESSAGE_ID``.

    The file appears whole or not at all: it is written beside its name and renamed, so a payload
    that fails its check half way (MessageCorrupt) leaves nothing that looks saved.
    """
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / message.message_id
    partial = folder / f".{message.message_id}.partial"
    # Mode 600: the payload of an encrypted queue is plaintext here; the user may open it up.
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with open(descriptor, "wb") as out, message.open_payload() as source:
            shutil.copyfileobj(source, out, limits.PAYLOAD_CHUNK_SIZE)
        os.replace(partial, target)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    return target


def _received_json(message: durableq.Message, saved: Mapping[str, Path]) -> dict[str, object]:
    data = message_json(message)
    if message.message_id in saved:
        data["saved_to"] = str(saved[message.message_id])
    return data


def _received_text(messages: list[durableq.Message], saved: Mapping[str, Path]) -> str:
    if not messages:
        return "no messages"
    blocks = []
    for message in messages:
        pairs: list[tuple[str, object]] = [
            ("message id", message.message_id),
            ("receipt handle", message.receipt_handle),
            ("receive count", message.receive_count),
            ("sent", message.sent_at),
        ]
        pairs += _optional(message)
        if message.payload_size is not None:
            pairs.append(("payload", f"{message.payload_size:,} bytes stored outside"))
        if message.message_id in saved:
            pairs.append(("saved to", saved[message.message_id]))
        # A payload stored outside may be large or binary: it is never printed, only saved.
        if message.unreadable is not None:
            text = f"\n(unreadable: {message.unreadable.code}: not received with its body)"
        else:
            text = "" if message.payload_size is not None else "\n" + message.body
        blocks.append(fields(pairs) + text)
    return "\n\n".join(blocks)


def _optional(message: durableq.Message | durableq.PeekedMessage) -> list[tuple[str, object]]:
    """The lines only some messages have: attributes, FIFO ids, a dead-letter source."""
    optional = [
        ("attributes", attribute_text(message.attributes) if message.attributes else None),
        ("group", message.group_id),
        ("deduplication id", message.deduplication_id),
        ("sequence number", message.sequence_number),
        ("dead-letter source", message.dead_letter_source),
    ]
    return [(name, value) for name, value in optional if value is not None]


@click.command("delete")
@click.argument("queue")
@click.argument("receipts", metavar="RECEIPT...", nargs=-1, required=True)
@json_option
def delete_messages(queue: str, receipts: tuple[str, ...], as_json: bool) -> None:
    """Delete messages by their receipt handles (from receive).

    \b
      durableq delete jobs AQEB...
    """
    target = open_queue(queue)
    failed: list[tuple[str, str, str]] = []
    step = limits.MAX_BATCH_ENTRIES
    for start in range(0, len(receipts), step):
        entries = [(str(start + i), handle) for i, handle in enumerate(receipts[start : start + step])]
        result = target.delete_batch(entries)
        failed += [(f"receipt {int(f.id) + 1}", f.code, f.message) for f in result.failed]
    deleted = len(receipts) - len(failed)
    report = {"deleted": deleted, "failed": [dict(zip(("receipt", "code", "message"), f)) for f in failed]}
    emit(as_json, report, f"deleted {deleted} of {len(receipts)} messages")
    fail_entries(failed, len(receipts), "deletes")


@click.command("change-visibility")
@click.argument("queue")
@click.argument("receipt")
@click.argument("seconds", type=int)
@json_option
def change_visibility(queue: str, receipt: str, seconds: int, as_json: bool) -> None:
    """Hide a received message for SECONDS from now (0 makes it visible at once).

    \b
      durableq change-visibility jobs AQEB... 120
    """
    open_queue(queue).change_visibility(receipt, seconds)
    text = "the message is visible again" if seconds == 0 else f"the message is hidden for {seconds} s"
    emit(as_json, {"receipt_handle": receipt, "visibility_timeout": seconds}, text)


@click.command()
@click.argument("queue")
@click.option(
    "--state",
    type=click.Choice(list(PEEK_STATES)),
    default="all",
    show_default=True,
    help="Which messages to show.",
)
@click.option(
    "--limit",
    type=int,
    default=limits.DEFAULT_PEEK,
    show_default=True,
    help=f"At most this many, 1-{limits.MAX_PEEK}.",
)
@json_option
@speaks(limit="--limit")
def peek(queue: str, state: str, limit: int, as_json: bool) -> None:
    """Look at messages, oldest first, without receiving them: nothing about them changes.

    \b
      durableq peek jobs --state in-flight --limit 50
    """
    messages = open_queue(queue).peek(state=PEEK_STATES[state], limit=limit)
    emit(as_json, [message_json(m) for m in messages], lambda: _peeked_text(messages))


def _peeked_text(messages: list[durableq.PeekedMessage]) -> str:
    if not messages:
        return "no messages"
    headers = ("message id", "state", "receives", "sent", "visible at", "group", "body")
    rows = [
        (
            m.message_id,
            m.state.replace("_", " "),
            m.receive_count,
            m.sent_at,
            m.visible_at,
            m.group_id,
            _peeked_body(m),
        )
        for m in messages
    ]
    return table(headers, rows)


COMMANDS = [receive, delete_messages, change_visibility, peek]


def _peeked_body(message: durableq.PeekedMessage) -> str:
    """What peek shows of a body: a preview, or what it holds instead (a payload, ciphertext)."""
    if message.payload_size is not None:
        return f"(payload stored outside, {message.payload_size:,} bytes)"
    if message.body is None:
        return "(encrypted: no key in this keyring)"
    return preview(message.body)

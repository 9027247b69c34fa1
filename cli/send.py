"""``durableq send``: one message from the command line or stdin, many from a JSON-lines file, or a
file's bytes (``--payload``: a large payload, stored outside the database file)."""

from __future__ import annotations

import io
import sys
from collections.abc import Mapping
from typing import IO, Any, BinaryIO, TextIO, cast

import click

import durableq
from durableq import limits

from .base import CommandFailed, cli_words, fail_entries, open_queue, speaks
from .output import emit, json_option, jsonable, progress
from .parsing import ATTRIBUTE, LINE_KEYS, line_entry, ranged_option

BATCH = limits.MAX_BATCH_ENTRIES
#: The options of `send` for the library's names, in its error messages.
OPTION_WORDS = {"delay_seconds": "--delay", "group_id": "--group", "deduplication_id": "--dedup-id"}
#: A file for --payload too large or binary for a queue without large payloads: say how to allow them.
PAYLOAD_WORDS = {"large_payloads=True": "`durableq queue set QUEUE large_payloads=true`"}
#: The same for a line of --file, where the line's own key may give the value too.
LINE_WORDS = {
    keyword: f'{option} (or "{key}" in the line)'
    for key, keyword in LINE_KEYS.items()
    for word, option in OPTION_WORDS.items()
    if keyword == word
}


@click.command()
@click.argument("queue")
@click.argument("body", required=False)
@ranged_option(
    "--delay",
    "Seconds before the message can be received (standard queues)",
    0,
    limits.MAX_DELAY_SECONDS,
    "the queue's",
)
@click.option(
    "--group", help="Message group id (required on FIFO queues; on a standard queue, the message's tenant)."
)
@click.option("--dedup-id", help="Deduplication id (FIFO queues without content-based deduplication).")
@click.option(
    "--attr",
    "attrs",
    multiple=True,
    type=ATTRIBUTE,
    help="An attribute: NAME=VALUE (a String) or NAME:TYPE=VALUE with TYPE Number, String or Binary "
    "(value in base64), optionally TYPE.label. Repeatable.",
)
@click.option(
    "--file",
    "file",
    type=click.File("r", encoding="utf-8"),
    help="Send every line of a JSON-lines file ('-' for stdin), in batches of "
    f"{BATCH}: a JSON string (the body) or an object with {', '.join(LINE_KEYS)}.",
)
@click.option(
    "--payload",
    type=click.Path(exists=True, dir_okay=False, allow_dash=True),
    help="Send the bytes of a file ('-' for stdin) as one message; on a queue with large payloads, "
    "contents over its size limit, or binary, are stored outside the file (up to 2 GiB).",
)
@json_option
@speaks(**OPTION_WORDS, **PAYLOAD_WORDS)
def send(
    queue: str,
    body: str | None,
    delay: int | None,
    group: str | None,
    dedup_id: str | None,
    attrs: tuple[tuple[str, durableq.Attribute], ...],
    file: TextIO | None,
    payload: str | None,
    as_json: bool,
) -> None:
    """Send a message (BODY, or - to read it from stdin), every line of --file, or a file's bytes
    (--payload).

    The options apply to every message; with --file they are defaults that a
    line's own keys override (attributes merge). Blank lines are skipped; a line
    that fails is reported with its number, code and message, and the others
    are still sent. A progress bar shows on a terminal.

    \b
      durableq send jobs 'resize cat.png' --attr size:Number=512
      echo '{"id": 7}' | durableq send jobs -
      durableq send orders.fifo created --group order-17 --dedup-id o17-created
      durableq send jobs --file messages.jsonl
      durableq send scans --payload scan-0042.tiff
    """
    if payload is not None and (body is not None or file is not None):
        raise click.UsageError(
            "--payload sends a file's bytes as the message: give no BODY or --file with it"
        )
    if payload is None and (body is None) == (file is None):
        raise click.UsageError("give a BODY (or - to read it from stdin), --file or --payload; one of them")
    given = {
        "delay_seconds": delay,
        "group_id": group,
        "deduplication_id": dedup_id,
        "attributes": dict(attrs) or None,
    }
    options = {key: value for key, value in given.items() if value is not None}
    target = open_queue(queue, create=True)
    if payload is not None:
        _send_payload(target, payload, options, as_json)
        return
    if file is not None:
        _send_file(target, file, options, as_json)
        return
    text = sys.stdin.read() if body == "-" else body
    assert text is not None  # checked above: a BODY when there is no --file
    result = target.send(
        text,
        delay_seconds=delay,
        attributes=dict(attrs) or None,
        group_id=group,
        deduplication_id=dedup_id,
    )
    sequence = f" (sequence number {result.sequence_number})" if result.sequence_number else ""
    emit(as_json, result, f"sent message {result.message_id}{sequence}")


class _Counted(io.RawIOBase):
    """A binary stream that counts the bytes read through it (stdin has no size to ask for)."""

    def __init__(self, stream: IO[bytes]) -> None:
        super().__init__()
        self._stream = stream
        self.count = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1, /) -> bytes:
        data = self._stream.read(size)  # a buffered stream: a short read only at the end
        self.count += len(data)
        return data


def _send_payload(target: durableq.Queue, name: str, options: Mapping[str, Any], as_json: bool) -> None:
    """Send the bytes of file ``name`` (``-``: stdin) with ``Queue.send_file``, which streams them."""
    with click.open_file(name, "rb") as stream:
        counted = _Counted(stream)
        result = target.send_file(cast(BinaryIO, counted), **options)
    where = "stdin" if name == "-" else name
    sequence = f", sequence number {result.sequence_number}" if result.sequence_number else ""
    text = f"sent message {result.message_id} from {where} ({counted.count:,} bytes{sequence})"
    emit(as_json, {**jsonable(result), "bytes": counted.count}, text)


def _send_file(target: durableq.Queue, file: TextIO, defaults: Mapping[str, Any], as_json: bool) -> None:
    lines = [(number, text) for number, text in enumerate(file, start=1) if text.strip()]
    failed: list[tuple[int, str, str]] = []
    sent = 0
    with progress(len(lines), f"sending to {target.name}", enabled=not as_json) as bar:
        for start in range(0, len(lines), BATCH):
            chunk = lines[start : start + BATCH]
            entries = []
            for number, text in chunk:
                try:
                    entries.append(line_entry(str(number), text, defaults))
                except durableq.DurableQError as exc:
                    failed.append((number, exc.code, cli_words(exc, LINE_WORDS)))
            try:
                result = _send_batch(target, entries)
            except durableq.DurableQError as exc:
                # The whole batch was refused (the file is locked, the queue is gone): say how far it got.
                where = f"sent {sent} messages; line {chunk[0][0]} on were not sent"
                raise CommandFailed(exc.code, f"{cli_words(exc, LINE_WORDS)} ({where})") from exc
            sent += len(result.successful)
            failed += [(int(f.id), f.code, _entry_words(f)) for f in result.failed]
            bar.update(len(chunk))
    failed.sort()
    report = {
        "sent": sent,
        "lines": len(lines),
        "failed": [dict(zip(("line", "code", "message"), f)) for f in failed],
    }
    emit(as_json, report, f"sent {sent} of {len(lines)} messages from {file.name}")
    fail_entries([(f"line {n}", code, message) for n, code, message in failed], len(lines), "lines")


def _entry_words(failure: durableq.BatchFailure) -> str:
    """A failed line's message, naming the option and the line's key."""
    return failure.message if failure.error is None else cli_words(failure.error, LINE_WORDS)


def _send_batch(target: durableq.Queue, entries: list[durableq.SendEntry]) -> durableq.BatchResult:
    """Send a batch; one too large as a whole (over 1 MiB) goes entry by entry instead."""
    if not entries:
        return durableq.BatchResult([], [])
    try:
        return target.send_batch(entries)
    except durableq.BatchRequestTooLong:
        results = [target.send_batch([entry]) for entry in entries]
        return durableq.BatchResult(
            [s for r in results for s in r.successful], [f for r in results for f in r.failed]
        )


COMMANDS = [send]

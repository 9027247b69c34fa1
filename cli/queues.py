"""``durableq queue ...``: create, list, show, change, delete, purge and tag queues."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

import durableq
from durableq import RedriveAllowPolicy, RedrivePolicy, limits
from durableq.keyring import normalize_alias
from durableq.queue_settings import SETTINGS, Setting
from durableq.types import MESSAGE_STATES

from .base import CommandFailed, management, open_broker, open_queue, speaks
from .output import duration, emit, fields, json_option, table
from .parsing import (
    KEY_VALUE,
    REDRIVE_ALLOW,
    SETTING,
    format_redrive_allow_policy,
    format_redrive_policy,
)

F = TypeVar("F", bound=Callable[..., Any])


@click.group()
def queue() -> None:
    """Create, list, show, change, delete, purge and tag queues."""


def _option(setting: Setting) -> Callable[[F], F]:
    """The option of `queue create` for a queue setting, as the table declares it (the parameter
    gets the setting's name)."""
    flag, name, text = setting.option, setting.name, setting.description
    assert flag is not None
    if setting.kind is int:
        assert setting.low is not None and setting.high is not None and setting.unit is not None
        metavar = setting.unit.upper()
        help_text = f"{text}, {setting.low}-{setting.high} (default {setting.default})."
        return click.option(flag, name, type=int, metavar=metavar, help=help_text)
    if setting.kind is bool:
        return click.option(flag, name, is_flag=True, help=f"{text}.")
    if setting.choices is not None:
        return click.option(
            flag, name, type=click.Choice(setting.choices), help=f"{text} (default {setting.default})."
        )
    if setting.kind is RedriveAllowPolicy:
        return click.option(flag, name, type=REDRIVE_ALLOW, help=f"{text}.")
    if setting.kind is RedrivePolicy:  # --dlq NAME with --max-receives N
        dlq = click.option(
            flag,
            "dead_letter_queue",
            metavar="NAME",
            help="Dead-letter queue (it must exist, of the same type); needs --max-receives.",
        )
        receives = click.option(
            "--max-receives",
            "max_receive_count",
            type=int,
            help=f"Receives before a message moves to the {flag}, "
            f"{limits.MIN_MAX_RECEIVE_COUNT}-{limits.MAX_MAX_RECEIVE_COUNT}.",
        )
        return lambda command: dlq(receives(command))
    # kms_master_key_id: a key of the keyring, by its alias
    return click.option(flag, name, metavar="ALIAS", help=f"{text} (NAME or alias/NAME; `durableq keys`).")


def _options(command: F) -> F:
    """Every queue setting's option of `queue create`, in the table's order."""
    for setting in reversed([s for s in SETTINGS if s.option is not None]):
        command = _option(setting)(command)
    return command


#: The option of each library keyword `queue create` passes, for its error messages.
CREATE_WORDS = {
    **{s.name: s.option for s in SETTINGS if s.option is not None and s.settable},
    "dead_letter_queue": "--dlq",
    "max_receive_count": "--max-receives",
    "tags": "--tag",
}


@queue.command()
@click.argument("name")
@_options
@click.option("--tag", "tags", multiple=True, type=KEY_VALUE, help="A tag KEY=VALUE. Repeatable.")
@json_option
@speaks(**CREATE_WORDS)
@management("CreateQueue", "name", create=True)
def create(name: str, tags: tuple[tuple[str, str], ...], as_json: bool, **options: Any) -> None:
    """Create a queue (the database file too, if there is none yet).

    Creating a queue that exists with the same settings does nothing; with other
    settings it fails (change them with `queue set`).

    \b
      durableq queue create jobs-dlq
      durableq queue create jobs --visibility-timeout 60 --dlq jobs-dlq --max-receives 5
      durableq queue create orders.fifo --fifo --content-dedup --tag team=shop
      durableq queue create payments --history --history-retention 1209600
      durableq --keyring keys.json queue create orders --kms-key orders --large-payloads
    """
    dlq, max_receives = options.pop("dead_letter_queue"), options.pop("max_receive_count")
    if (dlq is None) != (max_receives is None):
        raise click.UsageError("--dlq and --max-receives go together")
    if dlq is not None:
        options["redrive_policy"] = RedrivePolicy(dlq, max_receives)
    if options["kms_master_key_id"] is not None:
        options["kms_master_key_id"] = f"alias/{normalize_alias(options['kms_master_key_id'])}"
    # Flags not given and options not given are settings not given (create_queue compares only those).
    given = {key: value for key, value in options.items() if value is not None and value is not False}
    broker = open_broker(create=True)
    existed = name in broker.list_queues(prefix=name)
    created = broker.create_queue(name, tags=dict(tags) or None, **given)
    description = _description(broker, created)
    kind = "FIFO" if created.fifo else "standard"
    extras = ", ".join(_features(description))
    text = f"queue {name} exists with these settings" if existed else f"created {kind} queue {name}"
    emit(
        as_json,
        {"name": name, "created": not existed, **description},
        text + (f" ({extras})" if extras else ""),
    )


def _features(description: dict[str, Any]) -> list[str]:
    """What `queue create` mentions besides the type: large payloads, encryption."""
    features = ["large payloads"] if description["large_payloads"] else []
    if description["kms_master_key_id"]:
        features.append(f"encrypted with {description['kms_master_key_id']}")
    elif description["sqs_managed_sse_enabled"]:
        features.append(f"encrypted with alias/{limits.MANAGED_KEY_ALIAS}")
    return features


@queue.command("list")
@click.option("--prefix", default="", help="Only queues whose names start with this.")
@json_option
def list_queues(prefix: str, as_json: bool) -> None:
    """List the queues (names, sorted); temporary queues are marked with their idle timeout
    (the JSON output stays a list of names: `queue show` has the idle timeout).

    \b
      durableq queue list --prefix orders
    """
    broker = open_broker()
    names = broker.list_queues(prefix=prefix)
    emit(as_json, names, lambda: "\n".join(_listed(broker, name) for name in names) or "no queues")


def _listed(broker: durableq.Broker, name: str) -> str:
    try:
        idle_timeout = broker.get_queue(name).attributes().get("idle_timeout")
    except durableq.QueueDoesNotExist:  # deleted since the list was read
        return f"{name}  (deleted)"
    return name if idle_timeout is None else f"{name}  (temporary, idle timeout {idle_timeout} s)"


def _description(broker: durableq.Broker, target: durableq.Queue) -> dict[str, Any]:
    """A queue's settings, tags, dead-letter sources and depth: what `queue show` prints."""
    return {
        **target.attributes(),
        "tags": target.tags(),
        "dead_letter_source_queues": broker.dead_letter_source_queues(target.name),
        "stats": target.stats(),
    }


@queue.command()
@click.argument("name")
@json_option
def show(name: str, as_json: bool) -> None:
    """Show a queue's settings, tags, dead-letter sources and depth.

    \b
      durableq queue show jobs
    """
    broker = open_broker()
    description = _description(broker, broker.get_queue(name))
    emit(as_json, description, lambda: _description_text(description, broker.payload_dir))


def _large_payloads(enabled: bool, payload_dir: Path | None) -> str:
    if not enabled:
        return "no"
    return (
        f"yes, stored in {payload_dir}"
        if payload_dir
        else "yes (this broker has no payload store: --payload-dir)"
    )


#: Keys of a description that `queue show` prints in a form of its own.
_SHOWN_APART = (
    *("name", "fifo", "redrive_policy", "redrive_allow_policy", "created_at", "last_modified"),
    *("tags", "dead_letter_source_queues", "stats"),
    *("large_payloads", "kms_master_key_id", "sqs_managed_sse_enabled", "kms_data_key_reuse_period"),
)


def _encryption(description: dict[str, Any]) -> str:
    """A queue's encryption in words: its master key and how long a data key is used, or none."""
    key = description["kms_master_key_id"]
    if not key and description["sqs_managed_sse_enabled"]:
        key = f"alias/{limits.MANAGED_KEY_ALIAS} (SQS-managed)"
    if not key:
        return "none"
    return f"{key}; each data key is used for {description['kms_data_key_reuse_period']} s"


def _description_text(description: dict[str, Any], payload_dir: Path | None) -> str:
    stats: durableq.QueueStats = description["stats"]
    settings = [(key, value) for key, value in description.items() if key not in _SHOWN_APART]
    return fields(
        [
            ("name", description["name"]),
            ("type", "FIFO" if description["fifo"] else "standard"),
            *settings,
            ("large_payloads", _large_payloads(description["large_payloads"], payload_dir)),
            ("encryption", _encryption(description)),
            ("redrive_policy", format_redrive_policy(description["redrive_policy"])),
            ("redrive_allow_policy", format_redrive_allow_policy(description["redrive_allow_policy"])),
            ("dead_letter_source_queues", ", ".join(description["dead_letter_source_queues"]) or "-"),
            ("tags", ", ".join(f"{k}={v}" for k, v in description["tags"].items()) or "-"),
            ("created_at", description["created_at"]),
            ("last_modified", description["last_modified"]),
            *((state.name, getattr(stats, state.count)) for state in MESSAGE_STATES),
            ("oldest_message_age", duration(stats.oldest_message_age)),
        ]
    )


@queue.command("set")
@click.argument("name")
@click.argument("settings", metavar="KEY=VALUE...", nargs=-1, required=True, type=SETTING)
@json_option
@management("SetQueueAttributes", "name")
def set_settings(name: str, settings: tuple[tuple[str, Any], ...], as_json: bool) -> None:
    """Change a queue's settings.

    Keys (dashes or underscores): visibility_timeout, delay_seconds,
    retention_period, receive_wait_time, maximum_message_size, and for FIFO
    queues content_based_deduplication (true/false) and deduplication_scope
    (queue/messageGroup); history (true/false), history_retention; redrive_policy=DLQ:MAX_RECEIVES or none;
    redrive_allow_policy=allowAll, denyAll, byQueue:Q1,Q2 or none; any other
    setting the library has (an unknown key fails with the list of them).
    Values: true/false are booleans, integers are numbers, the rest is text.

    \b
      durableq queue set jobs visibility-timeout=120 redrive_policy=jobs-dlq:5
    """
    target = open_queue(name)
    target.set_attributes(**dict(settings))
    emit(as_json, target.attributes(), f"updated queue {name}")


@queue.command("delete")
@click.argument("name")
@click.option("--yes", "-y", is_flag=True, help="Do not ask, even on a terminal.")
@json_option
@management("DeleteQueue", "name")
def delete_queue(name: str, yes: bool, as_json: bool) -> None:
    """Delete a queue and all its messages (the name can be used again at once); says how many.

    On a terminal, a queue that holds messages is deleted only once you say so
    (--yes: without asking). A script (stdin not a terminal) is not asked: the
    queue is deleted, as SQS's DeleteQueue does, and the count printed.
    """
    held = _held(open_queue(name).stats())
    if held and not yes and sys.stdin.isatty():
        if not click.confirm(f"Delete queue {name} and its {_messages(held)}?", err=True):
            raise CommandFailed(CANCELLED, f"queue {name} was not deleted (it holds {_messages(held)})")
    # Counted just before: messages sent in between go with the queue too.
    open_broker().delete_queue(name)
    said = f"and its {_messages(held)}" if held else "(it held no messages)"
    emit(as_json, {"deleted": name, "messages": held}, f"deleted queue {name} {said}")


#: The code of a `queue delete` its user declined.
CANCELLED = "Cancelled"


def _held(stats: durableq.QueueStats) -> int:
    """Every message of the queue, whatever its state."""
    return sum(getattr(stats, state.count) for state in MESSAGE_STATES)


def _messages(count: int) -> str:
    return f"{count:,} message" + ("" if count == 1 else "s")


@queue.command()
@click.argument("name")
@json_option
@management("PurgeQueue", "name")
def purge(name: str, as_json: bool) -> None:
    """Remove every message of a queue, in every state (FIFO: forget deduplication ids too)."""
    open_queue(name).purge()
    emit(as_json, {"purged": name}, f"purged queue {name}")


@queue.command("tags")
@click.argument("name")
@json_option
def list_tags(name: str, as_json: bool) -> None:
    """List a queue's tags."""
    tags = open_queue(name).tags()
    emit(as_json, tags, lambda: table(("key", "value"), sorted(tags.items())) if tags else "no tags")


@queue.command()
@click.argument("name")
@click.argument("tags", metavar="KEY=VALUE...", nargs=-1, required=True, type=KEY_VALUE)
@json_option
@management("TagQueue", "name")
def tag(name: str, tags: tuple[tuple[str, str], ...], as_json: bool) -> None:
    """Add or replace tags of a queue.

    \b
      durableq queue tag jobs team=imaging cost-center=42
    """
    target = open_queue(name)
    target.tag(**dict(tags))
    emit(as_json, target.tags(), f"tagged queue {name}")


@queue.command()
@click.argument("name")
@click.argument("keys", metavar="KEY...", nargs=-1, required=True)
@json_option
@management("UntagQueue", "name")
def untag(name: str, keys: tuple[str, ...], as_json: bool) -> None:
    """Remove tags from a queue (keys it does not have are ignored)."""
    target = open_queue(name)
    target.untag(*keys)
    emit(as_json, target.tags(), f"untagged queue {name}")


COMMANDS = [queue]

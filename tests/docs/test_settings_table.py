"""The table of queue settings on the Configuration page (docs/configuration.md) is the table the code
declares (durableq/queue_settings.py).

On a mismatch the assertion shows the table to paste between the page's markers.
"""

from __future__ import annotations

from durableq.queue_settings import SETTINGS, Setting

from .shell import ROOT

PAGE = ROOT / "docs" / "configuration.md"

BEGIN = (
    "<!-- queue settings: generated from durableq/queue_settings.py by tests/docs/test_settings_table.py -->"
)
END = "<!-- end of queue settings -->"


def _type(setting: Setting) -> str:
    name = setting.kind.__name__
    return f"`{name}` or None" if setting.default is None else f"`{name}`"


def _allowed(setting: Setting) -> str:
    if setting.low is not None and setting.high is not None:
        return f"{setting.low:,} – {setting.high:,} {setting.unit}"
    if setting.choices is not None:
        return ", ".join(f"`{choice}`" for choice in setting.choices)
    return ""


def _default(setting: Setting) -> str:
    if setting.default is None:
        return "none"
    return f"{setting.default:,}" if setting.kind is int else f"`{setting.default}`"


def _meaning(setting: Setting) -> str:
    return setting.description + ("" if setting.settable else "; given at creation only")


def table() -> str:
    rows = [
        "| setting | type | default | allowed | SQS attribute | `queue create` | meaning |",
        "|---|---|---|---|---|---|---|",
    ]
    for s in SETTINGS:
        cells = [
            f"`{s.name}`",
            _type(s),
            _default(s),
            _allowed(s),
            f"`{s.sqs}`" if s.sqs else "",
            f"`{s.option}`" if s.option else "",
            _meaning(s),
        ]
        rows.append("| " + " | ".join(cells) + " |")
    return "\n".join(rows)


def test_the_configuration_page_has_the_declared_table_of_queue_settings() -> None:
    page = PAGE.read_text(encoding="utf-8")
    assert BEGIN in page and END in page, f"{PAGE.name} needs the markers {BEGIN} and {END}"
    shown = page.split(BEGIN, 1)[1].split(END, 1)[0].strip()
    assert shown == table(), f"paste this table between the markers of {PAGE.name}:\n{table()}"

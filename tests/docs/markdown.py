"""Reading the examples out of the markdown pages, and comparing what they print with what it shows.

A fenced block right after a line ``<!-- output -->`` is what the code block
before it prints; after ``<!-- output: excerpt -->`` it is a contiguous part of
that.  Output is compared line by line with runs of spaces counted as one, and
with the values that differ from run to run (ids, receipt handles, times, ages,
byte counts) matched by their shape.  Ids and receipt handles are bound: once
the docs' ``6b0b3190-...`` matched the real id, the same real id must appear
wherever the docs show ``6b0b3190-...`` again, and a later command that names it
is run with the real one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

_FENCE = re.compile(r"^```(\S*)\s*$")
_MARKER = re.compile(r"^<!-- output(?:: (excerpt))? -->$")
_HEADING = re.compile(r"^#{1,6} (.*)$")
_REGION = re.compile(r"^<!-- (\w+):(start|end) -->$")


@dataclass
class Block:
    """A fenced block: its language, its text, where it is, and how it relates to the block before."""

    lang: str
    text: str
    page: str  # the file, relative to the repository's root
    line: int
    section: str
    region: str | None
    output_of_previous: str | None = None  # "output" or "excerpt" when it shows the previous block's output
    output: Block | None = field(default=None, repr=False)  # for a code block: its shown output

    @property
    def label(self) -> str:
        return f"{self.page}:{self.line} ({self.section})"


def pages(root: Path) -> list[Path]:
    """The documents whose examples the tests run: the README and every page of the site."""
    return [root / "README.md", *sorted((root / "docs").rglob("*.md"))]


def blocks(path: Path, root: Path | None = None) -> list[Block]:
    """Every fenced block of ``path``, each code block linked to the output block that follows it."""
    page = str(path.relative_to(root)) if root is not None else path.name
    found: list[Block] = []
    section, region, marker = "", None, None
    lines = path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if heading := _HEADING.match(line):
            section = heading.group(1)
        elif edge := _REGION.match(line):
            region = edge.group(1) if edge.group(2) == "start" else None
        elif mark := _MARKER.match(line):
            marker = mark.group(1) or "output"
        elif fence := _FENCE.match(line):
            end = next(j for j in range(i + 1, len(lines)) if lines[j].startswith("```"))
            text = "\n".join(lines[i + 1 : end]) + "\n"
            block = Block(fence.group(1), text, page, i + 1, section, region)
            if marker is not None:
                block.output_of_previous = marker
                assert found, f"{path}:{i + 1}: an output block must follow a code block"
                found[-1].output = block
            found.append(block)
            marker = None
            i = end
        elif line.strip():
            marker = None  # a marker applies to the block right after it
        i += 1
    return found


# -- comparing output ------------------------------------------------------------------------------

#: Values that differ between runs, by kind: (pattern, bound).
VARYING = {
    "id": (r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", True),
    "receipt": (r"\d+\.\d+\.[0-9a-f]{16}\.[0-9a-f]{16}", True),
    "time": (r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d+)?(?: UTC|Z|[+-]\d\d:\d\d)?", False),
    "age": (r"(?<![\w.])\d+[smhd](?: \d+[smh])?(?![\w.])|(?<=oldest_message_age=)\d+", False),
    "bytes": (r"(?<=\()\d[\d,]* bytes(?=\))", False),
}
_VARYING = re.compile("|".join(f"(?P<{kind}>{pattern})" for kind, (pattern, _) in VARYING.items()))


class Bindings(dict[str, str]):
    """The docs' ids and receipt handles, and the real values they stand for in this run."""

    def substitute(self, text: str) -> str:
        """``text`` (a command from the docs) with every bound value replaced by the real one."""
        for shown, real in self.items():
            text = text.replace(shown, real)
        return text


def _pattern(expected: str) -> tuple[str, list[tuple[str, str]]]:
    """A regex for one line of expected output, and the varying values in it (kind, shown text)."""
    parts, tokens, position = [], [], 0
    for match in _VARYING.finditer(expected):
        parts.append(_literal(expected[position : match.start()]))
        kind = match.lastgroup
        assert kind is not None
        parts.append(f"({VARYING[kind][0]})")
        tokens.append((kind, match.group()))
        position = match.end()
    parts.append(_literal(expected[position:]))
    return "".join(parts), tokens


def _literal(text: str) -> str:
    return " +".join(re.escape(piece) for piece in re.split(r" +", text))


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.rstrip("\n").split("\n")] if text.strip() else []


def compare(expected: str, actual: str, bindings: Bindings, *, excerpt: bool = False, what: str = "") -> None:
    """Assert that ``actual`` is what ``expected`` shows (or, with ``excerpt``, contains it)."""
    shown, printed = _lines(expected), _lines(actual)
    patterns = [_pattern(line) for line in shown]
    starts = range(len(printed) - len(shown) + 1) if excerpt else [0]
    if not excerpt:
        assert len(printed) == len(shown), _diff(what, expected, actual)
    for start in starts:
        matches = [re.fullmatch(p, line) for (p, _), line in zip(patterns, printed[start:])]
        if all(matches):
            break
    else:
        raise AssertionError(_diff(what, expected, actual))
    for (_, tokens), match in zip(patterns, matches):
        assert match is not None
        for (kind, shown_value), real in zip(tokens, match.groups()):
            if not VARYING[kind][1]:
                continue
            if shown_value not in bindings:
                others = [s for s, r in bindings.items() if r == real]
                assert not others, f"{what}: {real} stands for {others[0]} already, not also {shown_value}"
                bindings[shown_value] = real
            bound = bindings[shown_value]
            assert bound == real, (
                f"{what}: the docs show {shown_value} again, but this run printed {real}, not {bound}"
            )


def _diff(what: str, expected: str, actual: str) -> str:
    return f"{what}: the docs show\n{expected}\nbut it printed\n{actual}"

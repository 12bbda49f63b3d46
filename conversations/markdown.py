"""Quoting untrusted text into Markdown so that it reads as the text it is.

Titles, messages, tool names and summaries come from agents and the people they
talk to. Put into a Markdown export unescaped, `<img src=x onerror=…>` becomes
HTML in whatever renders the file, `![](https://tracker/?q=…)` an image that
calls out, and `# ` or `| ` rewrite the document's structure. So every quoted
string is escaped: HTML's `& < >` as entities, Markdown's punctuation with a
backslash, and line-start markers (`#`, `>`, `-`, `1.`, …) so a line cannot
become a heading, a quote or a list. Code spans and fences are made longer than
any run of backticks inside them, so content cannot close them.
"""

import re

# Punctuation that can open a Markdown construct anywhere in a line.
_INLINE = re.compile(r"([\\`*_\[\]{}()!|~#+\-.:])")
# NUL is refused on the way in; a row stored before that rule may still hold one, and a
# NUL byte makes many tools take the file for binary.
_HTML = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "\x00": "\ufffd"})


def escape(text: str) -> str:
    """One line of untrusted text, to be shown as itself inside Markdown."""
    text = _INLINE.sub(r"\\\1", str(text))
    return text.translate(_HTML)  # one pass in C: a character-by-character join cost most of an export


def escape_line(text: str) -> str:
    """escape() of a single line (newlines and runs of spaces folded)."""
    return escape(" ".join(str(text).split()))


def quote(text: str) -> str:
    """Untrusted multi-line text as a block quote, every line escaped."""
    lines = str(text).splitlines() or [""]
    # Leading spaces are kept visible (four would otherwise start a code block).
    out = []
    for line in lines:
        stripped = line.lstrip(" ")
        body = "&#32;" * (len(line) - len(stripped)) + escape(stripped)
        out.append("> " + body if body else ">")
    return "\n".join(out) + "\n"


def code(text: str) -> str:
    """An inline code span holding `text` exactly (no escapes are read inside code)."""
    text = " ".join(str(text).replace("\x00", "\ufffd").splitlines())
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def fence(text: str, lang: str = "") -> str:
    """A fenced block longer than any run of backticks inside, so content cannot close it."""
    text = text.replace("\x00", "\ufffd")
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * max(3, longest + 1)
    return f"{ticks}{re.sub(r'[^A-Za-z0-9_+-]', '', lang)}\n{text}\n{ticks}\n"

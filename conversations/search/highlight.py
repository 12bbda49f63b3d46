"""Snippets with the matched words marked, made by SQLite's own FTS5.

The index on SQLite is contentless (it keeps no copy of the text), so FTS5's
snippet() cannot run on it. Instead the page's hits are put into a throwaway
in-memory FTS5 table with the same tokenizer, and snippet() runs there with the
same MATCH expression: what is marked is exactly what the tokenizer matched
(stems, prefixes, phrases). On PostgreSQL (its own English stemmer) the marks
follow SQLite's stemmer, which agrees on nearly every word; a hit it does not
mark shows its first words.

A snippet is a list of (text, marked) pieces, never HTML: the page escapes each
piece, so nothing from a message can run.
"""

import json
import sqlite3
import threading

from .query import Query

START, END, ELLIPSIS = "\x02", "\x03", "…"
SNIPPET_TOKENS = 24
# The text given to the highlighter: a hit deep inside a huge message shows its start.
MAX_CHARS = 100_000
PLAIN_CHARS = 200

_local = threading.local()


def _connection() -> sqlite3.Connection:
    conn = getattr(_local, "conn", None)
    if conn is None:
        conn = sqlite3.connect(":memory:", check_same_thread=True)
        conn.execute(
            "CREATE VIRTUAL TABLE hl USING fts5(body, tokenize='porter unicode61 remove_diacritics 2')"
        )
        _local.conn = conn
    return conn


def index_text(raw: str) -> str:
    """The text the index holds for a stored message (the migration's SQL, in Python)."""
    try:
        data = json.loads(raw)
    except ValueError:
        return raw
    if not isinstance(data, dict):
        return raw
    parts = []
    if data.get("text") is not None:
        parts.append(_scalar(data["text"]))
    content = data.get("content")
    if isinstance(content, str):
        parts.append(content)
    elif isinstance(content, list):
        parts.append("\n".join(str(b.get("text", "")) for b in content
                               if isinstance(b, dict) and b.get("type") == "text"))
    if data.get("name") is not None:
        parts.append(_scalar(data["name"]))
    calls = data.get("tool_calls")
    if isinstance(calls, list):
        lines = []
        for call in calls:
            if isinstance(call, dict):
                args = call.get("arguments", "")
                lines.append(f"{_scalar(call.get('name', ''))} {_scalar(args)}")
        parts.append("\n".join(lines))
    return "\n".join(parts)


def _scalar(value) -> str:
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def snippets(texts: list[str], query: Query) -> list[list[tuple[str, bool]]]:
    """One snippet per text, in order."""
    if not texts:
        return []
    conn = _connection()
    cleaned = [t.replace(START, " ").replace(END, " ")[:MAX_CHARS] for t in texts]
    found: dict[int, str] = {}
    try:
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO hl(rowid, body) VALUES (?, ?)", list(enumerate(cleaned)))
        rows = conn.execute(
            f"SELECT rowid, snippet(hl, 0, ?, ?, ?, {SNIPPET_TOKENS}) FROM hl WHERE hl MATCH ?",
            (START, END, ELLIPSIS, query.fts5(with_exclusions=False)),
        ).fetchall()
        found = dict(rows)
    except sqlite3.Error:
        found = {}
    finally:
        conn.execute("ROLLBACK")
    return [_pieces(found[i]) if i in found else _plain(t) for i, t in enumerate(cleaned)]


def scores(texts: list[str], query: Query) -> list[float]:
    """How well each text matches `query`: FTS5's bm25 over these texts (negated, so
    higher is better; 0 for a text the tokenizer does not match), in order. The word
    weights come from the texts given, not from the whole index: the ranking of hits
    among themselves (conversations.search.ranked)."""
    if not texts:
        return []
    conn = _connection()
    found: dict[int, float] = {}
    try:
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO hl(rowid, body) VALUES (?, ?)",
                         [(i, t[:MAX_CHARS]) for i, t in enumerate(texts)])
        found = dict(conn.execute("SELECT rowid, -bm25(hl) FROM hl WHERE hl MATCH ?",
                                  (query.fts5(with_exclusions=False),)).fetchall())
    except sqlite3.Error:
        found = {}
    finally:
        conn.execute("ROLLBACK")
    return [found.get(i, 0.0) for i in range(len(texts))]


def _pieces(marked: str) -> list[tuple[str, bool]]:
    pieces = []
    for i, chunk in enumerate(marked.split(START)):
        if i == 0:
            if chunk:
                pieces.append((chunk, False))
            continue
        hit, _, rest = chunk.partition(END)
        if hit:
            pieces.append((hit, True))
        if rest:
            pieces.append((rest, False))
    return pieces


def _plain(text: str) -> list[tuple[str, bool]]:
    text = " ".join(text.split())
    return [(text[:PLAIN_CHARS] + (ELLIPSIS if len(text) > PLAIN_CHARS else ""), False)]

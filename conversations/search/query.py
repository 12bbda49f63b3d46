"""The search box's small query language, parsed once and compiled for each database.

    refund store            both words (stems: "refunds", "refunded" match too)
    "full refund"           the phrase
    refu*                   a word starting with "refu"
    refund OR credit        either word (OR binds tighter than the implicit AND)
    -voucher  NOT voucher   rows without the word

Everything else is a plain word. A query that cannot mean anything (an unclosed
quote, a dangling OR, only exclusions, nothing to look for) raises InvalidQuery,
which every door answers with a 400 naming the `q` field: the database never sees
a string it could fail on, because each term reaches it as a quoted literal
(FTS5) or a bound parameter (PostgreSQL).
"""

import re
from dataclasses import dataclass

from conversations.errors import StoreError

MAX_QUERY = 300
MAX_TERMS = 16
# A prefix shorter than this matches a large part of the vocabulary.
MIN_PREFIX = 2
_WORD_CHAR = re.compile(r"\w", re.UNICODE)


class InvalidQuery(StoreError):
    code = "invalid_query"
    status = 400

    def __init__(self, message: str):
        super().__init__(message, field="q")


@dataclass(frozen=True)
class Term:
    text: str
    phrase: bool = False
    prefix: bool = False

    def fts5(self) -> str:
        quoted = '"' + self.text.replace('"', '""') + '"'
        return quoted + "*" if self.prefix else quoted


@dataclass(frozen=True)
class Query:
    # All of these clauses, each one any of its terms …
    clauses: tuple[tuple[Term, ...], ...]
    # … and none of these.
    excluded: tuple[Term, ...] = ()

    @property
    def terms(self) -> list[Term]:
        return [t for clause in self.clauses for t in clause]

    def fts5(self, *, with_exclusions: bool = True) -> str:
        """The FTS5 MATCH expression (every term a quoted string: no FTS5 syntax gets through)."""
        parts = []
        for clause in self.clauses:
            inner = " OR ".join(t.fts5() for t in clause)
            parts.append(f"({inner})" if len(clause) > 1 else inner)
        expression = " AND ".join(parts)
        if with_exclusions and self.excluded:
            expression = f"({expression}) NOT ({' OR '.join(t.fts5() for t in self.excluded)})"
        return expression

    def tsquery_sql(self, config: str = "english") -> tuple[str, list[str]]:
        """A PostgreSQL tsquery expression and its parameters."""
        params: list[str] = []

        def one(term: Term) -> str:
            if term.prefix:
                params.append("'" + term.text.replace("'", "''").replace("\\", "\\\\") + "':*")
                return f"to_tsquery('{config}', %s)"
            params.append(term.text)
            return f"phraseto_tsquery('{config}', %s)"

        clauses = []
        for clause in self.clauses:
            alternatives = [one(t) for t in clause]
            clauses.append("(" + " || ".join(alternatives) + ")")
        sql = " && ".join(clauses)
        if self.excluded:
            sql = f"({sql}) && !!(" + " || ".join(one(t) for t in self.excluded) + ")"
        return sql, params


_TOKEN = re.compile(r'\s*(?:(-)?"([^"]*)("?)|(\S+))')


def parse_query(raw) -> Query:
    """Parse the search box; raises InvalidQuery with a sentence a person can act on."""
    text = _query_text(raw)
    clauses: list[list[Term]] = []
    excluded: list[Term] = []
    pending_or = False
    negate_next = False
    pos = 0
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            break
        pos = match.end()
        minus, phrase, closing, word = match.groups()
        if phrase is not None:
            if not closing:
                raise InvalidQuery('a quote is not closed: put a " after the phrase')
            term = _term(phrase, phrase=True)
            negate = bool(minus) or negate_next
        elif word == "OR":
            if not clauses or pending_or or negate_next:
                raise InvalidQuery("OR needs a word on each side, as in: refund OR credit")
            pending_or = True
            continue
        elif word == "NOT":
            if negate_next or pending_or:
                raise InvalidQuery("NOT needs a word after it, as in: refund NOT voucher")
            negate_next = True
            continue
        else:
            term, negate = _word(word, negate_next)
        negate_next = False
        if negate:
            if pending_or:
                raise InvalidQuery("OR cannot join an excluded word; exclude words on their own")
            excluded.append(term)
            continue
        if pending_or:
            clauses[-1].append(term)
            pending_or = False
        else:
            clauses.append([term])
    if pending_or:
        raise InvalidQuery("OR needs a word on each side, as in: refund OR credit")
    if negate_next:
        raise InvalidQuery("NOT needs a word after it, as in: refund NOT voucher")
    return _query(clauses, excluded)


def _query_text(raw) -> str:
    """The search box's text, stripped, once it is text of a searchable length."""
    if raw is None:
        raw = ""
    if not isinstance(raw, str):
        raise InvalidQuery("q must be text")
    if "\x00" in raw:
        raise InvalidQuery("q must not contain NUL characters")
    text = raw.strip()
    if not text:
        raise InvalidQuery("type something to search for")
    if len(text) > MAX_QUERY:
        raise InvalidQuery(f"the search is {len(text)} characters; at most {MAX_QUERY}")
    return text


def _word(word: str, negate: bool) -> tuple[Term, bool]:
    """A bare word (-word excludes it, word* is a prefix) and whether it is excluded."""
    if word.startswith("-") and len(word) > 1:
        negate, word = True, word[1:]
    if '"' in word:
        raise InvalidQuery('a quote is not closed: put a " after the phrase')
    prefix = word.endswith("*")
    body = word.rstrip("*") if prefix else word
    if "*" in body:
        raise InvalidQuery(f"* goes at the end of a word (as in refu*), not inside {word[:40]!r}")
    return _term(body, prefix=prefix), negate


def _query(clauses: list[list[Term]], excluded: list[Term]) -> Query:
    if not clauses:
        raise InvalidQuery("a search needs at least one word to look for, not only words to leave out")
    count = sum(len(c) for c in clauses) + len(excluded)
    if count > MAX_TERMS:
        raise InvalidQuery(f"the search has {count} words; at most {MAX_TERMS}")
    return Query(clauses=tuple(tuple(c) for c in clauses), excluded=tuple(excluded))


def _term(text: str, *, phrase: bool = False, prefix: bool = False) -> Term:
    text = " ".join(text.split())
    if not _WORD_CHAR.search(text):
        what = "the phrase" if phrase else "the word"
        shown = text or ('""' if phrase else "*")
        raise InvalidQuery(f"{what} {shown[:40]!r} has no letters or digits to search for")
    if prefix:
        if not re.fullmatch(r"\w+", text):
            raise InvalidQuery(f"a prefix search (word*) works on one plain word, not {text[:40]!r}")
        if len(text) < MIN_PREFIX:
            raise InvalidQuery(f"a prefix needs at least {MIN_PREFIX} letters before the *")
    return Term(text=text, phrase=phrase, prefix=prefix)

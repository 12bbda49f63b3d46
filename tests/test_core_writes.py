"""No sub-app writes the core's tables itself: every such write is a named function of the core.

The core's tables (conversations, messages, checkpoints, projects, keys, idempotency keys,
the audit log …) carry invariants the core keeps: rows sealed into chains, positions
handed out by the store, deletion only of a marked conversation. A sub-app that runs its
own `DELETE FROM conversations_message` or `Conversation.objects.filter(…).update(…)`
keeps them by luck; one that calls `deletion.delete_rows` or `rows.set_search_vectors`
keeps them by the core's word, and a change to the rule changes one place.

Every module of every sub-app (migrations aside: they put triggers on core tables, by
design) is read, not run. A write is
- a raw SQL string (plain or f-string) that deletes from, updates or inserts into a core
  table: named literally, as `{Model._meta.db_table}` of a core model or a name assigned
  from one, or as `{model._meta.db_table}` of a model passed in (which can be a core one);
- `.update(`, `.delete(`, `.create(`, `.bulk_create(` … on a query rooted at a core model.
What it cannot see: an instance's `.save()`, and SQL assembled with `%` or `.format()`.
"""

import ast
import re
from pathlib import Path

import pytest
from django.apps import apps

from tests.ast_support import attribute_chain

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.database_independent
SUB_APPS = sorted(p.parent for p in (ROOT / "conversations").glob("*/apps.py"))
ORM_WRITES = {"update", "delete", "create", "bulk_create", "bulk_update", "get_or_create", "update_or_create"}
SQL_WRITE = re.compile(r"\b(DELETE\s+FROM|UPDATE|INSERT\s+(?:OR\s+\w+\s+)?INTO|REPLACE\s+INTO)\s+[\"`]?"
                       r"(\{[^}]*\}|[A-Za-z_][\w.]*)", re.IGNORECASE)


def core_tables() -> dict[str, str]:
    """The core's models by class name, with their tables."""
    models = apps.get_app_config("conversations").get_models(include_auto_created=True)
    return {model.__name__: model._meta.db_table for model in models}


class _Module:
    """What one module's names stand for: core models, classes, and names bound to a table."""

    def __init__(self, tree: ast.AST, core: dict[str, str]):
        self.core, self.tables = core, set(core.values())
        self.models, self.classes, self.bound = set(), set(), {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    name = alias.asname or alias.name
                    if node.module == "conversations.models" and alias.name in core:
                        self.models.add(name)
                    self.classes.add(name)
            elif isinstance(node, ast.ClassDef):
                self.classes.add(node.name)
        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                for target, value in _pairs(node):
                    self.bound.setdefault(target, value)

    def names_core_table(self, expr: ast.expr, depth: int = 0) -> bool:
        """Whether `expr` (a placeholder of an f-string) is, or can be, a core table's name."""
        if isinstance(expr, ast.Constant):
            return expr.value in self.tables
        if isinstance(expr, ast.Name):
            value = self.bound.get(expr.id)
            return value is not None and depth < 3 and self.names_core_table(value, depth + 1)
        chain = attribute_chain(expr)
        if chain and chain[-2:] == ["_meta", "db_table"] and len(chain) == 3:
            owner = chain[0]
            return owner in self.models or owner not in self.classes  # a model passed in can be a core one
        return False

    def rooted_at_core_model(self, node: ast.expr) -> bool:
        while isinstance(node, ast.Attribute | ast.Call | ast.Subscript):
            node = node.func if isinstance(node, ast.Call) else node.value
        return isinstance(node, ast.Name) and node.id in self.models


def _pairs(node: ast.Assign):
    for target in node.targets:
        if isinstance(target, ast.Name):
            yield target.id, node.value
        elif isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
            for name, value in zip(target.elts, node.value.elts, strict=False):
                if isinstance(name, ast.Name):
                    yield name.id, value


def _sql_pieces(node) -> tuple[str, dict[str, ast.expr]] | None:
    """A string's text, its f-string placeholders replaced by `{0}`, `{1}` … (returned too)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value, {}
    if not isinstance(node, ast.JoinedStr):
        return None
    text, holes = [], {}
    for part in node.values:
        if isinstance(part, ast.Constant):
            text.append(str(part.value))
        else:
            holes[f"{{{len(holes)}}}"] = part.value
            text.append(f"{{{len(holes) - 1}}}")
    return "".join(text), holes


def direct_writes(source: str, core: dict[str, str]) -> list[str]:
    """Each direct write to a core table in one module's source, as `line: what`."""
    tree = ast.parse(source)
    module = _Module(tree, core)
    # An f-string's pieces are read with it, not again on their own.
    pieces_of_fstrings = {id(part) for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)
                          for part in ast.walk(node) if part is not node}
    found = []
    for node in ast.walk(tree):
        if id(node) in pieces_of_fstrings:
            continue
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ORM_WRITES:
            if module.rooted_at_core_model(node.func.value):
                found.append(f"{node.lineno}: {ast.unparse(node.func)[:90]}")
            continue
        pieces = _sql_pieces(node)
        if pieces is None:
            continue
        text, holes = pieces
        for match in SQL_WRITE.finditer(text):
            target = match.group(2)
            expr = holes.get(target, ast.Constant(target.split(".")[-1]))
            if module.names_core_table(expr):
                found.append(f"{node.lineno}: {match.group(1)} {ast.unparse(expr) if target in holes else target}")
    return sorted(found, key=lambda where: int(where.split(":")[0]))


def _sub_app_modules():
    for app in SUB_APPS:
        for path in sorted(app.rglob("*.py")):
            if "migrations" not in path.relative_to(app).parts:
                yield path


def test_it_finds_no_sub_app_module_writing_a_core_table_itself():
    core = core_tables()
    found = [f"{path.relative_to(ROOT)}:{where}" for path in _sub_app_modules()
             for where in direct_writes(path.read_text(), core)]
    assert found == [], "call a function of the core (conversations/deletion.py, rows.py, store.py) instead"


def test_it_reads_every_sub_app():
    names = {path.relative_to(ROOT / "conversations").parts[0] for path in _sub_app_modules()}
    assert {"retention", "search", "imports", "ledger", "facts"} <= names


# The writes this check was written against (retention's pruning and search's lineage did
# them before the core had a name for them), and what a sub-app may do with its own tables.
WRITES = '''
from conversations.models import Conversation, Message as M
from .models import BorrowedRows, MessageVector
_MSG, _VEC = M._meta.db_table, MessageVector._meta.db_table
CONV = "conversations_conversation"

def mark(chunk, cutoff):
    Conversation.objects.filter(pk__in=chunk, received_at__lt=cutoff).update(deleting=True)

def rows(model, cursor, marks):
    table = model._meta.db_table
    cursor.execute(f"DELETE FROM {table} WHERE conversation_id IN ({marks}) LIMIT %s")
    cursor.execute(f"DELETE FROM {Conversation._meta.db_table} WHERE id IN ({marks}) AND deleting")
    cursor.execute(f"UPDATE {_MSG} SET search_tsv = search_message_tsvector(content) "
                   "WHERE conversation_id = %s")
    cursor.execute(f'INSERT INTO "{CONV}" (id) VALUES (%s)')
    cursor.execute("delete from conversations_checkpoint where conversation_id = %s")
    M.objects.filter(conversation_id=1).delete()
'''
OWN_WRITES = '''
from conversations.models import Message
from .models import BorrowedRows, MessageVector
_VEC = MessageVector._meta.db_table

def own(cursor, ids):
    cursor.execute(f"INSERT INTO {_VEC} (msg) VALUES (%s)")
    cursor.execute(f"DELETE FROM {MessageVector._meta.db_table} WHERE msg = %s")
    cursor.execute("SELECT 1 FROM conversations_message WHERE position = %s")
    BorrowedRows.objects.filter(source_id=1).delete()
    found = set(Message.objects.values_list("position", flat=True))
    found.update(ids)
'''


def test_it_finds_each_kind_of_direct_write():
    found = direct_writes(WRITES, core_tables())
    assert [line.split(":")[0] for line in found] == ["8", "12", "13", "14", "16", "17", "18"]
    assert "12: DELETE FROM table" in found and "14: UPDATE _MSG" in found


def test_it_lets_a_sub_app_write_its_own_tables_and_read_the_core():
    assert direct_writes(OWN_WRITES, core_tables()) == []

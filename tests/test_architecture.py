"""docs/ARCHITECTURE.md names every plug-in point a sub-app registers at.

Every `AppConfig.ready()` under conversations/ is read (its syntax, not run): each call that
registers or connects something (`X.register(…)`, `X.register_*(…)`, `X.connect(…)`, the owned
tables' `register(…)`) is a plug-in point, named as the module it comes from has it
(`hooks.ledger_panel`, `owned.register`, `export.register_section`, `post_save`). A point
that ARCHITECTURE.md does not name in backticks fails the test: a contributor reading the
page would not know it exists.
"""

import ast
from pathlib import Path

import pytest

from tests.ast_support import attribute_chain

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.database_independent
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name → what it names: a module or signal by its own name (`core_export` →
    `export`, `post_save`), a registering function with its module (`owned.register`)."""
    names = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            module = (node.module or "").rsplit(".", 1)[-1]
            for alias in node.names:
                named = f"{module}.{alias.name}" if alias.name.startswith("register") else alias.name
                names[alias.asname or alias.name] = named
        elif isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name] = alias.name.rsplit(".", 1)[-1]
    return names


def plug_in_points(source: str) -> set[str]:
    """The points the ready() methods of one module's source register at."""
    tree = ast.parse(source)
    aliases = _aliases(tree)
    found = set()
    for cls in ast.walk(tree):
        if not isinstance(cls, ast.ClassDef):
            continue
        for fn in cls.body:
            if not (isinstance(fn, ast.FunctionDef) and fn.name == "ready"):
                continue
            for call in ast.walk(fn):
                if not isinstance(call, ast.Call):
                    continue
                chain = attribute_chain(call.func)
                if not chain:
                    continue
                last = chain[-1]
                if len(chain) == 1:
                    if last == "register" or last.startswith("register_"):
                        found.add(aliases.get(last, last))
                    continue
                if last not in ("register", "connect") and not last.startswith("register_"):
                    continue
                head = aliases.get(chain[0], chain[0]).split(".")
                full = [*head, *chain[1:]]
                if last == "connect" or (last == "register" and len(full) > 2):
                    full = full[:-1]  # the signal or hook itself
                found.add(".".join(full))
    return found


def test_every_plug_in_point_a_sub_app_registers_at_is_named_in_architecture_md():
    page = ARCHITECTURE.read_text()
    points = {}
    for path in sorted((ROOT / "conversations").rglob("apps.py")):
        for point in plug_in_points(path.read_text()):
            points.setdefault(point, []).append(str(path.relative_to(ROOT)))
    assert {"owned.register", "hooks.delete_conversation", "export.register_section"} <= set(points)  # not vacuous
    missing = {p: where for p, where in points.items() if f"`{p}`" not in page}
    assert not missing, f"plug-in points docs/ARCHITECTURE.md does not name: {missing}"


def test_it_names_each_kind_of_registration():
    source = '''
from django.db.models.signals import post_save
from conversations import hooks
from conversations.owned import register
from conversations import export as core_export


class C:
    def ready(self):
        from . import things
        register(things.Model)
        hooks.new_point.register(things.f)
        hooks.opened.connect(things.g)
        core_export.register_section(things.S)
        post_save.connect(things.h)
        things.not_a_registration()
'''
    assert plug_in_points(source) == {"owned.register", "hooks.new_point", "hooks.opened",
                                      "export.register_section", "post_save"}

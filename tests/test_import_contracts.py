"""What import-linter cannot see (it sees modules, not names): the rules of .importlinter's header.

- a sub-app takes only public names from the core and from other apps (a `_name` of another
  module is that module's business: ask for a public helper or a hook instead), whether it
  imports the name or reaches it through the module (`export._chunks`);
- no project import sits inside a function, where it would hide a cycle from the linter
  (Django's AppConfig.ready() excepted: models may not be imported before the registry is);
- every module of the core is listed in the "core imports no sub-app" contract, so a new
  core module cannot slip out of it.
"""

import ast
import configparser
from pathlib import Path

import pytest

pytestmark = pytest.mark.database_independent

ROOT = Path(__file__).resolve().parent.parent
PROJECT = ("conversations", "memoryui")
# The Django apps inside conversations/ (each a package with an AppConfig).
SUB_APPS = {p.parent.name for p in (ROOT / "conversations").glob("*/apps.py")}
# Composes every app (demo data), like memoryui/: neither core nor a sub-app (.importlinter says why).
COMPOSERS = {"conversations.demo"}
# gunicorn's config file, run by the gunicorn master before any Django: it reads the data folder
# from settings only when a hook needs it, so that loading the config creates nothing.
RUN_BEFORE_DJANGO = {"memoryui/gunicorn_conf.py"}


def _modules():
    for package in PROJECT:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                yield ".".join(path.relative_to(ROOT).with_suffix("").parts), path


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _private_names_taken(module: str, path: Path, tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _absolute(module, path, node)
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__") and source != module:
                    yield f"{path.relative_to(ROOT)}:{node.lineno} takes {alias.name} from {source}"


def _imports_inside_functions(path: Path, tree: ast.AST):
    ready = {id(fn) for cls in ast.walk(tree) if isinstance(cls, ast.ClassDef)
             for fn in cls.body if isinstance(fn, ast.FunctionDef) and fn.name == "ready"}
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef) or id(fn) in ready:
            continue
        for node in ast.walk(fn):
            names = []
            if isinstance(node, ast.ImportFrom):
                names = [("." * node.level) + (node.module or "")] if node.level else [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            for name in names:
                if name.startswith(".") or name.split(".")[0] in PROJECT:
                    yield f"{path.relative_to(ROOT)}:{node.lineno} imports {name} inside {fn.name}()"


def _sub_app(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "conversations" and len(parts) > 2 and parts[1] in SUB_APPS else None


def test_sub_apps_take_no_private_name_from_another_module():
    found = []
    for module, path in _modules():
        if _sub_app(module):
            found += _private_names_taken(module, path, ast.parse(path.read_text()))
    assert not found, "\n".join(found)


# Django's own API on model classes, underscored to keep clear of field names.
DJANGO_MODEL_API = {"_meta", "_base_manager", "_default_manager"}


def _owner(module: str) -> str:
    """The app a module belongs to: its sub-app, or the core (everything else of conversations)."""
    return f"conversations.{_sub_app(module)}" if _sub_app(module) else module.split(".")[0]


def _private_attributes_reached(module: str, path: Path, tree: ast.AST):
    """`alias._name` where the alias is a module (or a name) of another app."""
    aliases = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            source = _absolute(module, path, node)
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{source}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                top = alias.name.split(".")[0]
                aliases[alias.asname or top] = alias.name if alias.asname else top
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases):
            continue
        target = aliases[node.value.id]
        if node.attr.startswith("_") and not node.attr.startswith("__") and node.attr not in DJANGO_MODEL_API \
                and target.split(".")[0] in PROJECT and _owner(target) != _owner(module):
            yield f"{path.relative_to(ROOT)}:{node.lineno} reaches {node.attr} of {target}"


def test_no_app_reaches_a_private_name_of_another_through_its_module():
    found = []
    for module, path in _modules():
        if module not in COMPOSERS:
            found += _private_attributes_reached(module, path, ast.parse(path.read_text()))
    assert not found, "\n".join(found)


def test_it_finds_a_private_name_reached_through_a_module():
    tree = ast.parse("from conversations import export as core_export\nfrom . import reads\n"
                     "core_export._chunks(1)\nreads._own(2)\nFact._meta.db_table\n")
    path = ROOT / "conversations" / "proofs" / "bundle.py"
    assert list(_private_attributes_reached("conversations.proofs.bundle", path, tree)) == [
        "conversations/proofs/bundle.py:3 reaches _chunks of conversations.export"]


def test_it_finds_a_private_name_taken_across_modules():
    tree = ast.parse("from conversations.api import _respond\nfrom .models import Fact\nfrom . import _own\n")
    path = ROOT / "conversations" / "facts" / "views.py"
    assert list(_private_names_taken("conversations.facts.views", path, tree)) == [
        "conversations/facts/views.py:1 takes _respond from conversations.api",
        "conversations/facts/views.py:3 takes _own from conversations.facts"]


def test_no_project_import_hides_inside_a_function():
    found = []
    for _, path in _modules():
        if str(path.relative_to(ROOT)) not in RUN_BEFORE_DJANGO:
            found += _imports_inside_functions(path, ast.parse(path.read_text()))
    assert not found, "\n".join(found)


def test_it_finds_an_import_inside_a_function_but_not_in_ready():
    tree = ast.parse("class C:\n    def ready(self):\n        from .models import M\n"
                     "def f():\n    from conversations import store\n    import json\n")
    found = list(_imports_inside_functions(ROOT / "conversations" / "x.py", tree))
    assert found == ["conversations/x.py:5 imports conversations inside f()"]


def test_every_core_module_is_in_the_core_contract():
    config = configparser.ConfigParser()
    config.read(ROOT / ".importlinter")
    contract = config["importlinter:contract:core-imports-no-subapp"]
    listed = set(contract["source_modules"].split())
    forbidden = set(contract["forbidden_modules"].split())
    assert forbidden == {f"conversations.{app}" for app in SUB_APPS}
    core = {f"conversations.{p.stem}" for p in (ROOT / "conversations").glob("*.py") if p.stem != "__init__"}
    core |= {f"conversations.{p.parent.name}" for p in (ROOT / "conversations").glob("*/__init__.py")
             if p.parent.name not in SUB_APPS and p.parent.name != "migrations"}
    assert core - COMPOSERS == listed

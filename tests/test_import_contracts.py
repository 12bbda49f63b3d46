"""What import-linter cannot see (it sees modules, not names): the rules of .importlinter's header.

- a sub-app, the demo data and the benchmarks take only public names from the core and from
  other apps (a `_name` of another module is that module's business: ask for a public helper
  or a hook instead), whether they import the name or reach it through the module
  (`export._chunks`, or a module kept on an object: `self.rows._seal_rows`);
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
# Composes every app (demo data), like memoryui/: neither core nor a sub-app (.importlinter says
# why). It takes public names only, from the core as from the sub-apps: it is its own owner.
COMPOSERS = {"conversations.demo"}
# gunicorn's config file, run by the gunicorn master before any Django: it reads the data folder
# from settings only when a hook needs it, so that loading the config creates nothing.
RUN_BEFORE_DJANGO = {"memoryui/gunicorn_conf.py"}


def _modules():
    for package in PROJECT:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "migrations" not in path.parts:
                yield ".".join(path.relative_to(ROOT).with_suffix("").parts), path


def _bench_modules():
    """The benchmark scripts, which drive the project from outside as a client of its modules."""
    for path in sorted((ROOT / "bench").glob("*.py")):
        yield f"bench.{path.stem}", path


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
                if alias.name.startswith("_") and not alias.name.startswith("__") and source != module \
                        and (_sub_app(module) or source.split(".")[0] in PROJECT):
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


def test_no_sub_app_demo_or_benchmark_takes_a_private_name_from_another_module():
    found = []
    for module, path in (*_modules(), *_bench_modules()):
        if _sub_app(module) or module in COMPOSERS or module.startswith("bench."):
            found += _private_names_taken(module, path, ast.parse(path.read_text()))
    assert not found, "\n".join(found)


# Django's own API on model classes, underscored to keep clear of field names.
DJANGO_MODEL_API = {"_meta", "_base_manager", "_default_manager"}


def _owner(module: str) -> str:
    """The app a module belongs to: its sub-app, the demo data, or the core (everything else of
    conversations); outside the project (bench/), its own top package."""
    if module in COMPOSERS:
        return module
    return f"conversations.{_sub_app(module)}" if _sub_app(module) else module.split(".")[0]


def _held_as(value: ast.expr) -> str | None:
    """The name a module is reached by: `rows` in `rows._x`, and in `self.rows._x` (kept on an object)."""
    if isinstance(value, ast.Name):
        return value.id
    return value.attr if isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) else None


def _private_attributes_reached(module: str, path: Path, tree: ast.AST):
    """`alias._name` (or `self.alias._name`) where the alias is a module (or a name) of another app."""
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
        if not (isinstance(node, ast.Attribute) and _held_as(node.value) in aliases):
            continue
        target = aliases[_held_as(node.value)]
        if node.attr.startswith("_") and not node.attr.startswith("__") and node.attr not in DJANGO_MODEL_API \
                and target.split(".")[0] in PROJECT and _owner(target) != _owner(module):
            yield f"{path.relative_to(ROOT)}:{node.lineno} reaches {node.attr} of {target}"


def test_no_app_demo_or_benchmark_reaches_a_private_name_of_another_through_its_module():
    found = []
    for module, path in (*_modules(), *_bench_modules()):
        found += _private_attributes_reached(module, path, ast.parse(path.read_text()))
    assert not found, "\n".join(found)


def test_it_finds_a_private_name_reached_through_a_module():
    tree = ast.parse("from conversations import export as core_export\nfrom . import reads\n"
                     "core_export._chunks(1)\nreads._own(2)\nFact._meta.db_table\n")
    path = ROOT / "conversations" / "proofs" / "bundle.py"
    assert list(_private_attributes_reached("conversations.proofs.bundle", path, tree)) == [
        "conversations/proofs/bundle.py:3 reaches _chunks of conversations.export"]


def test_it_finds_what_a_benchmark_or_the_demo_reaches_in_the_project():
    tree = ast.parse("import common\nfrom conversations import rows, store\n"
                     "class Peer:\n    def __init__(self):\n        self.rows = rows\n"
                     "    def seal(self):\n        self.rows._seal_rows([])\n"
                     "store._BUMP_POSITION\ncommon._quiet()\nstore.append_message\n")
    bench = ROOT / "bench" / "w99.py"
    assert sorted(_private_attributes_reached("bench.w99", bench, tree)) == [
        "bench/w99.py:7 reaches _seal_rows of conversations.rows",
        "bench/w99.py:8 reaches _BUMP_POSITION of conversations.store"]
    # The demo is its own owner: a private name of the core is as closed to it as a sub-app's.
    demo = ROOT / "conversations" / "demo.py"
    assert list(_private_attributes_reached("conversations.demo", demo, ast.parse(
        "from . import store\nstore._bump()\n"))) == ["conversations/demo.py:2 reaches _bump of conversations.store"]
    assert list(_private_names_taken("bench.w99", bench, ast.parse(
        "from common import _quiet\nfrom conversations.rows import _prev_chain\n"))) == [
        "bench/w99.py:2 takes _prev_chain from conversations.rows"]


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

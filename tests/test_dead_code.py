"""No dead code in the server: every top-level function and class of conversations/ and memoryui/
is used somewhere besides its definition.

Used means its name occurs again anywhere in the repository's code, templates, scripts or
docs (a name in a template, a URL conf, a management command or a test counts). Decorated
definitions are registered by their decorator (API routes, checks, receivers) and are left
out, as are migrations (Django runs them by name) and the names Django looks up itself.
A definition used only by tests is allowed: the tests are its users.
"""

import ast
import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.database_independent
SEARCHED = ("conversations", "memoryui", "templates", "static/js", "tests", "bench", "tools", "clients/python/src",
            "manage.py")
# Names Django (or gunicorn, or Python) finds by convention, not by a reference in our code.
BY_CONVENTION = {"Command", "Migration", "application", "urlpatterns", "app_name",
                 # gunicorn's server hooks, read from memoryui/gunicorn_conf.py by name
                 "on_starting", "when_ready", "post_request", "child_exit", "on_exit", "pre_request", "post_fork",
                 "worker_exit"}
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _files():
    for top in SEARCHED:
        path = ROOT / top
        files = [path] if path.is_file() else path.rglob("*")
        for f in files:
            if f.is_file() and f.suffix in (".py", ".html", ".js", ".md", ".txt", ".cfg", ".toml") \
                    and "node_modules" not in f.parts and "__pycache__" not in f.parts:
                yield f


def unused_definitions() -> list[str]:
    words = Counter()
    for f in _files():
        words.update(_WORD.findall(f.read_text(errors="replace")))
    unused = []
    for top in ("conversations", "memoryui"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if "migrations" in path.parts:
                continue
            for node in ast.parse(path.read_text()).body:
                if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    continue
                if node.decorator_list or node.name in BY_CONVENTION or node.name.startswith("__"):
                    continue
                if isinstance(node, ast.ClassDef) and any(getattr(b, "id", "") == "AppConfig" for b in node.bases):
                    continue  # settings name the app's package; Django finds its AppConfig there
                if words[node.name] < 2:
                    unused.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}")
    return unused


def test_every_top_level_definition_is_used():
    assert not unused_definitions(), "defined and never used (remove them):\n" + "\n".join(unused_definitions())

"""No module over 600 lines and no function over 80.

A unit that large is split by concern, not trimmed to the number. Run this
file as a script (`python tests/test_unit_sizes.py`) to print every unit over the limits.
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("conversations", "memoryui", "clients/python/src")
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80


def _sources(root):
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).parts
            if "migrations" in parts or "tests" in parts:
                continue
            yield path


def oversized_units(root=ROOT):
    """(path, name, lines, limit) for each module and function over its limit."""
    found = []
    for path in _sources(root):
        text = path.read_text()
        relative = str(path.relative_to(root))
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            found.append((relative, "(module)", lines, MAX_MODULE_LINES))
        for node in ast.walk(ast.parse(text, filename=relative)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
                length = node.end_lineno - first + 1
                if length > MAX_FUNCTION_LINES:
                    found.append((f"{relative}:{node.lineno}", node.name, length, MAX_FUNCTION_LINES))
    return found


@pytest.mark.database_independent
def test_no_module_or_function_passes_its_size_limit():
    found = oversized_units()
    assert not found, "split these by concern:\n" + "\n".join(
        f"  {where} {name}: {lines} lines (limit {limit})" for where, name, lines, limit in found
    )


@pytest.mark.database_independent
def test_it_finds_a_long_function_and_a_long_module(tmp_path):
    package = tmp_path / "conversations"
    package.mkdir()
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    (package / "big.py").write_text("def long():\n" + body + "\n" + "\n" * MAX_MODULE_LINES)
    (package / "migrations").mkdir()
    (package / "migrations" / "0001_big.py").write_text("\n" * (MAX_MODULE_LINES + 1))
    found = {(where.split(":")[0], name) for where, name, _, _ in oversized_units(tmp_path)}
    assert found == {("conversations/big.py", "(module)"), ("conversations/big.py", "long")}


if __name__ == "__main__":
    for where, name, lines, _limit in sorted(oversized_units(), key=lambda unit: -unit[2]):
        print(f"{lines:5d}  {where}  {name}")

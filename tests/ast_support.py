"""Reading the project's own source as syntax trees, for the tests that hold it to its rules."""

import ast


def attribute_chain(node) -> list[str] | None:
    """`a.b.c` as ["a", "b", "c"]; None when the chain does not start at a plain name."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]

"""The Python client's framework extras are ranges that start at the release the suite tests
(requirements-dev.txt pins it), so that installing the client into an app never downgrades
the app's SDK, and the suite always runs on the lowest version an extra allows."""

import re
import tomllib
from importlib.metadata import version
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
FRAMEWORK_EXTRAS = ("claude", "openai-agents", "mcp", "pydantic-ai", "langgraph")


def pins() -> dict[str, str]:
    text = (ROOT / "requirements-dev.txt").read_text()
    return {name.lower(): pinned for name, pinned in re.findall(r"^([A-Za-z0-9_.-]+)==(\S+)", text, re.M)}


def test_each_framework_extra_is_a_range_from_the_tested_release_below_the_next_breaking_one():
    extras = tomllib.loads((ROOT / "clients" / "python" / "pyproject.toml").read_text())["project"][
        "optional-dependencies"]
    tested = pins()
    for extra in FRAMEWORK_EXTRAS:
        for line in extras[extra]:
            requirement = Requirement(line)
            bounds = {spec.operator: spec.version for spec in requirement.specifier}
            assert set(bounds) == {">=", "<"}, f"[{extra}] {line}: a range >=tested,<next-breaking, not a pin"
            assert bounds[">="] == tested[requirement.name.lower()], \
                f"[{extra}] {line} does not start at the tested release {tested[requirement.name.lower()]}"
            lower = [int(n) for n in bounds[">="].split(".")[:2]]
            upper = [int(n) for n in bounds["<"].split(".")]
            # The next major, or for a 0.x release the next minor (semver: 0.x minors may break).
            expected = [lower[0], lower[1] + 1] if lower[0] == 0 else [lower[0] + 1]
            assert upper == expected, f"[{extra}] {line}: the upper bound should be {'.'.join(map(str, expected))}"
            assert version(requirement.name) in requirement.specifier, f"[{extra}] the installed release is not allowed"

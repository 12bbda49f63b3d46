"""Building and running the TypeScript client (clients/typescript) from the Python suite.

`npm ci` runs only when node_modules was not installed from this very lockfile (a stamp
file holds the lockfile's hash), so a re-run costs the build alone. It installs offline
when npm's cache has every package (`--prefer-offline`) and leaves out the optional
packages: the only ones in the tree are the Claude Code CLI's platform binaries (about
400 MB), which the store's tests never start.

`python3 tests/typescript_support.py` runs the same build outside the suite with any Python
3.11 (this file needs nothing but the standard library): .ci/run builds the client that way
while the virtualenv is still being installed.
"""

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TS = ROOT / "clients" / "typescript"
STAMP = TS / "node_modules" / ".memoryui-lock-sha256"
NODE_MAJOR = 20


def missing(reason: str):
    """A tool the build needs is not there: the suite's rule (skip, or fail in CI), or, in a
    build run on its own, an exit that says what is missing."""
    if "pytest" not in sys.modules:
        raise SystemExit(f"cannot build the TypeScript client: {reason}")
    from tests.conftest import skip_or_fail

    skip_or_fail(reason)


def tools() -> tuple[str, str]:
    node, npm = shutil.which("node"), shutil.which("npm")
    if not node or not npm:
        missing("node and npm are needed for the TypeScript client (Node 20 or later)")
    version = subprocess.run([node, "--version"], capture_output=True, text=True).stdout.strip()
    major = int(re.match(r"v(\d+)", version).group(1)) if re.match(r"v(\d+)", version) else 0
    if major < NODE_MAJOR:
        missing(f"the TypeScript client needs Node {NODE_MAJOR} or later, found {version or 'none'}")
    return node, npm


def run(args: list[str], *, what: str, env: dict | None = None, timeout: int = 300) -> str:
    """Run a command in clients/typescript; its output, or a failed test showing it."""
    done = subprocess.run(args, cwd=TS, env={**os.environ, **(env or {})}, capture_output=True, text=True,
                          timeout=timeout)
    output = (done.stdout + done.stderr)[-12000:]
    if done.returncode != 0:
        raise AssertionError(f"{what} failed (exit {done.returncode}):\n{output}")
    return output


def lock_hash() -> str:
    return hashlib.sha256((TS / "package-lock.json").read_bytes() + (TS / "package.json").read_bytes()).hexdigest()


def install() -> None:
    _, npm = tools()
    if STAMP.exists() and STAMP.read_text() == lock_hash():
        return
    run([npm, "ci", "--prefer-offline", "--no-audit", "--no-fund", "--omit=optional"], what="npm ci")
    STAMP.write_text(lock_hash())


BUILT = TS / "build" / "dist-src-sha256"


def source_hash() -> str:
    digest = hashlib.sha256(lock_hash().encode())
    for path in sorted((TS / "src").glob("*.ts")) + [TS / "tsconfig.json", TS / "tsconfig.consumer.json",
                                                      TS / "test" / "consumer.ts"]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def build() -> None:
    """npm ci (when needed) and tsc, the build and the (strict) type check, then a type check of
    test/consumer.ts against what was built; only when the sources changed since."""
    install()
    node, _ = tools()
    if BUILT.exists() and BUILT.read_text() == source_hash() and (TS / "dist" / "index.js").exists():
        return
    run([node, "node_modules/typescript/bin/tsc", "-p", "tsconfig.json"], what="tsc (build and type check)")
    # An app's view: the built declarations through the package's exports, the plugs as their SDKs' types.
    run([node, "node_modules/typescript/bin/tsc", "-p", "tsconfig.consumer.json"],
        what="tsc over test/consumer.ts (the package as an app imports it)")
    BUILT.parent.mkdir(exist_ok=True)
    BUILT.write_text(source_hash())


def generate_types(schema: Path, out: Path) -> None:
    node, _ = tools()
    run([node, "node_modules/openapi-typescript/bin/cli.js", str(schema), "-o", str(out)],
        what="openapi-typescript")


def typecheck_against(types: Path) -> str:
    """tsc over a copy of src/ with `types` as its openapi.ts: '' when it compiles, else tsc's errors."""
    node, _ = tools()
    check = TS / "build" / "check"
    shutil.rmtree(check, ignore_errors=True)
    shutil.copytree(TS / "src", check / "src")
    shutil.copy(types, check / "src" / "openapi.ts")
    # The client proper (what src/index.ts reaches); the plugs use the session doors' shapes,
    # which the OpenAPI document leaves untyped, and their SDKs' types are slow to load.
    (check / "tsconfig.json").write_text('{"extends": "../../tsconfig.json", "compilerOptions": {"noEmit": true, '
                                         '"rootDir": "src"}, "files": ["src/index.ts"], "include": []}')
    done = subprocess.run([node, str(TS / "node_modules/typescript/bin/tsc"), "-p", str(check / "tsconfig.json")],
                          cwd=TS, capture_output=True, text=True)
    return "" if done.returncode == 0 else (done.stdout + done.stderr)[-6000:]


if __name__ == "__main__":
    build()


def two_projects() -> dict:
    """What test/projects.test.mjs works with: two projects, a key of the first (the same
    scopes as the other tests' key) and an operator's all-projects key."""
    import uuid

    from conversations import api_keys
    from conversations.project_store import create_project

    mine = create_project(slug="ts-mine", name="TypeScript, the key's project")
    other = create_project(slug="ts-other", name="TypeScript, another project")
    _, project_key = api_keys.create_api_key(name="typescript-project", scopes=["read", "write"], project=mine)
    _, all_projects_key = api_keys.create_api_key(name="typescript-operator", scopes=["admin"], all_projects=True)
    return {"mine": mine.slug, "other": other.slug, "projectKey": project_key, "allProjectsKey": all_projects_key,
            "namespace": f"ts-projects-{uuid.uuid4().hex[:8]}"}

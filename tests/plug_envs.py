"""Fresh environments with the plugs installed as a user installs them, at both ends of each range.

- Python: a new virtualenv into which `./clients/python[claude,openai-agents,pydantic-ai,langgraph,mcp]`
  is installed (not editable: built from the checkout as pip builds it), with the packages
  README's OpenTelemetry section says to install, and `langgraph-checkpoint-conformance` for
  the LangGraph suite. `lowest` pins every framework to the lower bound of its extra's range,
  `highest` to `[tool.memoryui.tested-highest]` of clients/python/pyproject.toml.
- TypeScript: a new npm project into which the `npm pack` tarball of clients/typescript is
  installed, with each plug's framework at the devDependencies pin (`lowest`, the peer range's
  lower bound) or at `memoryuiTested.highest` of its package.json (`highest`).

Installing costs seconds to a minute, so an environment is made once and kept, in the system's
temporary folder under a name that holds a digest of everything it was made from (the client's
sources, its pyproject or package files, README's install line): a test session reuses it, the
SQLite and PostgreSQL passes of CI share it (a lock file keeps them from making it twice), and
a change to any of those makes a new one. uv installs (given pip's configuration, as
tools/install.py does for .venv), or pip when uv cannot.
"""

import fcntl
import hashlib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from contextlib import contextmanager
from pathlib import Path

from tests.typescript_support import TS, build, source_hash, tools

ROOT = Path(__file__).resolve().parents[1]
# tools/install.py: how .venv is filled (uv given pip's configuration); the same here.
_spec = importlib.util.spec_from_file_location("install_tool", ROOT / "tools" / "install.py")
installer = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(installer)
CLIENT = ROOT / "clients" / "python"
README = ROOT / "docs" / "agents.md"  # the agent developers' guide: its snippets and install lines
EXTRAS = "claude,openai-agents,pydantic-ai,langgraph,mcp"
CONFORMANCE = "langgraph-checkpoint-conformance==0.0.2"
ENDS = ("lowest", "highest")
CACHE = Path(tempfile.gettempdir()) / "memoryui-plug-envs"


# ---- the versions at each end ------------------------------------------------------------------


def python_ranges() -> dict[str, tuple[str, str]]:
    """{framework: (lowest, highest)} of the client's extras."""
    project = tomllib.loads((CLIENT / "pyproject.toml").read_text())
    highest = project["tool"]["memoryui"]["tested-highest"]
    ends = {}
    for extra, requirements in project["project"]["optional-dependencies"].items():
        if extra == "verify":
            continue
        for requirement in requirements:
            name, low = re.fullmatch(r"([A-Za-z0-9_.-]+)>=([^,]+),<.+", requirement).groups()
            ends[name] = (low, highest[name])
    return ends


def typescript_ranges() -> dict[str, tuple[str, str]]:
    package = json.loads((TS / "package.json").read_text())
    return {name: (package["devDependencies"][name], package["memoryuiTested"]["highest"][name])
            for name in package["peerDependencies"]}


def otel_packages() -> list[str]:
    """What README's OpenTelemetry section says to install."""
    section = README.read_text().split("\n## OpenTelemetry\n", 1)[1].split("\n## ", 1)[0]
    line = next(line for line in section.splitlines() if line.startswith("pip install "))
    return [word.strip('"') for word in line.split()[2:]]


# ---- making one, once ---------------------------------------------------------------------------


def _digest(*parts) -> str:
    digest = hashlib.sha256()
    for part in parts:
        digest.update(part if isinstance(part, bytes) else str(part).encode())
        digest.update(b"\0")
    return digest.hexdigest()[:16]


def _client_files() -> list[bytes]:
    return [p.relative_to(CLIENT).as_posix().encode() + p.read_bytes()
            for p in sorted(CLIENT.rglob("*")) if p.is_file() and "__pycache__" not in p.parts
            and ".egg-info" not in p.as_posix()]


@contextmanager
def _made_once(folder: Path):
    """Yields True when the caller must make `folder` (under a lock), False when it is there."""
    CACHE.mkdir(exist_ok=True)
    with open(CACHE / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        ready = folder / ".ready"
        if ready.exists():
            yield False
            return
        shutil.rmtree(folder, ignore_errors=True)
        yield True
        ready.write_text("ok")


def _run(args: list, *, what: str, cwd=None, env=None, timeout=900) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, env={**os.environ, **(env or {})}, capture_output=True,
                          text=True, timeout=timeout)
    if done.returncode != 0:
        raise AssertionError(f"{what} failed (exit {done.returncode}):\n{(done.stdout + done.stderr)[-8000:]}")
    return done.stdout


def _uv() -> tuple[Path, list[str], dict] | None:
    uv = Path(sys.executable).parent / "uv"
    listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    options = installer.uv_options(installer.read_pip_config(listed.stdout.splitlines()), dict(os.environ))
    if not uv.exists() or isinstance(options, str) or os.environ.get("MEMORYUI_INSTALLER") == "pip":
        return None
    flags, env = options
    return uv, flags, env


def python_env(end: str) -> Path:
    """The virtualenv of `end` ("lowest" or "highest"); its python is bin/python."""
    pins = [f"{name}=={versions[ENDS.index(end)]}" for name, versions in sorted(python_ranges().items())]
    otel = otel_packages()
    folder = CACHE / f"python-{end}-{_digest(*pins, *otel, *_client_files())}"
    with _made_once(folder) as make:
        if make:
            constraints = folder.parent / f"{folder.name}.constraints.txt"
            constraints.write_text("\n".join(pins) + "\n")
            # As the README says: the package from the checkout with its extras, and the OTel install line.
            packages = [f"{CLIENT}[{EXTRAS}]", *otel, CONFORMANCE]
            uv = _uv()
            if uv is not None:
                binary, flags, env = uv
                _run([binary, "venv", "--quiet", "--python", sys.executable, folder], what="uv venv")
                _run([binary, "pip", "install", "--quiet", "--python", folder / "bin" / "python", *flags,
                      "--constraint", constraints, *packages], what=f"installing the plugs ({end})", env=env)
            else:
                _run([sys.executable, "-m", "venv", folder], what="python -m venv")
                _run([folder / "bin" / "python", "-m", "pip", "install", "--quiet", "--constraint", constraints,
                      *packages], what=f"installing the plugs ({end})")
    return folder


def installed_versions(env: Path, names) -> dict[str, str]:
    code = ("import importlib.metadata as m, json, sys; "
            "print(json.dumps({n: m.version(n) for n in sys.argv[1:]}))")
    return json.loads(_run([env / "bin" / "python", "-c", code, *names], what="reading the versions"))


def node_project(end: str) -> Path:
    """The npm project of `end`, with the packed client installed in node_modules."""
    build()
    _, npm = tools()
    ranges = typescript_ranges()
    package = json.loads((TS / "package.json").read_text())
    dependencies = {name: versions[ENDS.index(end)] for name, versions in sorted(ranges.items())}
    dependencies["zod"] = package["devDependencies"]["zod"]  # @openai/agents' peer
    folder = CACHE / f"node-{end}-{_digest(json.dumps(dependencies), source_hash(), package)}"
    with _made_once(folder) as make:
        if make:
            folder.mkdir(parents=True)
            tarball = _run([npm, "pack", "--silent", "--pack-destination", folder], cwd=TS,
                           what="npm pack").strip().splitlines()[-1]
            dependencies["@memoryui/client"] = f"file:./{tarball}"
            (folder / "package.json").write_text(json.dumps(
                {"name": f"memoryui-plugs-{end}", "private": True, "type": "module",
                 "dependencies": dependencies}, indent=2))
            # As an app installs it; the Claude Code CLI's platform binaries (optional, ~400 MB) are left out.
            _run([npm, "install", "--prefer-offline", "--no-audit", "--no-fund", "--omit=optional"], cwd=folder,
                 what=f"npm install ({end})")
    return folder

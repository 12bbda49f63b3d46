"""Install Python packages into the virtualenv: with uv when it can be told what pip would use, else with pip.

`make` fills .venv through this script (`.venv/bin/python tools/install.py <pip install
arguments>`). pip spends about a minute of one core on the test requirements; uv installs
the same releases in about 15 s, bytecode included (measured).

uv reads none of pip's configuration (its files, the PIP_* variables), and a machine may
need it: its own indexes, a folder of wheels, constraints. So the options pip would use
are read from `pip config list` and given to uv as flags. An option this script cannot
give to uv makes it install with pip instead, as does uv failing to install or to run;
MEMORYUI_INSTALLER=pip asks for pip. uv looks for each release across all the indexes,
as pip does (`--index-strategy unsafe-best-match`), and compiles bytecode, as pip does.

Only the standard library: it runs before anything is installed.
"""

import ast
import os
import subprocess
import sys

UV = "uv==0.13.9"

# pip option -> uv flag; the value may list several, separated by white space.
LISTS = {"extra-index-url": "--extra-index-url", "find-links": "--find-links", "constraint": "--constraint",
         "trusted-host": "--allow-insecure-host"}
SINGLE = {"index-url": "--index-url"}
SWITCHES = {"no-index": "--no-index", "pre": "--prerelease=allow"}
# pip option -> environment variable uv reads instead (kept when already set).
ENVIRONMENT = {"cert": "SSL_CERT_FILE", "client-cert": "SSL_CLIENT_CERT", "proxy": "HTTPS_PROXY"}
# Options about pip's own behaviour, which change nothing about what is installed.
IGNORED = {"disable-pip-version-check", "default-timeout", "timeout", "retries", "progress-bar", "no-color",
           "quiet", "verbose", "no-input", "root-user-action", "require-virtualenv", "cache-dir",
           "no-cache-dir", "no-python-version-warning", "use-feature"}
# The sections of pip's configuration an install reads, the later winning (environment last).
SECTIONS = ("global", "install", ":env:")


def read_pip_config(lines: list[str]) -> dict[str, str]:
    """The options of `pip config list` output (`section.name='value'`) an install uses."""
    found: dict[str, dict[str, str]] = {section: {} for section in SECTIONS}
    for line in lines:
        key, sep, value = line.strip().partition("=")
        section, _, name = key.rpartition(".")
        if not sep or section not in found:
            continue
        try:
            found[section][name] = str(ast.literal_eval(value))
        except (ValueError, SyntaxError):
            found[section][name] = value.strip("'\"")
    merged: dict[str, str] = {}
    for section in SECTIONS:
        merged.update(found[section])
    return merged


def _true(value: str) -> bool:
    return value.strip().lower() in ("1", "true", "yes", "on")


def uv_options(config: dict[str, str], environ: dict[str, str]) -> tuple[list[str], dict[str, str]] | str:
    """uv's flags and environment for pip's `config`; or, when one option cannot be given
    to uv, a sentence saying which."""
    flags = ["--index-strategy", "unsafe-best-match", "--compile-bytecode"]
    env = {}
    for name, value in sorted(config.items()):
        if name in LISTS:
            for item in value.split():
                flags += [LISTS[name], item]
        elif name in SINGLE:
            flags += [SINGLE[name], value.strip()]
        elif name in SWITCHES:
            if _true(value):
                flags.append(SWITCHES[name])
        elif name in ENVIRONMENT:
            if not environ.get(ENVIRONMENT[name]):
                env[ENVIRONMENT[name]] = value.strip()
        elif name not in IGNORED:
            return f"pip's option {name!r} has no uv equivalent here"
    return flags, env


def _pip(python: str, args: list[str]) -> int:
    return subprocess.call([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *args])


def _pip_instead(python: str, args: list[str], why: str) -> int:
    print(f"tools/install.py: installing with pip ({why})", file=sys.stderr)
    return _pip(python, args)


def _uv(python: str) -> str | None:
    """The uv of this virtualenv, installed (by pip, with pip's configuration) if missing."""
    uv = os.path.join(os.path.dirname(python), "uv")
    want = UV.split("==")[1]
    try:
        if subprocess.run([uv, "--version"], capture_output=True, text=True).stdout.split()[1:2] == [want]:
            return uv
    except OSError:  # no uv here yet
        pass
    if _pip(python, [UV]) != 0 or not os.path.exists(uv):
        return None
    return uv


def main(args: list[str]) -> int:
    python = sys.executable
    if os.environ.get("MEMORYUI_INSTALLER", "").strip().lower() == "pip":
        return _pip(python, args)
    listed = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True)
    options = uv_options(read_pip_config(listed.stdout.splitlines()), dict(os.environ)) \
        if listed.returncode == 0 else "pip config list failed"
    if isinstance(options, str):
        return _pip_instead(python, args, options)
    uv = _uv(python)
    if uv is None:
        return _pip_instead(python, args, "uv could not be installed")
    flags, env = options
    if subprocess.call([uv, "pip", "install", "--python", python, "--quiet", *flags, *args],
                       env={**os.environ, **env}) == 0:
        return 0
    return _pip_instead(python, args, "uv could not install these")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

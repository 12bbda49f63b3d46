"""tools/install.py tells uv what pip's configuration says, or leaves the install to pip.

`make` installs the virtualenv through it, so every run of the suite goes through it
whole; these tests judge the translation of pip's options, which decides whether uv
installs what pip would have installed."""

import importlib.util
from pathlib import Path

import pytest

pytestmark = pytest.mark.database_independent

_spec = importlib.util.spec_from_file_location("install_tool", Path(__file__).parent.parent / "tools" / "install.py")
install = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(install)

# `pip config list` as it prints on a machine with local indexes, wheels and constraints.
LISTED = """\
:env:.cert='/etc/ssl/certs/ca-certificates.crt'
:env:.default-timeout='180'
:env:.disable-pip-version-check='1'
:env:.find-links='/opt/wheels'
download.find-links='/elsewhere'
global.cert='/etc/ssl/old.crt'
global.constraint='/etc/xdg/pip/constraints.txt'
global.extra-index-url='file:///opt/pypi/simple file:///opt/pypi-more/simple'
global.find-links='/opt/old-wheels'
install.no-index='false'
"""


def test_the_sections_an_install_reads_merge_with_the_environment_winning():
    config = install.read_pip_config(LISTED.splitlines())
    assert config == {
        "cert": "/etc/ssl/certs/ca-certificates.crt",  # PIP_CERT over the global file
        "default-timeout": "180",
        "disable-pip-version-check": "1",
        "find-links": "/opt/wheels",  # not download's, which an install does not read
        "constraint": "/etc/xdg/pip/constraints.txt",
        "extra-index-url": "file:///opt/pypi/simple file:///opt/pypi-more/simple",
        "no-index": "false",
    }


def test_each_option_that_changes_what_is_installed_becomes_a_uv_flag():
    flags, env = install.uv_options(install.read_pip_config(LISTED.splitlines()), environ={})
    assert flags == [
        "--index-strategy", "unsafe-best-match", "--compile-bytecode",
        "--constraint", "/etc/xdg/pip/constraints.txt",
        "--extra-index-url", "file:///opt/pypi/simple", "--extra-index-url", "file:///opt/pypi-more/simple",
        "--find-links", "/opt/wheels",
    ]  # no-index is false: no flag; the timeout and the version check change nothing installed
    assert env == {"SSL_CERT_FILE": "/etc/ssl/certs/ca-certificates.crt"}


def test_an_index_url_a_switch_and_a_trusted_host_are_given_and_a_set_certificate_is_kept():
    config = {"index-url": "https://mirror.invalid/simple", "no-index": "yes", "pre": "1",
              "trusted-host": "a.invalid b.invalid", "cert": "/mine.crt", "proxy": "http://proxy.invalid:3128"}
    flags, env = install.uv_options(config, environ={"SSL_CERT_FILE": "/already.crt"})
    assert flags[3:] == ["--index-url", "https://mirror.invalid/simple", "--no-index", "--prerelease=allow",
                         "--allow-insecure-host", "a.invalid", "--allow-insecure-host", "b.invalid"]
    assert env == {"HTTPS_PROXY": "http://proxy.invalid:3128"}  # SSL_CERT_FILE was set already


def test_an_option_uv_cannot_be_given_leaves_the_install_to_pip():
    reason = install.uv_options({"find-links": "/w", "no-binary": ":all:"}, environ={})
    assert reason == "pip's option 'no-binary' has no uv equivalent here"


def test_values_pip_prints_with_quotes_inside_are_read_whole():
    listed = ["global.extra-index-url=\"file:///it's/simple\"", "not an option line", "global.timeout"]
    assert install.read_pip_config(listed) == {"extra-index-url": "file:///it's/simple"}

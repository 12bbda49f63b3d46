"""memoryui's settings plus one page that fails (tests/ops_urls.py), for the tests that read a server's tracebacks."""

from memoryui.settings import *  # noqa: F401,F403

ROOT_URLCONF = "tests.ops_urls"

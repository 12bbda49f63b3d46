"""The prune pages show a project's admin their own project's figures, never another's nor
the whole server's: B holds distinctive counts and sizes, and none of them, nor the database
files' size (every project's together), appears on A's pages. A superuser sees the server's
file sizes, labelled as such (conversations/retention/views.py, pruning.holdings).

The pages are read as the project matrix reads them (tests/test_project_matrix.py): the
answer's text with times and tokens masked, so a number in a timestamp is no false find."""

import re

import pytest
from django.template.defaultfilters import filesizeformat

from conversations import projects
from conversations.project_store import create_project
from conversations.retention import disk
from conversations.retention.models import PruneRun
from conversations.retention.pruning import holdings, prune_by_retention
from tests.helpers import make_person
from tests.retention_support import conversation
from tests.test_project_matrix import body_text, normal

pytestmark = pytest.mark.django_db

# B's shape: counts no page of A holds for any other reason (A has 2 and 5).
B_CONVERSATIONS, B_MESSAGES_EACH = 23, 7
B_TEXT = "beta's long ticket {i} of {title}: " + "the warehouse in Oderbruck reports a broken pallet " * 12


@pytest.fixture
def a_and_b():
    a, b = create_project(slug="sizes-a"), create_project(slug="sizes-b")
    with projects.scoped(projects.one(a.pk)):
        conversation(title="a fresh", messages=2)
        conversation(title="a stale", messages=3, age_days=40)
    with projects.scoped(projects.one(b.pk)):
        for n in range(B_CONVERSATIONS):
            conversation(title=f"b {n}", messages=B_MESSAGES_EACH, text=B_TEXT, age_days=40)
        theirs = holdings()
    with projects.scoped(projects.one(a.pk)):
        # A's own run, taking nothing: it measured the database files, every project's.
        prune_by_retention(days=400, dry_run=False, actor="a-admin")
    return a, b, theirs


def page_text(client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200, url
    text = re.sub(r"<[^>]+>", " ", normal(body_text(response), []))
    return re.sub(r"\s+", " ", text)


def shown_numbers(text: str) -> set[str]:
    return set(re.findall(r"(?<![\w.])\d+(?![\w.])", text))


A_PAGES = ["/p/sizes-a/admin/prune/", "/p/sizes-a/admin/prune/?older_than_days=30", "/p/sizes-a/admin/prune/runs/"]


def test_a_project_admin_sees_their_projects_figures_and_none_of_b_or_the_server(client, a_and_b):
    a, b, theirs = a_and_b
    client.force_login(make_person("sizes-admin", {a: "admin"}))
    run = PruneRun.everywhere.filter(project=a).get()
    own = page_text(client, "/p/sizes-a/admin/prune/")
    assert "What sizes-a holds Conversations 2 Messages 5 " in own
    with projects.scoped(projects.one(a.pk)):
        assert filesizeformat(holdings().estimated_bytes).replace("\xa0", " ") in own
    assert "only a superuser sees it" in own
    preview = page_text(client, "/p/sizes-a/admin/prune/?older_than_days=30")
    assert "Delete 1 conversation with 3 messages" in preview

    b_figures = {str(B_CONVERSATIONS), str(B_CONVERSATIONS * B_MESSAGES_EACH), str(B_CONVERSATIONS + 2),
                 str(B_CONVERSATIONS * B_MESSAGES_EACH + 5)}
    sizes = {filesizeformat(n).replace("\xa0", " ")
             for n in (theirs.estimated_bytes, disk.database_bytes(), run.bytes_before)}
    for url in [*A_PAGES, f"/p/sizes-a/admin/prune/runs/{run.pk}/"]:
        text = page_text(client, url)
        assert not b_figures & shown_numbers(text), (url, b_figures & shown_numbers(text))
        assert not [size for size in sizes if size in text], url
        assert "whole server" not in text and "On disk" not in text, url


def test_a_superuser_sees_the_server_files_size_said_to_be_every_projects(client, a_and_b):
    a, _, _ = a_and_b
    client.force_login(make_person("sizes-root", {}, superuser=True))
    text = page_text(client, "/p/sizes-a/admin/prune/?older_than_days=30")
    assert "What sizes-a holds Conversations 2 Messages 5 " in text
    assert "Database files (whole server)" in text and "Database files now (whole server)" in text
    assert "you see it as a superuser" in text
    runs = page_text(client, "/p/sizes-a/admin/prune/runs/")
    assert "Before (whole server)" in runs

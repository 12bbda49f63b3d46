"""Retention per project: a support project keeps 30 days, a coding project a year, the rest
the server's default. `manage.py prune`, an all-projects key and a superuser prune every
project by its own, one run each; a project's key and admin prune their own, and the admin
sees and sets its retention on the prune page (conversations/retention/pruning.py)."""

import io
import json

import pytest
from django.core.management import call_command

from conversations import api_keys, projects
from conversations.models import AuditEvent, Conversation
from conversations.project_store import create_project
from conversations.retention.models import PruneRun
from conversations.roles import assign_role
from tests.api_support import Api
from tests.helpers import make_user
from tests.retention_support import conversation

pytestmark = pytest.mark.django_db


@pytest.fixture
def three(settings):
    """default keeps the server's 90 days, support 30, coding 365; each holds a conversation
    received 40 days ago, and coding one of 400 days."""
    settings.MEMORYUI_RETENTION_DAYS = 90
    support = create_project(slug="support", retention_days=30)
    coding = create_project(slug="coding", retention_days=365)
    made = {}
    for slug, pid in (("default", 1), ("support", support.pk), ("coding", coding.pk)):
        with projects.scoped(projects.one(pid)):
            made[slug] = conversation(title=f"{slug} 40 days", age_days=40)
            if slug == "coding":
                made["coding-old"] = conversation(title="coding 400 days", age_days=400)
    return support, coding, made


def alive(made) -> set[str]:
    return {name for name, c in made.items() if Conversation.everywhere.filter(pk=c.pk).exists()}


def test_the_command_prunes_every_project_by_its_own_retention(three):
    support, coding, made = three
    out = io.StringIO()
    call_command("prune", stdout=out, stderr=io.StringIO())
    assert alive(made) == {"default", "coding"}
    text = out.getvalue()
    for line in ("default (kept 90 days): pruned 0 conversations", "support (kept 30 days): pruned 1 conversations",
                 "coding (kept 365 days): pruned 1 conversations"):
        assert line in text, text
    runs = {run.project_id: run.older_than_days for run in PruneRun.everywhere.all()}
    assert runs == {1: 90, support.pk: 30, coding.pk: 365}


def test_the_command_prunes_one_project_with_project(three):
    support, _, made = three
    call_command("prune", "--project", "coding", "--older-than-days", "30", stdout=io.StringIO(),
                 stderr=io.StringIO())
    assert alive(made) == {"default", "support"}
    assert [(r.project.slug, r.older_than_days) for r in PruneRun.everywhere.all()] == [("coding", 30)]


def test_the_command_says_so_in_json(three):
    out = io.StringIO()
    call_command("prune", "--dry-run", "--json", stdout=out, stderr=io.StringIO())
    result = json.loads(out.getvalue())
    assert result["conversations"] == 2 and result["older_than_days"] is None and result["project"] is None
    assert [(p["project"], p["older_than_days"], p["conversations"]) for p in result["projects"]] == [
        ("default", 90, 0), ("support", 30, 1), ("coding", 365, 1)]


def test_an_all_projects_key_prunes_every_project_by_its_own(client, three):
    _, secret = api_keys.create_api_key(name="ops", scopes=["admin"], all_projects=True)
    api = Api(client, secret)
    preview = api.post("/prune", {"dry_run": True}).json()
    assert preview["conversations"] == 2 and preview["run_id"] is None and preview["cutoff"] is None
    assert {p["project"]: p["conversations"] for p in preview["projects"]} == {"default": 0, "support": 1,
                                                                              "coding": 1}
    assert alive(three[2]) == set(three[2])
    done = api.post("/prune", {}).json()
    assert done["conversations"] == 2 and len({p["run_id"] for p in done["projects"]}) == 3
    assert alive(three[2]) == {"default", "coding"}
    # Naming a project in the header prunes that one, by its retention.
    only = api.post("/prune", {"older_than_days": 30}, headers={"X-Memoryui-Project": "coding"}).json()
    assert only["project"] == "coding" and only["conversations"] == 1 and only["older_than_days"] == 30


def test_a_project_key_prunes_its_own_project_by_its_retention(client, three):
    support, _, made = three
    _, secret = api_keys.create_api_key(name="support-janitor", scopes=["admin"], project=support)
    done = Api(client, secret).post("/prune", {}).json()
    assert done["project"] == "support" and done["older_than_days"] == 30 and done["conversations"] == 1
    assert [p["project"] for p in done["projects"]] == ["support"]
    assert alive(made) == {"default", "coding", "coding-old"}


def test_a_project_admin_sees_and_sets_its_retention_and_prunes_only_its_project(client, three):
    support, _, made = three
    admin = make_user(None, "support-admin")
    assign_role(admin, "admin", support)
    client.force_login(admin)
    page = client.get("/p/support/admin/prune/").content.decode()
    assert "keeps conversations <strong>30 days</strong> after their last row" in page
    assert "every project, each by its own retention" not in page

    assert client.post("/p/support/admin/prune/retention/", {"retention_days": "45"}).status_code == 302
    support.refresh_from_db()
    assert support.retention_days == 45
    assert AuditEvent.everywhere.filter(action="project.retention_set", project_id=support.pk).exists()
    preview = client.get("/p/support/admin/prune/?older_than_days=30").content.decode()
    assert "This project keeps conversations 45 days after their last row" in preview
    assert 'id="preview-conversations">1<' in preview
    assert client.post("/p/support/admin/prune/retention/", {"retention_days": "0"}).status_code == 422

    run = client.post("/p/support/admin/prune/run/", {"older_than_days": "30", "confirm": "yes",
                                                      "conversations": "1", "messages": "3"})
    assert run.status_code == 302
    assert alive(made) == {"default", "coding", "coding-old"}
    refused = client.post("/p/support/admin/prune/run/", {"all_projects": "yes", "confirm": "yes",
                                                          "conversations": "1", "messages": "3"})
    assert refused.status_code == 403
    assert alive(made) == {"default", "coding", "coding-old"}

    assert client.post("/p/support/admin/prune/retention/", {"retention_days": ""}).status_code == 302
    support.refresh_from_db()
    assert support.retention_days is None and support.kept_days == 90


def test_a_superuser_prunes_every_project_from_the_page_audited(client, three):
    root = make_user(None, "root-of-all")
    root.is_superuser = True
    root.save()
    client.force_login(root)
    page = client.get("/admin/prune/?all_projects=yes").content.decode()
    assert 'id="preview-projects"' in page and ">support<" in page and ">coding<" in page
    run = client.post("/admin/prune/run/", {"all_projects": "yes", "older_than_days": "", "confirm": "yes",
                                            "conversations": "2", "messages": "6"})
    assert run.status_code == 302 and run["Location"].endswith("/admin/prune/runs/")
    assert alive(three[2]) == {"default", "coding"}
    assert PruneRun.everywhere.count() == 3
    bypasses = list(AuditEvent.everywhere.filter(action="scope.bypass").values_list("detail", flat=True))
    assert {"reason": "prune of every project"} in bypasses

"""docs/ARCHITECTURE.md's plug-in table is what the registry holds once Django has started.

Every plug-in point is declared in conversations/plugins.py and every app registers there from
its AppConfig.ready(), so after start-up the registry knows each point and which apps
registered at it. The page's table must name exactly those points, each with exactly those
apps: a contributor reading it learns every way into the core and who uses each.
"""

import re
from pathlib import Path

import pytest

from conversations import plugins
from conversations.models import Project

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.database_independent
ARCHITECTURE = ROOT / "docs" / "ARCHITECTURE.md"
# How the page's "registered by" column names the core's own app.
CORE = "the core"


def documented_points(page: str) -> dict[str, set[str]]:
    """The plug-in section's table: point name → the app labels in its "registered by" column."""
    section = page.split("\n## Plug-in points\n", 1)[1].split("\n## ", 1)[0]
    found = {}
    for line in section.splitlines():
        named = re.match(r"\| `plugins\.(\w+)` \|", line)
        if not named:
            continue
        registered_by = line.rstrip().rstrip("|").rsplit("|", 1)[1]
        found[named.group(1)] = {"conversations" if app.strip() == CORE else app.strip()
                                 for app in registered_by.split(",") if app.strip()}
    return found


def registered_points() -> dict[str, set[str]]:
    """Every declared point → the labels of the apps that registered at it."""
    return {point.name: {r.by for r in point.registrations()} for point in plugins.points()}


def test_architecture_md_names_every_declared_point_and_no_other():
    page, declared = documented_points(ARCHITECTURE.read_text()), registered_points()
    assert {"owned_tables", "delete_conversation", "export_sections"} <= set(declared)  # not vacuous
    assert not set(declared) - set(page), f"points docs/ARCHITECTURE.md does not name: {set(declared) - set(page)}"
    assert not set(page) - set(declared), f"points the page names that plugins.py does not declare: " \
                                          f"{set(page) - set(declared)}"


def test_architecture_md_says_which_apps_register_at_each_point():
    page, declared = documented_points(ARCHITECTURE.read_text()), registered_points()
    differ = {name: {"registered": sorted(apps), "page": sorted(page.get(name, ()))}
              for name, apps in declared.items() if apps != page.get(name, set())}
    assert not differ, f"docs/ARCHITECTURE.md's 'registered by' differs from what registered: {differ}"


def test_each_point_is_reached_by_its_name():
    for point in plugins.points():
        assert getattr(plugins, point.name) is point


def test_it_reads_the_tables_points_and_apps():
    page = "\n## Plug-in points\n\n| point | takes | for | registered by |\n|---|---|---|---|\n" \
           "| `plugins.owned_tables` | a model | rows | the core, ledger |\n" \
           "| `plugins.nothing_declares_this` | a thing | nothing | search |\n\n## Next\n" \
           "| `plugins.after_the_section` | x | y | z |\n"
    assert documented_points(page) == {"owned_tables": {"conversations", "ledger"},
                                       "nothing_declares_this": {"search"}}


@pytest.mark.parametrize(("point", "wrong", "says"), [
    (plugins.export_sections, lambda conversation_id: {}, "takes a conversations.plugins.ExportSection"),
    (plugins.owned_tables, plugins.ExportSection, "not a model class"),
    (plugins.owned_tables, plugins.Registration, "not a model class"),
    (plugins.ledger_panel, lambda: None, "called as ledger_panel(conversation)"),
    (plugins.delete_conversation, lambda conversation_id: None, "actor"),
    (plugins.conversation_opened, lambda sender: None, "calling it so fails"),
    (plugins.leftover_files, "uploads", "not a Leftovers"),
])
def test_registering_the_wrong_thing_raises_an_error_naming_the_point(point, wrong, says):
    before = point.registrations()
    with pytest.raises(plugins.PluginTypeError, match=f"plug-in point '{point.name}' takes") as raised:
        point.register(wrong, by="tests")
    assert says in str(raised.value)
    assert "tests registered" in str(raised.value)
    assert point.registrations() == before


def test_a_model_without_a_conversation_column_is_refused_as_an_owned_table():
    with pytest.raises(plugins.PluginTypeError, match="it has no conversation_id"):
        plugins.owned_tables.register(Project, by="tests")

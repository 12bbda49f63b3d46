"""An import's stage row may be deleted while its conversation is staged, not only `deleting`.

The import's last transaction deletes its stage rows and publishes its conversations
(imports/store.py, `publish_staged`); they are marked `staged` now, not `deleting`
(conversations migration 0015), so the guard of 0003 would refuse that delete. The guard
still refuses while the conversation is there, neither staged nor being deleted.
"""

from django.db import migrations

from conversations.migration_sql import (
    WHILE_CONVERSATION_LIVE,
    WHILE_CONVERSATION_SHOWN,
    postgres_trigger,
    run_sql_by_vendor,
    sqlite_refusal,
)

STAGE = "imports_importstage"
NAME = "importstage_guard_delete"
REFUSAL = "an import stage is deleted only while its conversation is hidden"

SQLITE_FORWARD = [
    f"DROP TRIGGER IF EXISTS {NAME}",
    sqlite_refusal(NAME, STAGE, "DELETE", REFUSAL, when=WHILE_CONVERSATION_SHOWN),
]
SQLITE_BACKWARD = [
    f"DROP TRIGGER IF EXISTS {NAME}",
    sqlite_refusal(NAME, STAGE, "DELETE", REFUSAL, when=WHILE_CONVERSATION_LIVE),
]
POSTGRES_FORWARD = [
    f"""CREATE OR REPLACE FUNCTION memoryui_guard_stage_delete() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
        IF {WHILE_CONVERSATION_SHOWN} THEN
            RAISE EXCEPTION '{REFUSAL}' USING ERRCODE = 'integrity_constraint_violation';
        END IF;
        RETURN OLD;
    END $$""",
    f"DROP TRIGGER IF EXISTS {NAME} ON {STAGE}",
    postgres_trigger(NAME, STAGE, "DELETE", "memoryui_guard_stage_delete"),
]
POSTGRES_BACKWARD = [
    f"DROP TRIGGER IF EXISTS {NAME} ON {STAGE}",
    postgres_trigger(NAME, STAGE, "DELETE", "memoryui_guard_owned_delete"),
    "DROP FUNCTION IF EXISTS memoryui_guard_stage_delete()",
]


class Migration(migrations.Migration):
    dependencies = [
        ("imports", "0006_source_entry_group"),
        ("conversations", "0015_conversation_staged"),
    ]

    operations = [
        migrations.RunPython(run_sql_by_vendor(sqlite=SQLITE_FORWARD, postgresql=POSTGRES_FORWARD),
                             run_sql_by_vendor(sqlite=SQLITE_BACKWARD, postgresql=POSTGRES_BACKWARD)),
    ]

"""Facts get vectors (conversations/embeddings): one per fact, its model named beside it.

The table hangs off its fact: it is project data through its fact (PostgreSQL row-level
security answers a vector only where its fact is seen), erased with it, and written in the
proposal's transaction. Facts that exist get theirs from the background embedder, which
embeds every fact without a vector (conversations/embeddings/worker.py).
"""

import django.db.models.deletion
from django.db import migrations, models

from conversations.migration_sql import postgresql_only, via_parent, without_row_level_security

TABLE = "facts_factvector"


class Migration(migrations.Migration):
    dependencies = [("facts", "0008_factevent_scoped"), ("embeddings", "0001_initial")]

    operations = [
        migrations.CreateModel(
            name="FactVector",
            fields=[
                ("fact", models.OneToOneField(on_delete=django.db.models.deletion.DO_NOTHING, primary_key=True,
                                              related_name="vector", serialize=False, to="facts.fact")),
                ("vector", models.BinaryField()),
                ("model", models.ForeignKey(on_delete=django.db.models.deletion.PROTECT, related_name="+",
                                            to="embeddings.embeddingmodel")),
            ],
            options={"indexes": [models.Index(fields=["model"], name="factvector_model_idx")]},
        ),
        postgresql_only(via_parent(TABLE, "fact_id", "facts_fact"), without_row_level_security(TABLE)),
    ]

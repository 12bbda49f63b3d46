import django.utils.timezone
from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="ConversationAccess",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("at", models.DateTimeField(default=django.utils.timezone.now)),
                ("actor", models.CharField(max_length=200)),
                ("conversation_id", models.UUIDField()),
                ("via", models.CharField(max_length=16)),
                ("detail", models.CharField(blank=True, default="", max_length=40)),
            ],
            options={
                "indexes": [
                    models.Index(fields=["conversation_id", "id"], name="access_conversation_idx"),
                    models.Index(fields=["actor", "id"], name="access_actor_idx"),
                ],
            },
        ),
    ]

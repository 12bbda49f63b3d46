from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("retention", "0002_receipts_append_only")]

    operations = [
        migrations.CreateModel(
            name="MaintenanceLease",
            fields=[
                ("name", models.CharField(max_length=32, primary_key=True, serialize=False)),
                ("holder", models.CharField(max_length=64)),
                ("kind", models.CharField(max_length=16)),
                ("actor", models.CharField(max_length=200)),
                ("acquired_at", models.DateTimeField()),
                ("heartbeat_at", models.DateTimeField()),
            ],
        ),
    ]

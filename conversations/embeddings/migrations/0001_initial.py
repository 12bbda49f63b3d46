from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.CreateModel(
            name="EmbeddingModel",
            fields=[
                ("id", models.SmallAutoField(primary_key=True, serialize=False)),
                ("name", models.CharField(max_length=200, unique=True)),
                ("dimension", models.IntegerField()),
                ("first_used_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={
                "constraints": [models.CheckConstraint(condition=models.Q(dimension__gt=0),
                                                       name="embedding_dimension_positive")],
            },
        ),
    ]

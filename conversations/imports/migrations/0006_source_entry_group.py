"""An index on an entry's group (an OTel span's trace id), by which a trace's conversations are found."""

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("imports", "0005_row_level_security")]

    operations = [
        migrations.AddIndex(model_name="sourceentry",
                            index=models.Index(fields=["group"], name="source_entry_group_idx")),
    ]

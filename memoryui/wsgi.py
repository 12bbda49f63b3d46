import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryui.settings")
application = get_wsgi_application()

# Queued texts get their vectors, and stale ones new vectors, in the background
# (conversations/embeddings/worker.py): under gunicorn in one process of its own, which
# memoryui/gunicorn_conf.py runs and names here; under another server in a thread of each
# process. MEMORYUI_EMBED_WORKER=0 leaves that to `manage.py embed`.
from django.conf import settings  # noqa: E402 — only once Django is set up

if settings.MEMORYUI_EMBED_WORKER:
    from conversations.embeddings import worker  # noqa: E402

    if not worker.runs_in_own_process():
        worker.start()

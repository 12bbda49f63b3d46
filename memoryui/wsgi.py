import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryui.settings")
application = get_wsgi_application()

# Each server process embeds queued messages and re-embeds after a change of model in a
# thread of its own (conversations/embeddings/worker.py); MEMORYUI_EMBED_WORKER=0 leaves
# that to `manage.py embed`.
from django.conf import settings  # noqa: E402 — only once Django is set up

if settings.MEMORYUI_EMBED_WORKER:
    from conversations.embeddings import worker  # noqa: E402

    worker.start()

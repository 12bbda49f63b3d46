"""Settings for memoryui, read from environment variables with safe defaults.

DATABASE_URL     PostgreSQL (postgres:///name) or SQLite (sqlite:////abs/path);
                 unset: the embedded SQLite database under the data folder.
SECRET_KEY       unset: generated once and kept in the data folder.
SECRET_KEY_FALLBACKS  comma-separated earlier SECRET_KEYs (after a rotation).
DEBUG            "1"/"true" turns it on; off by default.
ALLOWED_HOSTS    comma-separated; default 127.0.0.1,localhost.
MEMORYUI_DATA_DIR  where the embedded database and the secret key live (default ./data).
MEMORYUI_SIGNING_KEY_FILE  an Ed25519 PEM key that signs heads; unset: made in the data folder.
MEMORYUI_ERASURE_JOURNAL   the erasure journal's file (default: in the data folder; shared storage
                 when several app servers serve one PostgreSQL).
"""

import os
import secrets
from pathlib import Path

import dj_database_url

from conversations.files import precreate_sqlite_file, prepare_data_dir

BASE_DIR = Path(__file__).resolve().parent.parent


def env_flag(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


DATA_DIR = Path(os.environ.get("MEMORYUI_DATA_DIR", BASE_DIR / "data")).resolve()
prepare_data_dir(DATA_DIR)  # 0700: the database, its WAL and the secret key are the owner's alone


def _secret_key() -> str:
    if os.environ.get("SECRET_KEY"):
        return os.environ["SECRET_KEY"]
    path = DATA_DIR / "secret_key"
    if not path.exists():
        # Written with 0600 before the key goes in, so it is never world-readable.
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_urlsafe(50))
    return path.read_text().strip()


SECRET_KEY = _secret_key()
# Keys of an earlier SECRET_KEY still check what they signed (sessions) and match the erasure
# journal's subject keys (conversations/retention/journal.py) after a rotation.
SECRET_KEY_FALLBACKS = [k.strip() for k in os.environ.get("SECRET_KEY_FALLBACKS", "").split(",") if k.strip()]
DEBUG = env_flag("DEBUG")
ALLOWED_HOSTS = [
    h.strip() for h in os.environ.get("ALLOWED_HOSTS", "127.0.0.1,localhost").split(",") if h.strip()
]
CSRF_TRUSTED_ORIGINS = [
    o.strip() for o in os.environ.get("CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()
]

INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "ninja",
    "conversations",
    "conversations.facts",
    "conversations.retention",
    "conversations.ledger",
    "conversations.search",
    "conversations.access",
    "conversations.loginguard",
    "conversations.imports",
    "conversations.frameworks",
    "conversations.langgraph",
    "conversations.proofs",
    "conversations.embeddings",
]

MIDDLEWARE = [
    # First: every answer, redirects and refusals included, gets a request id, a log line and its metrics.
    "memoryui.requestlog.RequestObservationMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "conversations.middleware.SecurityHeadersMiddleware",
    # Before anything reads the body or renders an HTML error page for /api/.
    "conversations.middleware.ApiErrorShapeMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # The project the request acts in, from its key or its person and address (conversations/project_http.py).
    "conversations.project_http.ProjectMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "conversations.middleware.HtmxLoginRedirectMiddleware",
    # A StoreError a page view lets escape becomes one 400/404/409 page (conversations/http.py).
    "conversations.http.StoreErrorPageMiddleware",
    # Last, so that the transaction it opens around a keyed API write holds nothing but the handler.
    "conversations.idempotency.IdempotencyMiddleware",
]

ROOT_URLCONF = "memoryui.urls"
WSGI_APPLICATION = "memoryui.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "conversations.context_processors.roles",
                "conversations.context_processors.project",
            ],
        },
    },
]

# SQLite is opened with the durability and reclaim settings docs/DESIGN.md asks for.
# auto_vacuum only takes effect before the first table exists, so it comes first:
# on a new file it is set before migrate creates anything.
SQLITE_PRAGMAS = (
    "PRAGMA auto_vacuum=INCREMENTAL;"
    "PRAGMA journal_mode=WAL;"
    "PRAGMA synchronous=FULL;"
    "PRAGMA foreign_keys=ON;"
    "PRAGMA secure_delete=ON;"
    "PRAGMA busy_timeout=30000;"
)
SQLITE_OPTIONS = {
    "init_command": SQLITE_PRAGMAS,
    # BEGIN IMMEDIATE takes the write lock up front, so two writers queue on the
    # busy timeout instead of one failing with "database is locked" on upgrade.
    "transaction_mode": "IMMEDIATE",
    "timeout": 30,
}


def _database() -> dict:
    url = os.environ.get("DATABASE_URL", "").strip()
    if url:
        db = dj_database_url.parse(url, conn_max_age=60, conn_health_checks=True)
    else:
        db = {"ENGINE": "django.db.backends.sqlite3", "NAME": DATA_DIR / "memoryui.sqlite3"}
    if db["ENGINE"] in ("django.db.backends.sqlite3", "memoryui.sqlite"):
        # Django's SQLite backend with one process's writers queued on a lock (memoryui/sqlite/base.py).
        db["ENGINE"] = "memoryui.sqlite"
        db["OPTIONS"] = {**SQLITE_OPTIONS, **db.get("OPTIONS", {})}
        # Tests use a file, not :memory:, so several processes can share it.
        db["TEST"] = {
            "NAME": os.environ.get("MEMORYUI_TEST_DB")
            or str(DATA_DIR / f"test-{os.getpid()}.sqlite3")
        }
        # Connections stay open across requests: opening one and running the pragmas
        # costs more than an append. Health checks are for servers that go away.
        db["CONN_MAX_AGE"] = int(os.environ.get("MEMORYUI_SQLITE_CONN_MAX_AGE", 600))
        db["CONN_HEALTH_CHECKS"] = False
    elif db["ENGINE"] == "django.db.backends.postgresql":
        # Django's, with a health check that makes no round trip (memoryui/postgresql/base.py).
        db["ENGINE"] = "memoryui.postgresql"
        # The append path's few statements (conversations/rows.py) are prepared once per
        # connection: 0 prepares them at their first use (Django's own cursors bind on the
        # client and are never prepared). MEMORYUI_PG_PREPARE=0 sends them unprepared, for a
        # connection pooler in transaction mode that cannot carry prepared statements.
        db["OPTIONS"] = {"prepare_threshold": 0 if env_flag("MEMORYUI_PG_PREPARE", True) else None,
                         **db.get("OPTIONS", {})}
    return db


DATABASES = {"default": _database()}
if DATABASES["default"]["ENGINE"] == "memoryui.sqlite":
    precreate_sqlite_file(DATABASES["default"]["NAME"])  # 0600 before SQLite creates it 0644
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "login"
# Login throttling (conversations/loginguard/guard.py): failures per account and per
# address within the window. Behind a reverse proxy, name the header it appends the
# client's address to (e.g. X-Forwarded-For), or every client counts as the proxy.
MEMORYUI_LOGIN_FAILURES_PER_USER = int(os.environ.get("MEMORYUI_LOGIN_FAILURES_PER_USER", 10))
MEMORYUI_LOGIN_FAILURES_PER_IP = int(os.environ.get("MEMORYUI_LOGIN_FAILURES_PER_IP", 30))
MEMORYUI_LOGIN_WINDOW_MINUTES = float(os.environ.get("MEMORYUI_LOGIN_WINDOW_MINUTES", 15))
MEMORYUI_CLIENT_IP_HEADER = os.environ.get("MEMORYUI_CLIENT_IP_HEADER", "").strip()
LOGIN_REDIRECT_URL = "/"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

# Absolute: page addresses live under a project's prefix (conversations/project_http.py), assets do not.
STATIC_URL = "/static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "staticfiles"
STATIC_ROOT.mkdir(exist_ok=True)  # whitenoise serves from the finders; it only needs the folder
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
WHITENOISE_USE_FINDERS = True

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads the token from the page, not the cookie
# A login lasts 12 hours (a working day), not Django's two weeks.
SESSION_COOKIE_AGE = int(float(os.environ.get("MEMORYUI_SESSION_HOURS", 12)) * 3600)
SESSION_COOKIE_SAMESITE = "Lax"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"

# Behind TLS (see docs/operators.md, "Serving over HTTPS"). MEMORYUI_HTTPS=1: cookies only over
# HTTPS, plain HTTP redirected, HSTS for a year; each part can be set on its own.
HTTPS = env_flag("MEMORYUI_HTTPS")
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_flag("MEMORYUI_SECURE_COOKIES", HTTPS)
SECURE_SSL_REDIRECT = env_flag("MEMORYUI_SSL_REDIRECT", HTTPS)
# A load balancer probes the app servers over plain HTTP, behind the TLS it terminates.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SECURE_HSTS_SECONDS = int(os.environ.get("MEMORYUI_HSTS_SECONDS", 31536000 if HTTPS else 0))
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_flag("MEMORYUI_HSTS_INCLUDE_SUBDOMAINS")
SECURE_HSTS_PRELOAD = env_flag("MEMORYUI_HSTS_PRELOAD")
# The header a TLS-terminating proxy sets to "https" (e.g. X-Forwarded-Proto). Only
# set it when that proxy always sets or strips the header: a client could send it.
_proxy_header = os.environ.get("MEMORYUI_PROXY_SSL_HEADER", "").strip()
SECURE_PROXY_SSL_HEADER = (
    ("HTTP_" + _proxy_header.upper().replace("-", "_"), "https") if _proxy_header else None
)

# /metrics answers only a scrape bearing this token; unset, it is a 404 and nothing is counted.
MEMORYUI_METRICS_TOKEN = os.environ.get("MEMORYUI_METRICS_TOKEN", "").strip()

# The Ed25519 key that signs chain heads and export manifests (conversations/proofs/keys.py):
# a PEM (PKCS#8) private key file; unset, one is made on first start in the data folder (0600).
MEMORYUI_SIGNING_KEY_FILE = os.environ.get("MEMORYUI_SIGNING_KEY_FILE", "").strip()

# The erasure journal (conversations/retention/journal.py): what every deletion request erased, kept
# outside the database so that a restore re-applies it. With several app servers it must be one
# file on storage they all share, and it is kept with the backups.
MEMORYUI_ERASURE_JOURNAL = Path(os.environ.get("MEMORYUI_ERASURE_JOURNAL", "").strip()
                                or DATA_DIR / "erasure-journal.jsonl").resolve()

# Largest encoded message the store accepts (docs/DESIGN.md: 1 MiB by default).
MEMORYUI_MAX_MESSAGE_BYTES = int(os.environ.get("MEMORYUI_MAX_MESSAGE_BYTES", 1024 * 1024))
# Days of inactivity after which `manage.py prune` removes an unpinned conversation.
MEMORYUI_RETENTION_DAYS = int(os.environ.get("MEMORYUI_RETENTION_DAYS", 90))
# How long a file previewed on /admin/import/ waits for its confirmation (conversations/imports/uploads.py);
# after that confirming refuses it and the next preview or prune removes it.
MEMORYUI_UPLOAD_TTL_MINUTES = float(os.environ.get("MEMORYUI_UPLOAD_TTL_MINUTES", 60))
# OTLP/HTTP traces (POST /v1/traces): largest body, spans per request, bytes of one attribute.
MEMORYUI_OTLP_MAX_BYTES = int(os.environ.get("MEMORYUI_OTLP_MAX_BYTES", 8 * 1024 * 1024))
MEMORYUI_OTLP_MAX_SPANS = int(os.environ.get("MEMORYUI_OTLP_MAX_SPANS", 1000))
MEMORYUI_OTLP_MAX_ATTRIBUTE_BYTES = int(os.environ.get("MEMORYUI_OTLP_MAX_ATTRIBUTE_BYTES", 256 * 1024))
# Deletion requests in two phases (conversations/retention/window.py): the rows go at once, and the
# database files are cleaned and searched in a maintenance window (`manage.py erasure_window`) by the
# deadline, once for every request filed since the last window. "at-once" searches within each request.
MEMORYUI_ERASURE_VERIFY = os.environ.get("MEMORYUI_ERASURE_VERIFY", "window").strip().lower()
MEMORYUI_ERASURE_DEADLINE_HOURS = float(os.environ.get("MEMORYUI_ERASURE_DEADLINE_HOURS", 24))
# Where a filed request's needles (personal data) wait for their window, never in the database.
MEMORYUI_ERASURE_PENDING_DIR = Path(os.environ.get("MEMORYUI_ERASURE_PENDING_DIR", DATA_DIR / "erasure-pending"))
# PostgreSQL: hash partitions of the message table by conversation (conversations/partitions.py).
# A deletion request rewrites and searches only the partitions its conversations were in, so keep
# partitions about the same size as the table grows: `manage.py message_partitions --count N`
# changes it later (about 16 per million messages keeps a request's cost flat).
MEMORYUI_PG_MESSAGE_PARTITIONS = int(os.environ.get("MEMORYUI_PG_MESSAGE_PARTITIONS", 16))
# The pg_repack program that gives a pruned PostgreSQL table's disk back ("" turns it off).
MEMORYUI_PG_REPACK = os.environ.get("MEMORYUI_PG_REPACK", "pg_repack").strip()
# Prices per million tokens that override or extend conversations/prices.py's table, by model.
MEMORYUI_MODEL_PRICES: dict = {}
# Largest file the import page takes (a transcript or a zip of a project folder).
MEMORYUI_MAX_UPLOAD_BYTES = 512 * 1024 * 1024
# The largest body POST /api/v1/imports takes (conversations/bodies.py): read a block at a time, never held whole.
MEMORYUI_MAX_IMPORT_BYTES = int(os.environ.get("MEMORYUI_MAX_IMPORT_BYTES", 256 * 1024 * 1024))
# Long-term facts (conversations/facts/store.py and recall.py read these at call time).
# Recall score weights: score = recency·w + importance·w + relevance·w.
MEMORYUI_RECALL_WEIGHTS = {
    "recency": float(os.environ.get("MEMORYUI_RECALL_WEIGHT_RECENCY", 1)),
    "importance": float(os.environ.get("MEMORYUI_RECALL_WEIGHT_IMPORTANCE", 1)),
    "relevance": float(os.environ.get("MEMORYUI_RECALL_WEIGHT_RELEVANCE", 1)),
}
# How recall fuses the full-text and vector signals: "lift" (meaning, lifted by the rare words
# a fact shares with the query), "weighted" (a weighted sum) or "rrf" (reciprocal rank
# fusion); bench/meaning_eval.py measures all three (conversations/facts/recall.py).
MEMORYUI_RECALL_FUSION = os.environ.get("MEMORYUI_RECALL_FUSION", "lift").strip()
# A proposed fact expires this many days after it is recorded unless the agent says otherwise.
MEMORYUI_FACT_RETENTION_DAYS = int(os.environ.get("MEMORYUI_FACT_RETENTION_DAYS", 365))
# "Expiring soon" lists facts that expire within this many days.
MEMORYUI_FACT_EXPIRING_SOON_DAYS = int(os.environ.get("MEMORYUI_FACT_EXPIRING_SOON_DAYS", 30))
# Forgetting candidates: retention R = exp(-t/S) under this threshold; S = 1 + recalls, capped.
MEMORYUI_FORGET_THRESHOLD = float(os.environ.get("MEMORYUI_FORGET_THRESHOLD", 0.05))
MEMORYUI_FACT_STRENGTH_CAP = int(os.environ.get("MEMORYUI_FACT_STRENGTH_CAP", 30))
# Embeddings (conversations/embeddings): unset URL = the model inside the wordllama package,
# offline; else an OpenAI-compatible endpoint (…/v1/embeddings), its model and key.
MEMORYUI_EMBEDDINGS_URL = os.environ.get("MEMORYUI_EMBEDDINGS_URL", "").strip()
MEMORYUI_EMBEDDINGS_MODEL = os.environ.get("MEMORYUI_EMBEDDINGS_MODEL", "text-embedding-3-small").strip()
MEMORYUI_EMBEDDINGS_KEY = os.environ.get("MEMORYUI_EMBEDDINGS_KEY", "")
MEMORYUI_EMBEDDINGS_BATCH = int(os.environ.get("MEMORYUI_EMBEDDINGS_BATCH", 64))
MEMORYUI_EMBEDDINGS_TIMEOUT = float(os.environ.get("MEMORYUI_EMBEDDINGS_TIMEOUT", 30))
MEMORYUI_EMBEDDINGS_RETRIES = int(os.environ.get("MEMORYUI_EMBEDDINGS_RETRIES", 3))
# Messages wait in a queue to be embedded by a thread of each server process (worker.py);
# 0 turns the thread off (then `manage.py embed` does the work).
MEMORYUI_EMBED_WORKER = env_flag("MEMORYUI_EMBED_WORKER", True)
# How long an Idempotency-Key is remembered (conversations/idempotency.py); the prune run deletes older ones.
MEMORYUI_IDEMPOTENCY_HOURS = float(os.environ.get("MEMORYUI_IDEMPOTENCY_HOURS", 24))
# Request bodies may carry one full-size message plus its JSON envelope.
DATA_UPLOAD_MAX_MEMORY_SIZE = MEMORYUI_MAX_MESSAGE_BYTES * 2 + 64 * 1024

# Everything to stderr (what `make run` shows). An unhandled exception is logged by
# django.request with its traceback whatever DEBUG says; 4xx answers are left to the
# access log, which has their status. Messages carry request paths, never query strings.
# MEMORYUI_LOG_FORMAT=json: one JSON object a line, a line per request too, each with its
# request id; tracebacks inside their line (memoryui/logs.py, memoryui/requestlog.py).
MEMORYUI_LOG_FORMAT = "json" if os.environ.get("MEMORYUI_LOG_FORMAT", "").strip().lower() == "json" else "plain"
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"},
                   "json": {"()": "memoryui.logs.JsonFormatter"}},
    "handlers": {"stderr": {"class": "logging.StreamHandler", "formatter": MEMORYUI_LOG_FORMAT}},
    "root": {"handlers": ["stderr"], "level": "WARNING"},
    "loggers": {
        "django.request": {"level": "ERROR"},
        "memoryui": {"handlers": ["stderr"], "level": os.environ.get("MEMORYUI_LOG_LEVEL", "INFO"),
                     "propagate": False},
    },
}

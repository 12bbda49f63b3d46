from django.contrib.auth import views as auth_views
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from conversations.imports import otlp_view
from conversations.loginguard.views import ThrottledLoginView

from . import health, metrics
from .api import api

urlpatterns = [
    # Browsers ask for /favicon.ico whatever the page links.
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    path("healthz", health.healthz, name="healthz"),
    path("readyz", health.readyz, name="readyz"),
    path("metrics", metrics.metrics_view, name="metrics"),
    path("login/", ThrottledLoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", api.urls),
    # OTLP/HTTP: exporters post to <endpoint>/v1/traces, so it sits at the root.
    path("v1/traces", otlp_view.traces, name="otlp_traces"),
    path("facts/", include("conversations.facts.urls")),
    path("search/", include("conversations.search.urls")),
    path("admin/access/", include("conversations.access.urls")),
    path("admin/import/", include("conversations.imports.urls")),
    path("admin/proofs/", include("conversations.proofs.urls")),
    path("admin/embeddings/", include("conversations.embeddings.urls")),
    path("admin/", include("conversations.retention.urls")),
    path("", include("conversations.urls")),
]

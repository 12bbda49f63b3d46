from django.contrib.auth import views as auth_views
from django.urls import include, path

from .api import api

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("api/v1/", api.urls),
    path("facts/", include("conversations.facts.urls")),
    path("search/", include("conversations.search.urls")),
    path("admin/access/", include("conversations.access.urls")),
    path("admin/", include("conversations.retention.urls")),
    path("", include("conversations.urls")),
]

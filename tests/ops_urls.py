"""memoryui's URLs plus /boom/, a view that fails (tests/ops_settings.py)."""

from django.urls import include, path


def boom(request):
    raise RuntimeError("boom: a view that fails, for the log tests")


urlpatterns = [path("boom/", boom), path("", include("memoryui.urls"))]

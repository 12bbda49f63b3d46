from django.urls import path

from . import views

app_name = "embeddings"

urlpatterns = [
    path("", views.progress, name="progress"),
    path("start/", views.start, name="start"),
]

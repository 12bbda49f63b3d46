from django.urls import path

from . import views

app_name = "proofs"

urlpatterns = [
    path("signing-keys/", views.keys_page, name="keys"),
    path("subject-export/", views.subject_export_form, name="subject_export"),
    path("subject-export/request/", views.subject_export_request, name="subject_export_request"),
    path("subject-export/download/", views.subject_export_download, name="subject_export_download"),
]

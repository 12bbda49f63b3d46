from django.urls import path

from . import views

app_name = "facts"

urlpatterns = [
    path("", views.queue, name="queue"),
    path("subject/", views.subject, name="subject"),
    path("subject/<int:fact_id>/", views.subject_of, name="subject_of"),
    path("expiring/", views.expiring, name="expiring"),
    path("forgetting/", views.forgetting, name="forgetting"),
    path("access-log/", views.access_log, name="access_log"),
    path("<int:fact_id>/", views.fact_detail, name="detail"),
    path("<int:fact_id>/approve", views.approve, name="approve"),
    path("<int:fact_id>/reject", views.reject, name="reject"),
    path("<int:fact_id>/edit-approve", views.edit_approve, name="edit_approve"),
    path("<int:fact_id>/undo", views.undo, name="undo"),
    path("<int:fact_id>/invalidate", views.invalidate, name="invalidate"),
    path("<int:fact_id>/supersede", views.supersede, name="supersede"),
    path("<int:fact_id>/keep", views.keep, name="keep"),
]

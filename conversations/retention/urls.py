from django.urls import path

from . import audit_views, proof_views, views

app_name = "retention"

urlpatterns = [
    path("", views.index, name="index"),
    path("prune/", views.prune_page, name="prune"),
    path("prune/run/", views.prune_run, name="prune_run"),
    path("prune/retention/", views.prune_retention, name="prune_retention"),
    path("prune/progress/", views.prune_progress, name="prune_progress"),
    path("prune/runs/", views.prune_runs, name="prune_runs"),
    path("prune/runs/<int:run_id>/", views.prune_run_detail, name="prune_run_detail"),
    path("deletion-requests/", views.deletion_form, name="deletion_form"),
    path("deletion-requests/preview/", views.deletion_preview, name="deletion_preview"),
    path("deletion-requests/execute/", views.deletion_execute, name="deletion_execute"),
    path("receipts/", views.receipts, name="receipts"),
    path("receipts/window/", views.erasure_window, name="erasure_window"),
    path("receipts/<str:request_id>/", views.receipt, name="receipt"),
    path("receipts/<str:request_id>.json", views.receipt_json, name="receipt_json"),
    path("audit/", audit_views.audit, name="audit"),
    path("verification/", proof_views.verification, name="verification"),
    path("audit/export.jsonl", audit_views.audit_export, name="audit_export"),
    path("conversations/<str:conversation_id>/delete/", views.delete_conversation, name="delete_conversation"),
]

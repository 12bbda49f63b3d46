from django.urls import path

from . import views, views_keys, views_live

# Ids are taken as strings and parsed in the views, so a malformed id is a 404 page, not a 500.
urlpatterns = [
    path("", views.index, name="index"),
    path("keys/", views_keys.keys, name="keys"),
    path("keys/create", views_keys.create_key, name="key_create"),
    path("keys/<int:key_id>/revoke", views_keys.revoke_key, name="key_revoke"),
    path("conversations/<str:conversation_id>/", views.conversation, name="conversation"),
    path("conversations/<str:conversation_id>/saw/<int:position>/", views.model_saw, name="model_saw"),
    path("conversations/<str:conversation_id>/fork/<int:position>/", views.fork, name="fork"),
    path("conversations/<str:conversation_id>/checkpoint/<int:position>/", views.checkpoint, name="checkpoint"),
    path("conversations/<str:conversation_id>/export.<str:fmt>", views.export, name="export"),
    path("conversations/<str:conversation_id>/pin/", views.pin, name="pin"),
    path("conversations/<str:conversation_id>/tool/<int:position>/", views.tool_link, name="tool_link"),
    path("conversations/<str:conversation_id>/state", views_live.state, name="conversation_state"),
    path("conversations/<str:conversation_id>/usage/", views_live.usage, name="conversation_usage"),
    path("conversations/<str:conversation_id>/panel/<str:part>/", views_live.panel, name="conversation_panel"),
    path("conversations/<str:conversation_id>/raw/<int:position>", views_live.raw, name="row_raw"),
]

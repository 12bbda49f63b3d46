from django.urls import path

from . import views, views_keyboard, views_keys, views_live, views_members

# Ids are taken as strings and parsed in the views, so a malformed id is a 404 page, not a 500.
urlpatterns = [
    path("", views.index, name="index"),
    path("keyboard/", views_keyboard.keyboard, name="keyboard"),
    path("keys/", views_keys.keys, name="keys"),
    path("keys/create", views_keys.create_key, name="key_create"),
    path("keys/<int:key_id>/revoke", views_keys.revoke_key, name="key_revoke"),
    path("admin/members/", views_members.members, name="members"),
    path("admin/members/add", views_members.add_member, name="member_add"),
    path("admin/members/create", views_members.create_member, name="member_create"),
    path("admin/members/<int:user_id>/role", views_members.change_role, name="member_role"),
    path("admin/members/<int:user_id>/remove", views_members.remove_member, name="member_remove"),
    path("admin/projects/", views_members.project_list, name="projects"),
    path("admin/projects/create", views_members.create_project, name="project_create"),
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

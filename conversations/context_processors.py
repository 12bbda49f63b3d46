from . import switcher
from .roles import ADMIN, REVIEWER, roles_of


def roles(request):
    """The signed-in user's roles, for navigation only: views check permissions themselves."""
    user_roles = roles_of(getattr(request, "user", None))
    return {
        "user_roles": user_roles,
        "is_admin": ADMIN in user_roles,
        "can_review": bool(user_roles & {REVIEWER, ADMIN}),
    }


def project(request):
    """The project the page is in, for the header's switcher and for the page's scripts (which
    name it to the API in the X-Memoryui-Project header). The switcher's choices are worked out
    only where a template shows them: a fragment never does."""
    return {
        "current_project": getattr(request, "project", None),
        "project_choices": lambda: switcher.choices(request),
        "api_root": f"{getattr(request, 'project_base', '/').rstrip('/')}/api/v1/",
    }

from .roles import ADMIN, REVIEWER, roles_of


def roles(request):
    """The signed-in user's roles, for navigation only: views check permissions themselves."""
    user_roles = roles_of(getattr(request, "user", None))
    return {
        "user_roles": user_roles,
        "is_admin": ADMIN in user_roles,
        "can_review": bool(user_roles & {REVIEWER, ADMIN}),
    }

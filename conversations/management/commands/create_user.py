import secrets

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from conversations.api_keys import project_by_slug
from conversations.errors import StoreError
from conversations.roles import ROLES, assign_role


class Command(BaseCommand):
    help = ("Create a user (or change an existing user's role) with one of the roles auditor, reviewer, admin, "
            "in one project (--project, default: default). Run it again with another --project to add one.")

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--role", required=True, choices=ROLES)
        parser.add_argument("--project", default="default", help="the project's slug (default: default)")
        parser.add_argument("--password", help="default: a random password, printed once")
        parser.add_argument("--email", default="")

    def handle(self, *args, username, role, password=None, email="", project="default", **options):
        username = username.strip()
        if not username:
            raise CommandError("username must not be blank")
        try:
            project = project_by_slug(project)
        except StoreError as exc:
            raise CommandError(exc.message) from None
        User = get_user_model()
        generated = password is None
        password = password or secrets.token_urlsafe(12)
        with transaction.atomic():
            user, created = User.objects.get_or_create(username=username, defaults={"email": email})
            if created or not generated:
                user.set_password(password)
            user.is_staff = user.is_staff or role == "admin"
            user.save()
            assign_role(user, role, project)
        if created:
            self.stdout.write(f"Created {role} {username!r} in project {project.slug!r}.")
            if generated:
                self.stdout.write(f"Password (shown once): {password}")
        else:
            self.stdout.write(f"{username!r} is now {role} in project {project.slug!r}."
                              + ("" if generated else " Password changed."))

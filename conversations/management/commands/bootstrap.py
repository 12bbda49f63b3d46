import os
import secrets

from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand
from django.db import transaction

from conversations.models import Conversation
from conversations.params import int_argument
from conversations.roles import ADMIN, assign_role


class Command(BaseCommand):
    help = (
        "First-start set-up run by `make run`: load demonstration data into an empty database and "
        "create the admin account (password from MEMORYUI_ADMIN_PASSWORD, or random and printed once)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--coding-turns", type=int_argument(minimum=0, maximum=1_000_000), default=600,
                            help="size of the demo's coding session")

    def handle(self, *args, coding_turns=600, **options):
        if not Conversation.objects.exists():
            self.stdout.write("Empty database: loading demonstration data…")
            call_command("load_demo", coding_turns=coding_turns, stdout=self.stdout)
        url = os.environ.get("MEMORYUI_URL", "http://127.0.0.1:8000/")
        User = get_user_model()
        username = os.environ.get("MEMORYUI_ADMIN_USER", "admin")
        if User.objects.filter(username=username).exists():
            self.stdout.write(
                f"Log in at {url} as {username!r} with the password printed on first start "
                f"(reset it with: .venv/bin/python manage.py changepassword {username})."
            )
            return
        password = os.environ.get("MEMORYUI_ADMIN_PASSWORD") or secrets.token_urlsafe(12)
        with transaction.atomic():
            user = User.objects.create_user(username=username, password=password, is_staff=True)
            assign_role(user, ADMIN)
        self.stdout.write("")
        self.stdout.write(self.style.SUCCESS(f"Created the admin account {username!r}."))
        if os.environ.get("MEMORYUI_ADMIN_PASSWORD"):
            self.stdout.write("Its password is the one in MEMORYUI_ADMIN_PASSWORD.")
        else:
            self.stdout.write(f"  Log in at {url} as {username!r} with password: {password}")
            self.stdout.write("  This password is shown once. "
                              "Change it with: .venv/bin/python manage.py changepassword admin")
        self.stdout.write("")

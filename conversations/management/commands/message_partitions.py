from django.core.management.base import BaseCommand, CommandError
from django.db import connection

from conversations import partitions


class Command(BaseCommand):
    help = ("PostgreSQL: show or change the number of hash partitions of the message table. A deletion "
            "request rewrites and searches only the partitions its conversations were in, so keep them "
            "about the same size as the table grows. Changing the number moves every row once under an "
            "exclusive lock: writers wait until it is done.")

    def add_arguments(self, parser):
        parser.add_argument("--count", type=int, default=None, help="the number of partitions to have")

    def handle(self, *args, count=None, **options):
        if connection.vendor != "postgresql":
            raise CommandError("partitions are a PostgreSQL feature; SQLite keeps one file")
        if count is None:
            self.stdout.write(f"{partitions.MESSAGE_TABLE}: {partitions.count()} partitions")
            return
        try:
            n = partitions.repartition(n=count)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{partitions.MESSAGE_TABLE}: {n} partitions")

from django.apps import AppConfig
from django.db.models.signals import post_save

from conversations import metrics, plugins


class RetentionConfig(AppConfig):
    name = "conversations.retention"
    label = "retention"

    def ready(self):
        from . import erasure, erasure_journal, reapply, window
        from .models import DeletionReceipt, ReceiptCheck

        # The API's DELETE of a conversation takes the deletion request's path (text gone, verified, a receipt).
        plugins.delete_conversation.register(erasure.delete_one_conversation, by=self.label)
        # Backups carry the erasure journal, and a restore re-applies what it holds (reapply.py).
        plugins.backup_extras.register(erasure_journal.for_backup, by=self.label)
        plugins.restore_prepare.register(reapply.restore_prepare, by=self.label)
        plugins.restore_finish.register(reapply.restore_finish, by=self.label)
        post_save.connect(metrics.on_receipt_saved, sender=DeletionReceipt, dispatch_uid="metrics_receipts")
        post_save.connect(metrics.on_receipt_saved, sender=ReceiptCheck, dispatch_uid="metrics_receipt_checks")
        plugins.scrape_time_gauges.register(window.gauges, by=self.label)

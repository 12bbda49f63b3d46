"""Signing keys (public halves only) and the heads signed with them.

The private key never enters the database: it lives in the data folder (0600) or
where the MEMORYUI_SIGNING_KEY_FILE setting points. The database keeps every public
key the server has signed with, retired ones too, so a head signed before a
rotation still verifies.
"""

from django.db import models
from django.utils import timezone

from conversations import params
from conversations.personal import PersonalData


class SigningKey(models.Model):
    # First 16 hex digits of SHA-256 over the 32 raw public key bytes: derivable offline.
    key_id = models.CharField(max_length=16, primary_key=True)
    algorithm = models.CharField(max_length=16, default="ed25519")
    # The 32 raw public key bytes, base64.
    public_key = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)
    retired_at = models.DateTimeField(null=True, blank=True)
    # "data_dir" (made by the server) or "setting" (MEMORYUI_SIGNING_KEY_FILE).
    source = models.CharField(max_length=16, default="data_dir")

    personal_data = PersonalData(not_personal=("key_id", "algorithm", "public_key", "source"))

    class Meta:
        ordering = ["-created_at", "key_id"]

    def __str__(self):
        return f"{self.algorithm} key {self.key_id}"

    def as_dict(self, *, current_id: str | None = None) -> dict:
        return {
            "key_id": self.key_id, "algorithm": self.algorithm, "public_key": self.public_key,
            "created_at": params.iso(self.created_at),
            "retired_at": params.iso(self.retired_at),
            "current": self.key_id == current_id,
        }


class SignedHeadQuerySet(models.QuerySet):
    def of(self, conversation_id):
        return self.filter(conversation_id=str(conversation_id)).order_by("-id")


class SignedHead(models.Model):
    """A signature over (conversation id, position, chain hash, time): what the chain
    looked like when it was signed. Kept after its conversation goes (a plain id,
    not a foreign key): it names no content."""

    REASONS = ("request", "export", "cron")

    id = models.BigAutoField(primary_key=True)
    # The conversation's id as text (with dashes), not a UUID column: a deletion request checks that
    # an erased conversation's id is gone from the database files, and a head is kept after it.
    conversation_id = models.CharField(max_length=36)
    # The last position the chain covers (-1: an empty conversation).
    position = models.BigIntegerField()
    chain_hash = models.CharField(max_length=64)
    # The checkpoint chain: how many checkpoints, and the last one's chain hash.
    checkpoints = models.BigIntegerField(default=0)
    checkpoint_chain_hash = models.CharField(max_length=64, default="")
    # The ledger chains: {"state"|"action"|"snapshot": {"rows": n, "chain_hash": hex}}.
    ledger_chains = models.JSONField(default=dict, null=True)
    signed_at = models.DateTimeField()
    key_id = models.CharField(max_length=16)
    signature = models.CharField(max_length=100)
    reason = models.CharField(max_length=16, default="request")

    personal_data = PersonalData(not_personal=("conversation_id", "chain_hash", "checkpoint_chain_hash",
                                               "ledger_chains", "key_id", "signature", "reason"))

    objects = SignedHeadQuerySet.as_manager()

    class Meta:
        indexes = [models.Index(fields=["conversation_id", "id"], name="signedhead_conversation_idx")]

    def __str__(self):
        return f"head of {self.conversation_id} at #{self.position}"


class SignHeadsRun(models.Model):
    """One `manage.py sign_heads` run: the next run signs what changed since this one started."""

    id = models.BigAutoField(primary_key=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    signed = models.BigIntegerField(default=0)
    unchanged = models.BigIntegerField(default=0)

    def __str__(self):
        return f"sign_heads run {self.pk}"

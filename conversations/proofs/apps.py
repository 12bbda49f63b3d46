from django.apps import AppConfig


class ProofsConfig(AppConfig):
    name = "conversations.proofs"
    label = "proofs"
    verbose_name = "Signed heads, signing keys and subject access exports"

    def ready(self):
        # The signing key is made on first start (issue 23.3), before any request needs it,
        # so the public key can be noted down before the first head is signed.
        from . import keys

        keys.ensure_default_key()

from django.apps import AppConfig

from conversations import plugins


class ProofsConfig(AppConfig):
    name = "conversations.proofs"
    label = "proofs"
    verbose_name = "Signed heads, signing keys and subject access exports"

    def ready(self):
        # The signing key is made on first start, before any request needs it,
        # so the public key can be noted down before the first head is signed.
        from . import heads, keys

        keys.ensure_default_key()
        # Every JSON, JSONL and Markdown export carries a signed head (the core imports no sub-app).
        plugins.export_head_signer.register(
            plugins.HeadSigner(sign=heads.export_head_or_none, markdown=heads.markdown_section), by=self.label)

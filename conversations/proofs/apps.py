from django.apps import AppConfig


class ProofsConfig(AppConfig):
    name = "conversations.proofs"
    label = "proofs"
    verbose_name = "Signed heads, signing keys and subject access exports"

    def ready(self):
        # The signing key is made on first start, before any request needs it,
        # so the public key can be noted down before the first head is signed.
        from conversations import export

        from . import heads, keys

        keys.ensure_default_key()
        # Every JSON, JSONL and Markdown export carries a signed head (the core imports no sub-app).
        export.register_head_signer(export.HeadSigner(sign=heads.export_head_or_none, markdown=heads.markdown_section))

"""Where the sub-apps plug into the core, so that the core imports none of them.

The core (store, views, export, the API) calls what is named here; a sub-app fills it
in from its AppConfig.ready(), the way it registers its rows in `owned.py`. Events any
number of apps may follow are signals; a part that one app provides (the ledger's
panel on the conversation page, the deletion path of retention) is a `Hook`, which
answers with its default until that app registers itself.
"""

from django.dispatch import Signal

# A person opened a conversation (its page, a fold's context, an export): conversation_id,
# actor, via and detail. The access log (conversations/access) records each.
conversation_opened = Signal()

# Sent inside fork_conversation's transaction once the rows and the checkpoint are copied,
# with child_id, parent_id and upto (the fork position): the ledger copies its rows as of it.
fork_copied = Signal()


class Hook:
    """One function a sub-app provides and the core calls (the default until one registers)."""

    def __init__(self, name: str, default):
        self.name = name
        self._default = self._provided = default

    def register(self, provided) -> None:
        self._provided = provided

    def __call__(self, *args, **kwargs):
        return self._provided(*args, **kwargs)

    @property
    def registered(self) -> bool:
        return self._provided is not self._default


def _no_deletion_path(*, conversation_id, actor):
    raise RuntimeError("no app registered the deletion path (conversations.retention is not installed)")


# The conversation page's ledger panel (task state, actions, snapshots) for one conversation.
ledger_panel = Hook("ledger_panel", lambda conversation: None)
# The page's rows with the ledger's marks put after the row each belongs to.
ledger_timeline = Hook("ledger_timeline", lambda entries, conversation_id, *, after, upto: entries)
# A text that changes whenever the ledger records anything for a conversation (live follow).
ledger_mark = Hook("ledger_mark", lambda conversation_id: "")
# Delete one conversation the way a deletion request does (text gone, verified, a receipt):
# returns the receipt. Provided by conversations.retention.
delete_conversation = Hook("delete_conversation", _no_deletion_path)

# What a backup set carries besides the database (retention's erasure journal): called with the
# backup's path once the database copy is made; returns what to add to the backup's manifest.
backup_extras = Hook("backup_extras", lambda path: {})
# Before a restore loads anything (path, manifest and the command's erasure-journal options):
# checks what it needs to re-apply erasures newer than the backup; raises BackupError to refuse.
restore_prepare = Hook("restore_prepare", lambda **options: None)
# After the restored database verified (the prepared plan, path, manifest): re-applies those
# erasures; returns {"notes": [...], "problems": [...]}.
restore_finish = Hook("restore_finish", lambda plan, **options: {"notes": [], "problems": []})
# The conversations a framework's id names (a LangGraph thread id, a Claude or OpenAI Agents
# session id, an OTel conversation or trace id): [(conversation, framework)], for the search
# box. Provided by conversations.imports (imports/lookup.py).
find_by_framework_id = Hook("find_by_framework_id", lambda text: [])

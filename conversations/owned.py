"""Tables whose rows belong to one conversation, besides its messages and checkpoints.

An app that keeps rows per conversation (task state, an actions ledger, an access
log, snapshot records, import sources …) registers the model at the plug-in point
`plugins.owned_tables` from its AppConfig.ready():

    plugins.owned_tables.register(MyModel, by=self.label)

The model needs a `conversation_id` column (registration checks it). Pruning, a conversation's deletion and
deletion requests then delete its rows together with the conversation (while the
conversation is marked `deleting`: an append-only guard on the table may allow
deletes only then, as the message table's guard does), and the deletion request
samples the columns the model declares personal (`personal_data`, conversations/personal.py):
its `text`, and the first bytes of its `vectors` (a message's vector, derived personal
data), for its raw-byte verification.
"""

from dataclasses import dataclass

from conversations import personal, plugins


@dataclass(frozen=True)
class Owned:
    model: type

    @property
    def table(self) -> str:
        return self.model._meta.db_table

    @property
    def text_fields(self) -> tuple[str, ...]:
        return personal.declared(self.model).text

    @property
    def bytes_fields(self) -> tuple[str, ...]:
        return personal.declared(self.model).vectors


def owned_tables() -> list[Owned]:
    """The tables registered at `plugins.owned_tables`, in the order registered."""
    return [Owned(model=model) for model in plugins.owned_tables.registered()]

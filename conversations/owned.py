"""Tables whose rows belong to one conversation, besides its messages and checkpoints.

An app that keeps rows per conversation (task state, an actions ledger, an access
log, snapshot records, import sources …) registers the model here from its
AppConfig.ready():

    from conversations.owned import register
    register(MyModel, text_fields=("result",))

The model needs a `conversation_id` column. Pruning, a conversation's deletion and
deletion requests then delete its rows together with the conversation (while the
conversation is marked `deleting`: an append-only guard on the table may allow
deletes only then, as the message table's guard does), and the deletion request
samples `text_fields` (and the first bytes of `bytes_fields`: a message's vector,
derived personal data) for its raw-byte verification.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Owned:
    model: type
    text_fields: tuple[str, ...]
    bytes_fields: tuple[str, ...] = ()

    @property
    def table(self) -> str:
        return self.model._meta.db_table


_REGISTRY: dict[str, Owned] = {}


def register(model, *, text_fields=(), bytes_fields=()) -> None:
    _REGISTRY[model._meta.label] = Owned(model=model, text_fields=tuple(text_fields),
                                         bytes_fields=tuple(bytes_fields))


def owned_tables() -> list[Owned]:
    return list(_REGISTRY.values())


from django.apps import AppConfig

from conversations.owned import register


class LangGraphConfig(AppConfig):
    name = "conversations.langgraph"
    label = "langgraph"
    verbose_name = "LangGraph checkpoints"

    def ready(self):
        # A thread's checkpoints and pending writes go with the conversation whose rows they
        # describe: pruning, deletion and deletion requests remove them with it. Their blobs
        # hold the graph state (the messages among it), so erasure verification samples them.
        from .models import LangChainHistory, LangGraphCheckpoint, LangGraphWrite

        register(LangGraphCheckpoint, text_fields=())
        register(LangGraphWrite, text_fields=())
        register(LangChainHistory, text_fields=())

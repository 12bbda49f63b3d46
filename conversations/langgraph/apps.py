from django.apps import AppConfig

from conversations import plugins


class LangGraphConfig(AppConfig):
    name = "conversations.langgraph"
    label = "langgraph"
    verbose_name = "LangGraph checkpoints"

    def ready(self):
        # A thread's checkpoints and pending writes go with the conversation whose rows they
        # describe: pruning, deletion and deletion requests remove them with it. Their blobs
        # hold the graph state (the messages among it) in an encoding no needle is cut from.
        from .models import LangChainHistory, LangGraphCheckpoint, LangGraphWrite

        for model in (LangGraphCheckpoint, LangGraphWrite, LangChainHistory):
            plugins.owned_tables.register(model, by=self.label)

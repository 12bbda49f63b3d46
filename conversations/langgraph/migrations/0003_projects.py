"""LangGraph threads and LangChain histories belong to a project: a thread id is unique per
project, so a guessed thread id of another project is a new thread in the key's own."""

from django.db import migrations

from conversations.migration_sql import add_project_column, replace_unique, scoped_managers


class Migration(migrations.Migration):
    dependencies = [("langgraph", "0002_langchain_history"), ("conversations", "0009_projects")]

    operations = [
        add_project_column(model_name="langgraphcheckpoint", table="langgraph_langgraphcheckpoint"),
        replace_unique(model_name="langgraphcheckpoint", table="langgraph_langgraphcheckpoint",
                       name="langgraph_checkpoint_key", fields=["project", "thread_id", "checkpoint_ns", "checkpoint_id"]),
        *scoped_managers("langgraphcheckpoint"),
        add_project_column(model_name="langgraphwrite", table="langgraph_langgraphwrite"),
        replace_unique(model_name="langgraphwrite", table="langgraph_langgraphwrite", name="langgraph_write_key",
                       fields=["project", "thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx"]),
        *scoped_managers("langgraphwrite"),
        add_project_column(model_name="langchainhistory", table="langgraph_langchainhistory"),
        replace_unique(model_name="langchainhistory", table="langgraph_langchainhistory",
                       name="langchain_history_key", fields=["project", "namespace", "session_id"]),
        *scoped_managers("langchainhistory"),
    ]

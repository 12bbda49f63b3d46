"""Functions run in separate processes by the tests (multiprocessing, spawn).

This module imports no Django models at import time: a spawned child imports it
before Django is set up.
"""

import os


def setup_django(db_name: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "memoryui.settings")
    import django

    django.setup()
    from django.db import connections

    # Point the child at the test database the parent created.
    connections["default"].settings_dict["NAME"] = db_name


def append_many(db_name, conversation_id, writer, count, results):
    setup_django(db_name)
    from django.db import connections

    from conversations import store

    positions, errors = [], []
    for i in range(count):
        try:
            positions.append(store.append_message(
                conversation_id=conversation_id,
                message={"kind": "did", "text": f"writer {writer} step {i}"},
            ))
        except Exception as exc:  # reported to the parent, so none can hide
            errors.append(f"{type(exc).__name__}: {exc}")
    connections.close_all()
    results.put((writer, positions, errors))

"""Writing a parsed plan (conversations.formats.base.Plan): each conversation in a savepoint
of the import's transaction, a new one through the chunked `Writer`."""


from django.db import transaction

from conversations import store as conversation_store
from conversations import store_recorded
from conversations.errors import ImportInProgress, InvalidInput, StoreError
from conversations.formats.base import (
    ConvPlan,
    Plan,
)
from conversations.models import Conversation

from . import store
from .models import ImportSource
from .result import ImportResult
from .writer import Writer


def apply_plan(plan: Plan, source: ImportSource | None, *, namespace: str, actor: str, consumed=None,
           result: ImportResult | None = None) -> ImportResult:
    result = result or ImportResult(format=plan.format, source_key=plan.source_key, namespace=namespace)
    result.problems.extend(plan.all_problems())
    ids: dict[str, str] = dict((plan.state or {}).get("convs", {})) if source else {}
    failed: set[str] = set()
    for conv in list(plan.conversations.values()):
        if any(p.hard for p in conv.problems):
            failed.add(conv.key)
            result.failed.append({"key": conv.key, "title": conv.title,
                                  "reason": "; ".join(str(p) for p in conv.problems if p.hard)})
            continue
        if conv.parent_key and (conv.parent_key in failed or conv.parent_key not in ids):
            failed.add(conv.key)
            result.failed.append({"key": conv.key, "title": conv.title, "reason": "its parent was not imported"})
            continue
        try:
            with transaction.atomic():
                info = _write_conversation(conv, plan, ids, namespace=namespace, actor=actor)
        except StoreError as exc:
            failed.add(conv.key)
            result.failed.append({"key": conv.key, "title": conv.title, "reason": exc.message})
            continue
        if info is None:
            continue
        ids[conv.key] = info["id"]
        (result.present if info.get("already_present") else result.appended if conv.existing_id
         else result.created).append(info)
    main_id = ids.get("main") or (next(iter(ids.values())) if ids else None)
    result.conversation_id = main_id
    if plan.format == "memoryui":
        return result
    if main_id is None:
        return result
    if source is None:
        source, created = store.get_or_create_source(format=plan.format, namespace=namespace,
                                                     source_key=plan.source_key, conversation_id=main_id)
        if not created:  # a concurrent import of the same source won the race
            raise ImportInProgress("this source is being imported by another request; try again", field="source")
    # Every original is kept, also those of a conversation that failed (on the stream's first one).
    entries = plan.entries
    result.entries_added = store.add_entries(source=source, entries=entries, conversation_ids=ids)
    placer = plan.state.get("placer", {}) if "convs" in (plan.state or {}) else (plan.state or {})
    state = {"placer": placer, "convs": ids}
    store.save_source(source=source, entries=source.entries + len(entries), state=state,
                      consumed_chars=consumed[0] if consumed else None, consumed_hash=consumed[1] if consumed else None)
    return result


def apply_new_plan(plan: Plan, *, namespace: str, actor: str, consumed, dry_run: bool, finish=None) -> ImportResult:
    """Write a plan whose conversations are all new, staged (writer.py): one conversation
    after another, each in chunks; a conversation that meets a hard error is discarded
    (nothing of it is kept) and the others are written; all become visible together."""
    result = ImportResult(format=plan.format, source_key=plan.source_key, namespace=namespace, dry_run=dry_run)
    result.problems.extend(plan.all_problems())
    writer = Writer(plan=plan, namespace=namespace, actor=actor, dry_run=dry_run)
    failed: set[str] = set()

    def fail(conv, reason):
        failed.add(conv.key)
        result.failed.append({"key": conv.key, "title": conv.title, "reason": reason})

    try:
        for conv in list(plan.conversations.values()):
            if any(p.hard for p in conv.problems):
                fail(conv, "; ".join(str(p) for p in conv.problems if p.hard))
                continue
            if conv.parent_key and (conv.parent_key in failed or conv.parent_key not in writer.ids):
                fail(conv, "its parent was not imported")
                continue
            if plan.format == "memoryui" and conv.id and Conversation.objects.filter(pk=conv.id).exists() and \
                    (dry_run or not store.discard_abandoned(conv.id)):
                if store.stale_stage(conv.id) is False:
                    # The same export imported by two requests at once: this one writes nothing of it.
                    raise ImportInProgress(f"conversation {conv.id} of this file is being imported by another "
                                           "request right now; try again when it has finished", field="source")
                result.present.append({"id": conv.id, "key": conv.key, "title": conv.title, "messages": 0,
                                       "checkpoints": 0, "relation": conv.relation, "parent_id": conv.parent_id,
                                       "already_present": True})
                continue
            try:
                _write_new_conversation(writer, conv)
            except StoreError as exc:
                writer.discard([conv.key])
                fail(conv, exc.message)
        written = [c for c in plan.conversations.values() if c.key in writer.ids]
        main_id = writer.ids.get("main") or (writer.ids[written[0].key] if written else None)
        source_fields = None
        if plan.format != "memoryui" and main_id is not None:
            writer.reserve_source(format=plan.format, source_key=plan.source_key)
            # Every original is kept, also those of a conversation that failed (on the stream's first one).
            for entry in plan.entries:
                writer.add_entry(entry)
                if writer.full():
                    writer.flush()
            source_fields = {"entries": len(plan.entries), "state": {"placer": plan.state, "convs": dict(writer.ids)}}
            if consumed:
                source_fields.update(consumed_chars=consumed[0], consumed_hash=consumed[1])
            result.entries_added = len(plan.entries)
        writer.flush()
        result.created.extend(writer.info(c) for c in plan.conversations.values() if c.key in writer.ids)
        result.conversation_id = main_id
        if result.present and not result.created and not result.failed:  # all of it is here already
            result.unchanged = True
            result.conversation_id = result.present[0]["id"]
        result.transactions, result.longest_transaction = writer.transactions, writer.longest
        writer.publish(source_fields=source_fields,
                       before_commit=(lambda: finish(result)) if finish is not None and writer.staged else None)
    except BaseException:
        writer.discard()
        raise
    return result


def _write_new_conversation(writer: Writer, conv: ConvPlan) -> None:
    writer.open(conv)
    rows, folds = conv.rows, conv.folds
    conv.rows, conv.folds = [], []
    i = 0
    while i < len(rows):
        size = writer.rows_per_chunk()
        conv.rows = rows[i:i + size]
        i += size
        writer.take(conv)
        if writer.full():
            writer.flush()
    conv.folds = folds
    writer.take(conv)
    writer.flush()


def _write_conversation(conv: ConvPlan, plan: Plan, ids: dict, *, namespace: str, actor: str) -> dict | None:
    first_at = next((r.at for r in conv.rows if r.at is not None), None)
    last_at = max((r.at for r in conv.rows if r.at is not None), default=None)
    parent_id = ids.get(conv.parent_key) if conv.parent_key else conv.parent_id
    if conv.existing_id:
        if not conv.rows and not conv.folds:
            return None
        cid = conv.existing_id
    elif plan.format == "memoryui":
        if conv.id and Conversation.objects.filter(pk=conv.id).exists():
            return {"id": conv.id, "key": conv.key, "title": conv.title, "messages": 0, "checkpoints": 0,
                    "relation": conv.relation, "parent_id": conv.parent_id, "already_present": True}
        c = store.create_imported_conversation(
            id=conv.id, title=conv.title, subject=conv.subject, meta=conv.meta, namespace=conv.namespace or "",
            external_id=conv.external_id, parent_id=conv.parent_id, parent_relation=conv.relation,
            forked_from_position=conv.parent_position, created_at=conv.created_at,
            last_activity_at=conv.last_activity_at, pinned=conv.pinned)
        cid = str(c.pk)
    elif conv.copy_prefix and parent_id is not None and conv.parent_position is not None:
        c = conversation_store.fork_conversation(conversation_id=parent_id, position=conv.parent_position,
                                                 title=conv.title or None)
        fields = {"meta": {**c.meta, **conv.meta}}
        if first_at is not None:  # the branch began with its first own row, as the transcript has it
            fields.update(created_at=first_at, last_activity_at=last_at or first_at)
        store_recorded.set_recorded(c.pk, **fields)
        cid = str(c.pk)
    else:
        external_id = plan.source_key[:200] if conv.key == "main" and not plan.source_key.startswith("sha256:") \
            else conv.external_id
        if external_id and Conversation.objects.filter(namespace=namespace, external_id=external_id).exists():
            raise InvalidInput(f"namespace {namespace!r} already has a conversation with external id "
                               f"{external_id[:80]!r} that was not imported from this source", field="external_id")
        c = store.create_imported_conversation(
            title=conv.title, subject=conv.subject, meta=conv.meta, namespace=namespace if conv.key == "main" else "",
            external_id=external_id if conv.key == "main" else None, parent_id=parent_id,
            parent_relation=conv.relation if parent_id else "", forked_from_position=conv.parent_position,
            created_at=first_at, last_activity_at=last_at or first_at)
        cid = str(c.pk)
    end = store.append_imported(conversation_id=cid, rows=conv.rows, expected_position=conv.base)
    for fold in conv.folds:
        store.checkpoint_imported(conversation_id=cid, position=fold.position, summary=fold.summary,
                                  created_at=fold.at, exact=fold.exact,
                                  created_by=fold.created_by if plan.format == "memoryui" else
                                  (fold.created_by or plan.format))
    if plan.format == "memoryui" and conv.last_activity_at:
        store_recorded.set_recorded(cid, last_activity_at=conv.last_activity_at)
    store.record_import(actor=actor, conversation_id=cid, detail={
        "format": plan.format, "messages": len(conv.rows), "checkpoints": len(conv.folds),
        "appended": bool(conv.existing_id), "next_position": end})
    own = conv.last_activity_at if plan.format == "memoryui" and conv.last_activity_at else last_at
    return {"id": cid, "key": conv.key, "title": conv.title, "messages": len(conv.rows),
            "checkpoints": len(conv.folds), "relation": conv.relation, "parent_id": parent_id,
            "parent_position": conv.parent_position, "last_activity_at": own.isoformat() if own else None}

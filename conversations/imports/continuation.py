"""Continuing a source already imported: what is stored of it (its entries' uuids, the
conversations its plan made), and a plan that places only what is new after that, for a
grown file and for a batch of entries alike."""

import uuid

from conversations.errors import NotFound
from conversations.formats import claude_code, claude_code_placer, codex, journal
from conversations.formats.base import (
    ConvPlan,
    Plan,
    storable,
)
from conversations.models import Conversation

from .models import ImportSource, SourceEntry


def existing_plans(source: ImportSource, plan: Plan) -> dict:
    """The conversations the stream already placed entries in, as plans to continue."""
    ids = dict(source.state.get("convs", {"main": str(source.conversation_id)}))
    live = dict(Conversation.objects.live().filter(pk__in=list(ids.values())).values_list("pk", "next_position"))
    for key, cid in ids.items():
        n = live.get(uuid.UUID(cid))
        if n is None:
            continue
        plan.conversations[key] = ConvPlan(key=key, existing_id=cid, base=n)
    return ids


def stored_uuid(value: str) -> str:
    """An entry's uuid as its column holds it (store._entry_text)."""
    return storable(value)[:200]


def lookup(source: ImportSource, ids: dict):
    by_id = {v: k for k, v in ids.items()}

    def lookup(uuids: set[str]) -> dict:
        out = {}
        asked: dict[str, list[str]] = {}  # as stored → as the entries name it
        for u in uuids:
            asked.setdefault(stored_uuid(u), []).append(u)
        keys = list(asked)
        for i in range(0, len(keys), 500):
            chunk = keys[i:i + 500]
            rows = SourceEntry.objects.filter(source_id=source.pk, uuid__in=chunk).values_list(
                "uuid", "conversation_id", "position", "group")
            for u, cid, pos, group in rows:
                key = by_id.get(str(cid))
                if key is not None:
                    for named in asked.get(u, ()):
                        out[named] = claude_code_placer.Known(key, pos, group)
            # Has each one a real child already (a second one is a rewind)?
            for (p,) in SourceEntry.objects.filter(source_id=source.pk, parent_uuid__in=chunk, real=True).values_list(
                    "parent_uuid").distinct():
                for named in asked.get(p, ()):
                    if named in out:
                        out[named].has_real_child = True
        return out

    return lookup


def continue_plan(source: ImportSource, lines, *, format: str, subject: str, dedup: bool) -> Plan:
    plan = Plan(format=format, source_key=source.source_key)
    ids = existing_plans(source, plan)
    if "main" not in plan.conversations:
        raise NotFound("the conversation this source was imported into no longer exists", field="source")
    if dedup:
        uuids = [stored_uuid(ln.obj["uuid"]) for ln in lines
                 if isinstance(ln.obj, dict) and isinstance(ln.obj.get("uuid"), str)]
        stored = set(SourceEntry.objects.filter(source_id=source.pk, uuid__in=uuids).values_list("uuid", flat=True))
        lines = [ln for ln in lines if isinstance(ln.obj, dict) and isinstance(ln.obj.get("uuid"), str)
                 and stored_uuid(ln.obj["uuid"]) not in stored]
    if format == "claude-code":
        claude_code.feed_lines(plan, lines, state=source.state.get("placer"), lookup=lookup(source, ids),
                               first_seq=source.entries, whole=False)
    else:
        sub = codex.parse_lines(lines, "", subject=subject) if format == "codex" else None
        if format == "journal":
            sub = journal.parse("\n".join(ln.text for ln in lines), subject=subject)
            for entry, ln in zip(sub.entries, lines, strict=False):
                entry.line = ln.number
        main = plan.conversations["main"]
        offset = main.base
        for row in sub.conversations["main"].rows:
            main.rows.append(row)
        for fold in sub.conversations["main"].folds:
            fold.position += offset
            main.folds.append(fold)
        for entry in sub.entries:
            entry.seq += source.entries
            entry.position = entry.position + offset if entry.position >= 0 else offset - 1
            plan.entries.append(entry)
        plan.problems.extend(sub.problems)
        plan.state = dict(source.state.get("placer", {}))
    plan.state = {"placer": plan.state, "convs": ids}
    return plan


def locked_source(format, namespace, key) -> ImportSource | None:
    return ImportSource.objects.for_update().filter(format=format, namespace=namespace, source_key=key[:300]).first()

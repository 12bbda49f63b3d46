"""Importing a new Claude Code session file in bounded memory, in short transactions.

The session's main conversation is the chain that leads to its latest leaf, so the
placer must know the whole tree before it places the first entry. The file is read
twice instead of held:

1. every line is parsed and only its skeleton kept (uuid, parentUuid, type,
   message id, sidechain and meta flags, where the line starts and ends): enough
   to choose the main line and the order to place entries in
   (`claude_code.placement`), and to hash and measure the text;
2. the lines are parsed again one at a time, in that order, and placed; the
   rows, checkpoints and original lines go to the `Writer`, which writes them a
   chunk at a time, hidden until its last transaction.

Only the skeleton (about 1/10 of a typical file) and one chunk are in memory at
once. A session seen before (same session id) is continued by the importer's
incremental path instead.
"""

from conversations.formats import claude_code, claude_code_placer, claude_code_tree
from conversations.formats.base import UnpairedSurrogate, loads, on_line, read_jsonl, storable

from . import subagents
from .writer import Writer


def session_key(text) -> str | None:
    """The source key of a Claude Code file, from its first linked entry with a session id
    (a subagent's own file: SESSION/subagents/agent-ID); None if it has none."""
    for number, line, _last in text.lines():
        try:
            obj = loads(line)
        except UnpairedSurrogate as exc:
            raise on_line(exc, number) from None
        except (ValueError, RecursionError):
            continue
        if isinstance(obj, dict) and obj.get("type") in claude_code.LINKED and isinstance(obj.get("sessionId"), str):
            if obj.get("isSidechain") is True and isinstance(obj.get("agentId"), str):
                return storable(f"{obj['sessionId']}/subagents/agent-{obj['agentId']}")
            return storable(obj["sessionId"])
    return None


def _object(line: str):
    try:
        return loads(line)
    except (ValueError, RecursionError):
        return None


PROGRESS_EVERY = 2000  # lines between two calls of `progress`


def import_new_session(text, *, key: str, namespace: str, subject: str, actor: str, dry_run: bool, result,
                       progress=None, finish=None, meta: dict | None = None, allow_empty: bool = False,
                       sidecar: dict | None = None):
    """Place and write a session file never imported before; fills and returns `result`.
    `progress(done, total)` is called every PROGRESS_EVERY lines placed, and at the end;
    `finish(result)` inside the last transaction (importer.import_text); `meta` is added
    to the main conversation's `claude_code` meta. A subagent's own transcript is created
    under the call that spawned it when its session is here (subagents.py). A file whose
    entries make no row and no checkpoint is discarded, `result.empty` set, unless
    `allow_empty`. `sidecar`: a subagent's .meta.json (what it was for, the call that spawned it)."""
    skel = claude_code.skeleton_of(read_jsonl(text.lines(), keep_text=False), keep_raw=False,
                                   subagent_stream=subagents.parse_key(key) is not None)
    plan = claude_code.new_plan(subject=subject, source_key=key)
    plan.problems.extend(skel.problems)
    order, on_line, problems = claude_code.placement(skel) if len(skel) else ([], None, [])
    plan.problems.extend(problems)
    # From here on placing needs the uuids' index only (memory flat: claude_code_tree.py).
    known = claude_code_tree.KnownTable(skel.tree)
    sidechains = skel.tree.has_sidechains()
    skel.tree.forget_links()
    placer = claude_code_placer.Placer(plan, subagent_stream=skel.subagent_stream, known=known,
                                       spawn_points=sidechains)
    lines = skel.tree.line  # entry i is line i of `text.lines()`, and its seq
    writer = Writer(plan=plan, namespace=namespace, actor=actor, dry_run=dry_run)
    conversations = plan.conversations
    _place_subagent(conversations["main"], text, skel, key=key, namespace=namespace, sidecar=sidecar)
    try:
        writer.open(conversations["main"])
        writer.reserve_source(format=plan.format, source_key=key)
        opened = 1
        total = len(order)
        for done, i in enumerate(order):
            if progress is not None and done % PROGRESS_EVERY == 0:
                progress(done, total)
            line = text.line(i)  # read once: parsed here, stored as the original below
            obj = _object(line)
            entry = claude_code.make_entry(i, lines[i], "", obj)
            placer.place(entry, obj, main_line=(entry.seq in on_line) if on_line else None)
            if len(conversations) != opened:
                new = list(conversations)[opened:]
                opened = len(conversations)
                for key, conv in conversations.items():
                    if key not in new:
                        writer.take(conv)
                for key in new:
                    writer.open(conversations[key])
            writer.add_entry(entry, line)
            # The entry's rows and checkpoint went to the conversation it was placed in.
            writer.take(conversations[entry.conv])
            if writer.full():
                writer.flush()
        claude_code.finish_plan(plan, placer, skel)
        for conv in conversations.values():
            writer.take(conv)
        if not allow_empty and not writer.wrote_anything():
            writer.discard()
            result.problems.extend(plan.all_problems())
            result.empty = True
            result.source_key = key
            return result
        if meta:
            conversations["main"].meta.setdefault("claude_code", {}).update(meta)
        writer.flush()
        result.problems.extend(plan.all_problems())
        result.created.extend(writer.info(conv) for conv in conversations.values())
        result.conversation_id = writer.ids.get("main")
        result.entries_added = len(skel)
        result.source_key = key
        result.transactions, result.longest_transaction = writer.transactions, writer.longest
        writer.publish(source_fields={"entries": len(skel),
                                      "state": {"placer": plan.state, "convs": dict(writer.ids)},
                                      "consumed_chars": text.chars, "consumed_hash": text.sha256},
                       before_commit=(lambda: finish(result)) if finish is not None else None)
        if progress is not None:
            progress(total, total)
    except BaseException:
        writer.discard()
        raise
    return result


# What a subagent's sidecar says that its conversation keeps (the placer keeps the same of an
# agent_metadata entry).
SIDECAR_FIELDS = ("agentType", "toolUseId", "parentAgentId", "description")


def _place_subagent(main, text, skel, *, key: str, namespace: str, sidecar: dict | None = None) -> None:
    """A subagent's own transcript: under the call that spawned it (a compaction agent: at its
    checkpoint), when its session is here; else created waiting for its session (whose
    import links it)."""
    parsed = subagents.parse_key(key)
    if parsed is None:
        return
    main.relation = "subagent"
    about = {k: sidecar[k] for k in SIDECAR_FIELDS if isinstance((sidecar or {}).get(k), str)}
    if about:
        main.meta.setdefault("claude_code", {}).update(about)
    tree = skel.tree
    first = next((i for i in range(len(tree)) if tree.type_of(i) == "user"), None)
    prompt = subagents.first_prompt([_object(text.line(first))]) if first is not None else ""
    summary, ended = "", None
    if subagents.is_compaction_agent(parsed.agent):
        replies = [i for i in range(len(tree)) if tree.type_of(i) == "assistant"]
        summary, ended = subagents.last_reply([_object(text.line(i)) for i in replies[-5:]])
    spawn = subagents.spawn_point(namespace=namespace, session=parsed.session, agent=parsed.agent, prompt=prompt,
                                  call_id=about.get("toolUseId"), summary=summary, ended=ended)
    if spawn is not None:
        main.parent_id, main.parent_position = spawn.conversation_id, spawn.position

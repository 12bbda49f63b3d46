"""Nothing silently dropped: every text a transcript holds is in a row, a checkpoint or a problem.

A parser may leave a line out of the rows (metadata, a record repeating another), but the
words of a transcript are its record: `unplaced(plan, texts)` lists the texts of the
source (strings at least MIN_CHARS long under any key but the identifiers, times,
hashes and names in IGNORED) that no row, checkpoint summary, conversation title or
reported problem contains. The tests of each format and of the demo data assert it is empty.
"""

import json

MIN_CHARS = 12
IGNORED = {
    "id", "uuid", "parentUuid", "logicalParentUuid", "sessionId", "sessionID", "messageID", "parentID", "projectID",
    "projectHash", "timestamp", "startTime", "lastUpdated", "time", "signature", "model", "modelID", "providerID",
    "callID", "tool_use_id", "toolUseId", "call_id", "requestId", "cwd", "directory", "path", "root", "version",
    "slug", "snapshot", "hash", "mime", "url", "filename", "data", "result", "encrypted_content", "media_type",
    "mimeType", "agentId", "container_id", "ghost_commit", "gitBranch", "worktree", "system_fingerprint",
    "displayName", "description", "resultDisplay", "revised_prompt", "request", "lastCheckpointHash", "files",
    "status", "title", "kind", "type", "role", "name", "agent", "mode", "summary_text", "finish_reason",
    "stop_reason", "object", "vcs", "sources", "$rewindTo", "subtype", "originator", "at", "forked_from_id",
    "parent_thread_id", "task_id", "cli_version", "model_provider", "external_id", "namespace", "subject",
    "created_at", "last_activity_at", "message_position", "created_by", "uuids", "ids", "message_id",
}
# Records a format keeps as entries by design, not as rows: metadata, what a UI showed again.
METADATA_TYPES = {
    "summary", "custom-title", "ai-title", "file-history-snapshot", "queue-operation", "tag", "agent-name",
    "agent_metadata", "mode", "last-prompt", "pr-link", "worktree-state", "agent-setting", "content-replacement",
    "session_meta", "turn_context", "event_msg", "progress",
}


def _is_metadata(obj: dict) -> bool:
    if "memoryui" in obj or obj.get("type") in METADATA_TYPES:
        return True
    if obj.get("type") == "system" and obj.get("subtype"):  # Claude Code's notes (a compaction boundary, times)
        return True
    return "say" in obj or "ask" in obj  # Cline's panel: the history again, for the eye


def texts_of(value, key: str = "") -> list[str]:
    """The strings of a JSON value worth finding again (see the module docstring)."""
    if key in IGNORED:
        return []
    if isinstance(value, str):
        return [value] if len(value.strip()) >= MIN_CHARS else []
    if isinstance(value, dict):
        if _is_metadata(value):
            return []
        return [t for k, v in value.items() for t in texts_of(v, k)]
    if isinstance(value, list):
        return [t for v in value for t in texts_of(v, key)]
    return []


def _haystack(plan) -> str:
    parts = []
    for conv in plan.conversations.values():
        parts.append(conv.title)
        for row in conv.rows:
            message = row.message
            message.pop("meta", None)
            parts.append(json.dumps(message, ensure_ascii=False))
            parts.extend(_strings(message))
        parts.extend(f.summary for f in conv.folds)
    parts.extend(p.reason for p in plan.all_problems())
    return "\n".join(parts)


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def unplaced(plan, texts) -> list[str]:
    """The texts no row, checkpoint, title or problem of the plan holds (whitespace aside)."""
    hay = " ".join(_haystack(plan).split())
    return [t for t in texts if " ".join(t.split()) not in hay]

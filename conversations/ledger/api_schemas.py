"""What the ledger's API documents: response shapes, request bodies, examples.

As in `conversations.api_schemas`, handlers return data that ninja serializes
through these models; the request-body models are strict and are what the
handlers validate with.
"""

import uuid
from datetime import datetime
from typing import Any, Literal

from ninja import Field
from pydantic import BaseModel, StrictInt, StrictStr, model_serializer

from conversations.api_schemas import EXAMPLE_ID, EXAMPLE_TIME, MAX_POSITION, ListOut  # noqa: F401 (re-exported)
from conversations.jsonbody import StrictBody

from . import store

PAGE = 100
PAGE_MAX = 1000
LOOKUP_MAX = 100


# -- documented shapes ----------------------------------------------------------------
# Plain pydantic models, not ninja Schemas, as conversations.api_schemas' items: no ORM-attribute
# look-up per field, which made a page of 1,000 actions serialize ten times slower than its JSON.


class Change(BaseModel):
    op: Literal["add", "remove", "replace"]
    path: str = Field(..., description="JSON Pointer to the changed value, e.g. `/decision`.")
    old: Any = Field(None, description="The value before (remove, replace).")
    new: Any = Field(None, description="The value after (add, replace).")

    @model_serializer(mode="wrap")
    def _as_stored(self, serialize):
        # An add has no `old` and a remove no `new`: left out, as stored, not written as null.
        return {k: v for k, v in serialize(self).items() if k in self.model_fields_set}


class StateOut(BaseModel):
    conversation_id: uuid.UUID
    version: int = Field(..., description="0 until the state is first set; each change adds one.")
    state: dict[str, Any]
    position: int | None = Field(..., description="The last message position when this version was written "
                                                  "(-1: before any message; null: never set).")
    updated_at: datetime | None
    updated_by: str | None


class StateWriteOut(StateOut):
    changed: bool = Field(..., description="False when the state sent was the state stored: no new version.")
    changes: list[Change] = Field(..., description="What this write changed (empty when nothing did).")


class StateEventOut(BaseModel):
    version: int
    position: int
    state: dict[str, Any]
    changes: list[Change]
    actor: str
    created_at: datetime


class StateHistory(ListOut):
    items: list[StateEventOut]


class ActionOut(BaseModel):
    id: int
    conversation_id: uuid.UUID
    position: int = Field(..., description="Recorded after the message at this position (-1: before any).")
    namespace: str
    idempotency_key: str
    name: str
    arguments: Any
    result: Any
    status: Literal["performed", "failed", "already_performed"]
    original_id: int | None = Field(..., description="For a retry: the entry it repeats (the performed one).")
    inherited_from: int | None = Field(..., description="For an entry a fork carried over: the entry first written.")
    actor: str
    created_at: datetime


class RecordedOut(BaseModel):
    status: Literal["performed", "failed", "already_performed"]
    action: ActionOut = Field(..., description="The entry that counts: the one that performed it, or this attempt.")
    attempt: ActionOut = Field(..., description="The entry this request wrote.")


class ActionPage(ListOut):
    items: list[ActionOut]


class ActionLookup(BaseModel):
    namespace: str
    idempotency_key: str
    performed: bool = Field(..., description="True when an entry with this key performed the action.")
    action: ActionOut | None = Field(..., description="That entry.")
    entries: list[ActionOut] = Field(..., description=f"Every entry with the key, oldest first (at most {LOOKUP_MAX}).")


class SnapshotOut(BaseModel):
    id: int
    conversation_id: uuid.UUID
    position: int = Field(..., description="The turn: the files as they were when it began.")
    repo: str
    ref: str
    commit: str
    base: str = Field(..., description="The commit HEAD was on; the figures count the change against it.")
    files_changed: int
    insertions: int
    deletions: int
    restore: str = Field(..., description="The command that brings these files back.")
    actor: str
    created_at: datetime


class SnapshotList(ListOut):
    items: list[SnapshotOut]


# -- request bodies -------------------------------------------------------------------


class StateIn(StrictBody):
    state: dict[str, Any]
    expected_version: StrictInt = Field(..., ge=0, le=MAX_POSITION,
                                        description="The version you read; 409 `version_conflict` if it moved.")


class ActionIn(StrictBody):
    idempotency_key: StrictStr = Field(..., min_length=1, max_length=store.KEY_MAX, description=(
        "The business key: derived from what the action is about (ticket, order, item, amount), "
        "never generated per call."))
    name: StrictStr = Field(..., min_length=1, max_length=store.NAME_MAX, description="The tool, e.g. `issue_refund`.")
    arguments: Any = Field(None, description="What the tool was called with (JSON).")
    result: Any = Field(None, description="What the tool returned (JSON).")
    status: Literal["performed", "failed"] = "performed"


class SnapshotIn(StrictBody):
    position: StrictInt = Field(..., ge=0, le=MAX_POSITION)
    repo: StrictStr = Field(..., min_length=1, max_length=store.REPO_MAX)
    ref: StrictStr | None = Field(None, max_length=400, description="`refs/memoryui/<conversation>/<position>`.")
    commit: StrictStr = Field(..., min_length=40, max_length=64)
    base: StrictStr | None = Field(None, max_length=64)
    files_changed: StrictInt = Field(..., ge=0, le=2**31 - 1)
    insertions: StrictInt = Field(..., ge=0, le=2**31 - 1)
    deletions: StrictInt = Field(..., ge=0, le=2**31 - 1)


# -- examples -------------------------------------------------------------------------

EXAMPLE_KEY = "refund:T-40219:SU-88421:oak-shelf:11800"
EXAMPLE_STATE = {"ticket": "T-40219", "order": "SU-88421", "item": "oak shelving unit", "amount_cents": 11800,
                 "decision": "refund"}
EXAMPLE_STATE_OUT = {"conversation_id": EXAMPLE_ID, "version": 2, "state": EXAMPLE_STATE, "position": 5,
                     "updated_at": EXAMPLE_TIME, "updated_by": "key:support-agent"}
EXAMPLE_CHANGES = [{"op": "add", "path": "/decision", "new": "refund"}]
EXAMPLE_ACTION = {
    "id": 41, "conversation_id": EXAMPLE_ID, "position": 6, "namespace": "sundry", "idempotency_key": EXAMPLE_KEY,
    "name": "issue_refund", "arguments": {"order": "SU-88421", "amount_cents": 11800},
    "result": {"refund_id": "RF-77120"}, "status": "performed", "original_id": None, "inherited_from": None,
    "actor": "key:support-agent", "created_at": "2026-05-04T14:32:07Z",
}
EXAMPLE_RETRY = EXAMPLE_ACTION | {"id": 42, "position": 8, "status": "already_performed", "original_id": 41,
                                  "result": {"status": "already_performed", "refund_id": "RF-77120"},
                                  "created_at": "2026-05-04T14:32:19Z"}
EXAMPLE_COMMIT = "9f2c4e1b7a0d3c5e8f6a2b4d1c3e5f7a9b0c2d4e"
EXAMPLE_SNAPSHOT = {
    "id": 3, "conversation_id": EXAMPLE_ID, "position": 12, "repo": "/home/dev/shop",
    "ref": f"refs/memoryui/{EXAMPLE_ID}/12", "commit": EXAMPLE_COMMIT,
    "base": "1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e", "files_changed": 3, "insertions": 41, "deletions": 7,
    "restore": f"git -C /home/dev/shop stash apply refs/memoryui/{EXAMPLE_ID}/12",
    "actor": "key:coder", "created_at": EXAMPLE_TIME,
}

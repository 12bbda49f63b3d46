"""The facts part of the agent API: propose, recall, invalidate, read.

Agents hold keys with `facts:write` (propose, invalidate) and `facts:read`
(recall, read). People reach the same endpoints with their session: reviewers
and admins read (and each read of a subject's facts is written to the access
log), admins also write; auditors have no facts scope and get 403.
"""

from datetime import datetime

from django.db.models import Q
from django.utils import timezone
from ninja import Field, Router, Status
from pydantic import BaseModel, StrictInt, StrictStr

from conversations import keyset, params
from conversations.api_schemas import ListOut, errors_doc, inline_schema, json_body_doc
from conversations.apiauth import actor_of, scope
from conversations.errors import InvalidInput, NotFound
from conversations.jsonbody import Instant, StrictBody, read_body
from conversations.models import ApiKey

from . import store
from .models import Fact
from .recall import recall as recall_facts

router = Router(tags=["facts"])


class FactIn(StrictBody):
    subject: StrictStr = Field(..., examples=["customer:42"])
    text: StrictStr = Field(..., examples=["Prefers a replacement over a refund"])
    category: StrictStr = "other"
    importance: StrictInt = Field(..., ge=1, le=10)
    source_conversation_id: StrictStr | None = None
    source_position: StrictInt | None = Field(None, ge=0, le=params.MAX_BIGINT)
    valid_from: Instant | None = None
    expires_at: Instant | None = None
    retention_days: StrictInt | None = Field(None, ge=1, le=store.MAX_RETENTION_DAYS)


class InvalidateIn(StrictBody):
    reason: StrictStr
    invalid_at: Instant | None = None


# The answer models are plain pydantic models, not ninja Schemas, as conversations.api_schemas'
# items: no attribute look-up per field (a list of 1,000 facts took 2.6 times as long with it).
class SourceOut(BaseModel):
    conversation_id: str
    position: int


class FactOut(BaseModel):
    id: int
    subject: str
    text: str
    category: str
    importance: int
    status: str
    state: str
    valid_from: datetime
    invalid_at: datetime | None
    recorded_at: datetime
    expires_at: datetime | None
    superseded_by: int | None
    reason: str
    source: SourceOut | None
    created_by: str
    access_count: int
    last_accessed_at: datetime | None


class PartsOut(BaseModel):
    recency: float
    importance: float
    relevance: float = Field(..., description="The fusion of `words` and `meaning`, normalised over the candidates.")
    words: float = Field(..., description="The full-text rank, normalised (0: no word in common).")
    meaning: float = Field(..., description="The cosine with the query's vector, normalised.")
    cosine: float | None = Field(..., description="The raw cosine (null: the fact has no vector yet).")


class RecalledOut(BaseModel):
    fact: FactOut
    score: float
    parts: PartsOut
    matched: list[str] = Field(..., description='Which signals found it: "words", "meaning", both or none.')


class RecallOut(ListOut):
    subject: str
    query: str
    items: list[RecalledOut] = Field(..., description="Best first; not paged (`limit` picks how many).")


class EventOut(BaseModel):
    kind: str
    at: datetime
    actor: str
    reason: str
    detail: dict


class FactDetailOut(FactOut):
    events: list[EventOut]


class FactListOut(ListOut):
    subject: str
    items: list[FactOut]


def fact_out(fact: Fact, now=None) -> dict:
    source = None
    if fact.source_conversation_id is not None:
        source = {"conversation_id": str(fact.source_conversation_id), "position": fact.source_position}
    return {
        "id": fact.pk, "subject": fact.subject, "text": fact.text, "category": fact.category,
        "importance": fact.importance, "status": fact.status, "state": fact.state(now),
        "valid_from": fact.valid_from, "invalid_at": fact.invalid_at, "recorded_at": fact.recorded_at,
        "expires_at": fact.expires_at, "superseded_by": fact.superseded_by_id, "reason": fact.reason,
        "source": source, "created_by": fact.created_by, "access_count": fact.access_count,
        "last_accessed_at": fact.last_accessed_at,
    }


def _is_person(request) -> bool:
    return not isinstance(getattr(request, "auth", None), ApiKey)


def _get(fact_id: int) -> Fact:
    fact = None
    if 0 < fact_id <= store.MAX_ID:
        fact = Fact.objects.exclude(status="erasing").filter(pk=fact_id).first()
    if fact is None:
        raise NotFound(f"fact {fact_id} not found", field="id")
    return fact


@router.post("/facts", response={201: FactOut, **errors_doc(400, 404, 413, 415, 422)},
             summary="Propose a fact (always proposed; a person reviews it)",
             openapi_extra=json_body_doc(inline_schema(FactIn), {"proposal": {"summary": "A preference", "value": {
                 "subject": "customer:42", "text": "Prefers a replacement over a refund", "category": "preference",
                 "importance": 7}}}))
@scope("facts:write")
def propose(request):
    payload = read_body(request, FactIn)
    fact = store.propose_fact(created_by=actor_of(request), **payload.model_dump())
    return Status(201, fact_out(fact))


@router.get("/facts", response={200: FactListOut, **errors_doc(400, 422)},
            summary="A subject's facts, every state, newest first")
@scope("facts:read")
def list_facts(request, subject: str, status: str | None = None, limit: int = 200, cursor: str | None = None):
    subject = store.clean_subject(subject)
    if status is not None and status not in ("proposed", "approved", "rejected"):
        raise InvalidInput("status must be proposed, approved or rejected", field="status")
    limit = max(1, min(limit, 1000))
    if _is_person(request):
        store.record_access(actor=actor_of(request), subject=subject, view="api list")
    qs = Fact.objects.about(subject).exclude(status="erasing")
    if status:
        qs = qs.filter(status=status)
    after = keyset.decode(cursor, "facts", datetime, int)
    if after:
        qs = qs.filter(Q(recorded_at__lt=after[0]) | Q(recorded_at=after[0], id__lt=after[1]))
    newest = qs.order_by("-recorded_at", "-id")
    rows, next_cursor = keyset.page(newest, limit, "facts", lambda f: (f.recorded_at, f.pk))
    now = timezone.now()
    url = keyset.next_url(request, next_cursor, keyset.same_query(request))
    return keyset.listing([fact_out(f, now) for f in rows], next_cursor, url, subject=subject)


@router.get("/facts/recall", response=RecallOut, summary="The best facts about a subject for a query")
@scope("facts:read")
def recall(request, subject: str, query: str = "", limit: int = 10):
    params.check_text(query, "query")
    results = recall_facts(subject=subject, query=query, limit=limit, actor=actor_of(request))
    if _is_person(request):
        store.record_access(actor=actor_of(request), subject=subject.strip(), view="api recall")
    return keyset.listing([{"fact": fact_out(r.fact), "score": r.score, "parts": r.parts._asdict(),
                            "matched": list(r.matched)} for r in results],
                          None, subject=subject.strip(), query=query)


@router.get("/facts/{int:fact_id}", response=FactDetailOut, summary="One fact with its history")
@scope("facts:read")
def detail(request, fact_id: int):
    fact = _get(fact_id)
    if _is_person(request):
        store.record_access(actor=actor_of(request), subject=fact.subject, view=f"api fact {fact.pk}")
    events = [
        {"kind": e.kind, "at": e.at, "actor": e.actor, "reason": e.reason, "detail": e.detail}
        for e in fact.events.order_by("at", "id")
    ]
    return {**fact_out(fact), "events": events}


@router.post("/facts/{int:fact_id}/invalidate", response={200: FactOut, **errors_doc(400, 404, 409, 413, 415, 422)},
             summary="The fact stopped being true at invalid_at (default now)",
             openapi_extra=json_body_doc(inline_schema(InvalidateIn), {"moved": {
                 "summary": "The customer moved", "value": {"reason": "moved to Lyon",
                                                            "invalid_at": "2026-01-31T12:00:00Z"}}}))
@scope("facts:write")
def invalidate(request, fact_id: int):
    payload = read_body(request, InvalidateIn)
    fact = store.invalidate_fact(fact_id=fact_id, actor=actor_of(request), reason=payload.reason,
                                 invalid_at=payload.invalid_at)
    return fact_out(fact)

"""The pages people use to audit conversations.

Function views: parse the request, make one read or one store call, render.
Permissions are checked here (`reader_required`, conversations/roles.py), never only in templates.
A page answers htmx with just the fragment whose element id the request targets
(`_render`); every other request, history restores included, gets the whole page.
"""

import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.core.exceptions import PermissionDenied
from django.db.models import Exists, F, OuterRef, Q
from django.db.models.functions import Coalesce
from django.http import Http404, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.utils.cache import patch_vary_headers
from django.utils.http import urlencode
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from . import calls, params, plugins, store, usage_totals
from .errors import NotFound, StoreError
from .export import FORMATS, export_stream
from .http import conversation_or_404, position_or_404
from .live import etag_of, state_of
from .message_schema import KINDS
from .models import Checkpoint, Conversation, Message, parse_conversation_id
from .reads import StoredMessage, active_before, active_from, read_rows
from .roles import actor_of, is_admin, reader_required
from .templatetags.conversation_ui import turns

LIST_PAGE = 50
ROW_PAGE = 50  # rows per view per page: two views of 50 render in ~0.1 s; more arrive as you scroll
# Pages that arrive while scrolling are this many times larger: reaching row 2,400 of a
# long session takes a dozen requests, not fifty (rows off screen are not laid out: app.css).
MORE_FACTOR = 4
# Rows shown above a permalinked position, so it is seen in its context.
PERMALINK_CONTEXT = 3
TREE_LIMIT = 200
# A tool name as a filter or a call id in a link: longer is no name an agent gave.
TOOL_NAME_MAX = 200
CALL_ID_MAX = 300


# ---- helpers -------------------------------------------------------------


def _opened(request, convo, via: str, detail: str = "") -> None:
    """A person read this conversation: the access log says who, which and when."""
    plugins.conversation_opened.send(sender=Conversation, conversation_id=convo.pk, actor=actor_of(request), via=via,
                                     detail=detail)


def _render(request, template, context, *, fragments=(), status=200):
    """The fragment named after the element htmx targets, or the whole page."""
    target = request.htmx.target if request.htmx else None
    name = f"{template}#{target}" if target and target in fragments else template
    response = render(request, name, context, status=status)
    # Same URL, different body for htmx: caches must key on the headers too.
    patch_vary_headers(response, ("HX-Request", "HX-Target"))
    return response


def _int_param(request, name, *, default=None, minimum=0, maximum=params.MAX_POSITION):
    return params.int_param(request.GET, name, default=default, minimum=minimum, maximum=maximum)


# ---- the list --------------------------------------------------------------


LIST_CURSOR = "conversations"
# The list's orders: (field to sort by, its keyset kind, newest or largest first). Tokens and cost
# come from the usage totals (conversations/usage_totals.py), brought up to date before sorting.
LIST_SORTS = {
    "activity": ("last_activity_at", datetime, "Last activity"),
    "rows": ("next_position", int, "Rows"),
    "tokens": ("sort_tokens", int, "Tokens"),
    "cost": ("sort_cost", int, "Cost"),
    "created": ("created_at", datetime, "Created"),
}


NAMESPACE_CHOICES = 200
LIST_FLAGS = {
    "forks": "has forks",
    "forked": "forked from another",
    "checkpoint": "has a checkpoint",
    "pinned": "pinned",
}


@require_safe
@reader_required
def index(request):
    older = _int_param(request, "older", minimum=1, maximum=36500)
    sort = request.GET.get("sort", "activity")
    if sort not in LIST_SORTS:
        raise params.BadParameter(f"sort must be one of {', '.join(LIST_SORTS)}", field="sort")
    field, kind, _ = LIST_SORTS[sort]
    after = params.cursor_param(request.GET, "cursor", f"{LIST_CURSOR}:{sort}", kind, uuid.UUID)
    q = params.text_param(request.GET, "q", max_length=300, cut=True, collapse=True)
    namespace = params.text_param(request.GET, "namespace", max_length=store.NAMESPACE_MAX)
    about_id = params.text_param(request.GET, "about", max_length=100)
    flags = {name for name in LIST_FLAGS if request.GET.get(name) == "1"}
    # ?about=<conversation id>: the conversations about the same subject as that one. A
    # conversation's page links its subject this way, so no subject goes into an address.
    about = conversation_or_404(about_id) if about_id else None

    qs = _filtered(Conversation.objects.live().with_checkpoint_flag().with_fork_count(), q=q, namespace=namespace,
                   about=about, flags=flags, older=older)
    if sort in ("tokens", "cost"):
        usage_totals.refresh(qs.filter(Q(usage_total__isnull=True) | Q(usage_total__upto__lt=F("next_position") - 1)))
        qs = qs.annotate(sort_tokens=Coalesce(F("usage_total__input_tokens") + F("usage_total__output_tokens")
                                              + F("usage_total__cache_tokens"), 0),
                         sort_cost=Coalesce(F("usage_total__cost_micros"), 0))
    if after:
        at, cid = after
        qs = qs.filter(Q(**{f"{field}__lt": at}) | Q(**{field: at, "pk__lt": cid}))
    # Keyset, largest (newest) first; one row more than shown says whether there is a next page.
    rows = list(qs.order_by(f"-{field}", "-id")[: LIST_PAGE + 1])
    more_url = None
    if len(rows) > LIST_PAGE:
        rows = rows[:LIST_PAGE]
        kept = {k: v for k, v in request.GET.items() if k != "cursor" and v}
        last = rows[-1]
        cursor = params.encode_cursor(f"{LIST_CURSOR}:{sort}", getattr(last, field), last.pk)
        more_url = "?" + urlencode({**kept, "cursor": cursor})
    totals = usage_totals.refresh(rows)
    for row in rows:
        row.totals = totals[row.pk]
        row.namespace_label = namespace_label(row.namespace, row.meta)
    filtered = bool(q or flags or older or namespace or about)
    # The namespaces agents filed conversations under (read off the namespace index).
    namespaces = list(Conversation.objects.live().exclude(namespace="").order_by("namespace")
                      .values_list("namespace", flat=True).distinct()[:NAMESPACE_CHOICES])
    if namespace and namespace not in namespaces:
        namespaces.append(namespace)
    namespaces = [(ns, namespace_label(ns, _meta_in(ns))) for ns in namespaces]
    return _render(
        request,
        "conversations/index.html",
        {
            "conversations": rows,
            "more_url": more_url,
            "q": q,
            "namespace": namespace,
            "namespaces": namespaces,
            "about": about,
            "flags": flags,
            "flag_choices": LIST_FLAGS.items(),
            "older": older or "",
            "filtered": filtered,
            "first_page": after is None,
            "sort": sort,
            "sorts": [(key, label) for key, (_, _, label) in LIST_SORTS.items()],
            "sort_query": urlencode({k: v for k, v in request.GET.items() if k not in ("sort", "cursor") and v}),
        },
        fragments=("conversation-list", "conversation-list-more"),
    )


def _filtered(qs, *, q, namespace, about, flags, older):
    """The list's filters: words of a title or subject (or an id), a namespace, a subject, flags, age."""
    if q:
        match = Q(title__icontains=q) | Q(subject__icontains=q)
        try:
            match |= Q(pk=parse_conversation_id(q))
        except NotFound:
            pass
        qs = qs.filter(match)
    if namespace:
        qs = qs.filter(namespace=namespace)
    if about is not None:
        qs = qs.about(about.subject) if about.subject else qs.filter(pk=about.pk)
    if "forks" in flags:
        qs = qs.filter(Exists(Conversation.objects.live().filter(parent_id=OuterRef("pk"))))
    if "forked" in flags:
        qs = qs.filter(parent_id__isnull=False)
    if "checkpoint" in flags:
        qs = qs.filter(has_checkpoint=True)
    if "pinned" in flags:
        qs = qs.filter(pinned=True)
    if older:
        qs = qs.filter(last_activity_at__lt=timezone.now() - timedelta(days=older))
    return qs


def namespace_label(namespace: str, meta) -> str:
    """A namespace as a person reads it: Claude Code files a session under its project folder
    with the slashes turned to dashes (`-srv-billing`); the folder, as the session recorded it,
    is its name. Any other namespace is shown as it is (the raw value goes in a title)."""
    cwd = (meta or {}).get("claude_code", {}).get("cwd") if isinstance((meta or {}).get("claude_code"), dict) else None
    if isinstance(cwd, str) and cwd.strip() and namespace.startswith("-"):
        return cwd.strip()
    return namespace


def _meta_in(namespace: str):
    return Conversation.objects.live().filter(namespace=namespace).values_list("meta", flat=True).first()


# ---- one conversation ------------------------------------------------------


@dataclass
class Marker:
    """A checkpoint drawn between rows: the fold (latest) or an earlier one."""

    checkpoint: Checkpoint
    is_fold: bool
    is_marker = True


def _interleave(items, checkpoints, latest, *, upto):
    """Rows with checkpoint markers placed right after the position they fold.

    `upto` is the last position this page covers (None: to the end), so a marker
    is drawn exactly once across pages even when a kind filter hides its row.
    """
    marks = sorted(
        (cp for cp in checkpoints if upto is None or cp.message_position <= upto),
        key=lambda cp: (cp.message_position, cp.pk),
    )
    out, i = [], 0
    for item in items:
        while i < len(marks) and marks[i].message_position < item.position:
            out.append(Marker(marks[i], latest is not None and marks[i].pk == latest.pk))
            i += 1
        out.append(item)
    out.extend(Marker(cp, latest is not None and cp.pk == latest.pk) for cp in marks[i:])
    return out


def _kinds_param(request):
    kinds = [k for k in request.GET.getlist("kind") if k in KINDS]
    return sorted(set(kinds), key=KINDS.index)


def _query(kinds, **extra):
    pairs = [("kind", k) for k in kinds] + [(k, v) for k, v in extra.items() if v is not None]
    return "?" + urlencode(pairs) if pairs else "?"


def _descendants(conversation):
    """The fork tree under a conversation, one query per generation, at most TREE_LIMIT nodes."""
    children_of, frontier, total, truncated = {}, [conversation.pk], 0, False
    while frontier and not truncated:
        level = list(
            Conversation.objects.live()
            .filter(parent_id__in=frontier)
            # Children where they branch off, in the order of the record; then by creation.
            .order_by(F("forked_from_position").asc(nulls_last=True), "created_at", "id")
            .only("id", "title", "parent_id", "forked_from_position", "next_position", "created_at",
                  "parent_relation")[
                : TREE_LIMIT - total + 1
            ]
        )
        if total + len(level) > TREE_LIMIT:
            level, truncated = level[: TREE_LIMIT - total], True
        total += len(level)
        for child in level:
            children_of.setdefault(child.parent_id, []).append(child)
        frontier = [c.pk for c in level]

    def build(node):
        return {"conversation": node, "children": [build(c) for c in children_of.get(node.pk, [])]}

    return build(conversation), total, truncated


@require_safe
@reader_required
def conversation(request, conversation_id):
    convo = conversation_or_404(conversation_id)
    kinds = _kinds_param(request)
    last = convo.next_position - 1
    errors_only = request.GET.get("errors") == "1"
    tool = params.text_param(request.GET, "tool", max_length=TOOL_NAME_MAX, collapse=True) or None
    at = _int_param(request, "at")
    after = _int_param(request, "after", minimum=-1, default=-1)
    active_after = _int_param(request, "active_after", minimum=-1)
    # A chunk of rows the page unloaded while scrolling, asked for again (static/js/far-rows.js).
    until = _int_param(request, "until", minimum=-1)
    active_until = _int_param(request, "active_until", minimum=-1)
    # The row filters besides kind, carried by every link that pages.
    row_filters = {"errors_only": errors_only, "tool": tool}
    carried = {"errors": "1" if errors_only else None, "tool": tool}
    if at is not None:
        at = min(at, max(last, 0))
        after = max(-1, at - 1 - min(PERMALINK_CONTEXT, ROW_PAGE // 4))
    after = min(after, last)

    latest = Checkpoint.objects.latest_for(convo.pk)
    target = request.htmx.target if request.htmx else None
    fold = latest.message_position if latest else -1
    if at is not None and active_after is None and at > fold:
        # Jump-to aligns the active view on the same rows as the full record.
        active_after = max(fold, after)

    context = {
        "conversation": convo,
        "errors_only": errors_only,
        "tool": tool or "",
        "filtered": bool(kinds or errors_only or tool),
        "filter_query": _query(kinds, **carried),
        "kinds": kinds,
        "all_kinds": KINDS,
        "latest": latest,
        "at": at,
        "is_admin": is_admin(request.user),
        "fold": fold,
    }
    if target not in ("active-more", "active-chunk"):
        _record_part(request, convo, context, target=target, after=after, until=until, last=last, latest=latest,
                     kinds=kinds, row_filters=row_filters, carried=carried)
    if target in (None, "views", "active-more", "active-chunk"):
        _active_part(convo, context, target=target, active_after=active_after, active_until=active_until,
                     last=last, fold=fold, kinds=kinds, row_filters=row_filters, carried=carried)
    if context["is_admin"]:
        # Rows where "Checkpoint here" would split a tool call from its result say so instead.
        shown = [e.position for e in context.get("record", ()) if isinstance(e, StoredMessage)]
        shown += [i.position for i in context["active"].page.items] if "active" in context else []
        context["unfoldable"] = calls.unfoldable(convo.pk, last, sorted({p for p in shown if p >= fold}))
    if target is None:
        _whole_page_part(request, convo, context)
    return _render(
        request,
        "conversations/conversation.html",
        context,
        fragments=("views", "record-more", "active-more", "record-chunk", "active-chunk"),
    )


def _record_part(request, convo, context, *, target, after, until, last, latest, kinds, row_filters, carried):
    """The full record's rows: the page, a "more" page, or a chunk asked for again."""
    size = ROW_PAGE * MORE_FACTOR if target in ("record-more", "record-chunk") else ROW_PAGE
    if target != "record-chunk":
        until = None
    page = read_rows(convo.pk, after=after, until=until, limit=size, kinds=kinds, include_broken=True,
                     **row_filters)
    # Only the checkpoints this page draws: an agent that folds every hundred rows
    # must not make each page read thousands of them. Markers before the first
    # row were drawn on an earlier page; those after the last row go on the next.
    upto = page.next_after if page.next_after is not None else until
    marks = Checkpoint.objects.of(convo.pk).filter(message_position__gt=after)
    if upto is not None:
        marks = marks.filter(message_position__lte=upto)
    marks = marks.order_by("message_position", "id")[: size + 1]
    # A live-follow poll also asks for the ledger marks placed after the row it follows:
    # a harness records an action or a state change after that row was already shown.
    # The page keeps those it has (by id) and puts the others after their row.
    follows = target == "record-more" and request.GET.get("follow") == "1"
    context["record"] = plugins.ledger_timeline(
        _interleave(page.items, list(marks), latest, upto=upto), convo.pk,
        after=after - 1 if follows else after, upto=upto
    )
    context["record_turns"] = turns(page.items)
    more = page.next_after is not None
    context["record_more"] = _query(kinds, after=page.next_after, **carried) if more else None
    context["record_after"] = after
    # The positions this chunk of the page covers, (after, until]: what the page asks
    # for again, and gets exactly, when it has unloaded the chunk while scrolling.
    # At the end: everything up to the last row at the time of reading (an agent may
    # have appended a row between reading the conversation and reading its rows).
    context["record_until"] = upto if upto is not None else max([last] + [i.position for i in page.items[-1:]])
    context["record_rows"] = bool(page.items)
    context["record_earlier"] = (
        _query(kinds, after=max(-1, after - ROW_PAGE) if after - ROW_PAGE > -1 else None, **carried)
        if after > -1 else None
    )


def _active_part(convo, context, *, target, active_after, active_until, last, fold, kinds, row_filters, carried):
    """The active view's rows: what the model receives, from the latest checkpoint on."""
    size = ROW_PAGE * MORE_FACTOR if target in ("active-more", "active-chunk") else ROW_PAGE
    if target != "active-chunk":
        active_until = None
    # The latest checkpoint is the one the page has read already.
    view = active_from(convo.pk, context["latest"], after=active_after, until=active_until, limit=size, kinds=kinds,
                       include_broken=True, **row_filters)
    context["active"] = view
    context["active_turns"] = turns(view.page.items)
    context["last_position"] = last
    context["active_first_page"] = active_after is None or active_after <= context["fold"]
    context["active_start"] = view.start
    context["active_until"] = (view.page.next_after if view.page.next_after is not None
                               else active_until if active_until is not None
                               else max([last] + [i.position for i in view.page.items[-1:]]))
    context["active_earlier"] = (
        _query(kinds, active_after=max(fold, active_after - ROW_PAGE), **carried)
        if active_after is not None and active_after > fold else None
    )
    context["active_more"] = (
        _query(kinds, active_after=view.page.next_after, **carried) if view.page.next_after is not None else None
    )


def _whole_page_part(request, convo, context) -> None:
    """What only the whole page shows: lineage, forks and subagents, the ledger, live state."""
    context["checkpoint_count"] = Checkpoint.objects.of(convo.pk).count()
    context["lineage"] = convo.lineage()
    context["tree"], context["descendant_count"], context["tree_truncated"] = _descendants(convo)
    children = [c["conversation"] for c in context["tree"]["children"]]
    context["fork_count"] = sum(1 for c in children if c.parent_relation != "subagent")
    context["subagent_count"] = len(children) - context["fork_count"]
    context["ledger"] = plugins.ledger_panel(convo)
    context["live_state"] = state_of(convo, latest=context["latest"], checkpoints=context["checkpoint_count"])
    context["live_etag"] = etag_of(context["live_state"])
    _opened(request, convo, "page")


@require_safe
@reader_required
def model_saw(request, conversation_id, position):
    """The context the model had when it wrote row #position, newest first: the rows
    just before it at the top, reading back to the fold (and its handoff summary)."""
    convo = conversation_or_404(conversation_id)
    position_or_404(convo, position)
    until = _int_param(request, "until", minimum=-1)
    checkpoint = active_before(convo.pk, position, limit=1, include_broken=True).checkpoint
    fold = checkpoint.message_position if checkpoint else -1
    until = position - 1 if until is None else min(until, position - 1)
    page = read_rows(convo.pk, after=fold, until=until, limit=ROW_PAGE, descending=True, include_broken=True)
    row = read_rows(convo.pk, after=position - 1, until=position, include_broken=True).items[0]
    first_page = until == position - 1
    context = {
        "conversation": convo,
        "position": position,
        "row": row,
        "checkpoint": checkpoint,
        "items": page.items,
        "first_page": first_page,
        "last_page": page.next_after is None,
        "more_url": f"?until={page.next_after - 1}" if page.next_after is not None else None,
        "all_kinds": KINDS,
    }
    if first_page:
        from django.db.models import Sum
        from django.db.models.functions import Length

        rows = Message.objects.of(convo.pk).filter(position__gt=fold, position__lt=position)
        context["context_rows"] = position - 1 - fold
        context["context_chars"] = (rows.aggregate(n=Sum(Length("content")))["n"] or 0) + (
            len(checkpoint.summary) if checkpoint else 0)
        context["first_row"] = fold + 1
    if not request.htmx:
        _opened(request, convo, "model_saw", f"#{position}")
    return _render(request, "conversations/model_saw.html", context, fragments=("saw-more",))


@require_http_methods(["GET", "POST"])
@reader_required
def fork(request, conversation_id, position):
    """GET: a confirmation form (never writes). POST: fork and land on the child."""
    convo = conversation_or_404(conversation_id)
    position_or_404(convo, position)
    error, status, title = None, 200, ""
    if request.method == "POST":
        title = request.POST.get("title", "")
        try:
            child = store.fork_conversation(
                conversation_id=convo.pk, position=position, title=title or None, actor=actor_of(request)
            )
        except NotFound as exc:
            raise Http404(exc.message) from None
        except StoreError as exc:
            error, status = exc, exc.status
        else:
            return redirect("conversation", conversation_id=child.pk)
    row = read_rows(convo.pk, after=position - 1, until=position, include_broken=True).items[0]
    return render(
        request,
        "conversations/fork.html",
        {"conversation": convo, "position": position, "row": row, "error": error, "title": title},
        status=status,
    )


@require_http_methods(["GET", "POST"])
@reader_required
def checkpoint(request, conversation_id, position):
    """Admins fold positions 0..position into a summary they write."""
    if not is_admin(request.user):
        raise PermissionDenied("Only admins may create checkpoints.")
    convo = conversation_or_404(conversation_id)
    position_or_404(convo, position)
    latest = convo.latest_checkpoint()
    error, status, summary = None, 200, ""
    if request.method == "POST":
        summary = request.POST.get("summary", "")
        try:
            store.checkpoint_at(
                conversation_id=convo.pk, position=position, summary=summary, actor=actor_of(request)
            )
        except NotFound as exc:
            raise Http404(exc.message) from None
        except StoreError as exc:
            error, status = exc, exc.status
        else:
            return redirect(reverse("conversation", args=[convo.pk]) + f"?at={position}#p{position}")
    row = read_rows(convo.pk, after=position - 1, until=position, include_broken=True).items[0]
    unavailable = None if error else calls.unfoldable(convo.pk, convo.next_position - 1, [position]).get(position)
    return render(
        request,
        "conversations/checkpoint.html",
        {"conversation": convo, "position": position, "row": row, "error": error, "summary": summary,
         "latest": latest, "unavailable": unavailable},
        status=status,
    )


@require_safe
@reader_required
def export(request, conversation_id, fmt):
    if fmt not in FORMATS:
        raise Http404(f"unknown export format; expected one of {', '.join(FORMATS)}")
    convo = conversation_or_404(conversation_id)
    try:
        stream = export_stream(convo.pk, fmt)
    except NotFound as exc:
        raise Http404(exc.message) from None
    _opened(request, convo, "export", fmt)
    store.record_audit(
        actor=actor_of(request), action="conversation.exported", target_type="conversation",
        target_id=str(convo.pk), detail={"format": fmt, "messages": convo.next_position},
    )
    response = StreamingHttpResponse(stream.chunks, content_type=stream.content_type)
    response["Content-Disposition"] = f'attachment; filename="{stream.filename}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response


@require_POST
@reader_required
def pin(request, conversation_id):
    """Admins pin a conversation (age-based pruning never takes it) or unpin it."""
    if not is_admin(request.user):
        raise PermissionDenied("Only admins may pin conversations.")
    convo = conversation_or_404(conversation_id)
    store.set_pinned(conversation_id=convo.pk, pinned=request.POST.get("pinned") == "1", actor=actor_of(request))
    return redirect("conversation", conversation_id=convo.pk)


@require_safe
@reader_required
def tool_link(request, conversation_id, position):
    """From a tool call to its result (?call=<id>), or from a result back to its call."""
    import json

    convo = conversation_or_404(conversation_id)
    position_or_404(convo, position)
    call = params.text_param(request.GET, "call", max_length=CALL_ID_MAX)
    rows = Message.objects.of(convo.pk)
    if call:
        key = '"tool_call_id":' + json.dumps(call, ensure_ascii=False) + ","
        found = rows.filter(kind="tool", position__gt=position, content__contains=key).order_by("position")
        missing = f"no result of call {call!r} after #{position}"
    else:
        row = rows.filter(position=position, kind="tool").values_list("content", flat=True).first()
        try:
            call = json.loads(row)["tool_call_id"] if row else ""
        except (ValueError, KeyError, TypeError):
            call = ""
        key = '"id":' + json.dumps(call, ensure_ascii=False) + ","
        found = rows.filter(kind="assistant", position__lt=position, content__contains=key).order_by("-position")
        missing = f"no call {call!r} before #{position}" if call else f"#{position} is not a tool result"
    target = found.values_list("position", flat=True).first() if call else None
    if target is None:
        raise Http404(missing)
    return redirect(reverse("conversation", args=[convo.pk]) + f"?at={target}#p{target}")


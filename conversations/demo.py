"""Demonstration data: what a new user sees on first start.

Everything is written through the store, as an agent would write it.
"""

import hashlib
import random
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.utils import timezone

from . import store
from .facts import store as facts
from .frameworks import samples
from .imports import entry_appends, sessions
from .ledger import store as ledger
from .models import Conversation

SUPPORT_SUBJECT = "customer:maria.keller@example.com"


REFUND_KEY = "refund:order-48213:problend-900:149.00-EUR"
SUPPORT_AGENT = "key:support-bot"


def _support_ticket():
    """The refund ticket. Its dispatcher writes the task state and the actions
    ledger after the tool results, as code would: the store-credit refund times
    out, is retried with the same business key, and the ledger shows it happened once."""
    conversation = store.create_conversation(
        title="Order #48213: blender arrived cracked",
        subject=SUPPORT_SUBJECT,
        meta={"channel": "email", "agent": "support-bot v3.2"},
    )
    cid = conversation.pk
    order = {"order": "48213", "item": "ProBlend 900 blender", "amount_eur": 149.0}
    store_credit = {"order_id": "48213", "amount_eur": 149.0, "method": "store_credit",
                    "idempotency_key": REFUND_KEY}

    def state(version, **values):
        return ledger.set_state(conversation_id=cid, state=values, expected_version=version, actor=SUPPORT_AGENT)

    steps = [
        {"kind": "system", "content": "You are the support agent for Kestrel Home. Refunds over 200 EUR need a "
                                      "supervisor. Be brief and kind."},
        {"kind": "user", "content": "Hi, my order 48213 arrived today and the blender jug has a crack down the side. "
                                    "I'd like my money back please."},
        {"kind": "thought", "text": "Customer reports damage on arrival. Look the order up before promising anything."},
        {"kind": "assistant", "content": "I'm sorry it arrived damaged. Let me pull up your order.",
         "tool_calls": [{"id": "call_lookup_1", "name": "lookup_order", "arguments": {"order_id": "48213"}}],
         "meta": {"model": "claude-sonnet", "usage": {"input_tokens": 812, "output_tokens": 41}}},
        {"kind": "tool", "tool_call_id": "call_lookup_1", "name": "lookup_order",
         "content": '{"order_id": "48213", "item": "ProBlend 900 blender", "price_eur": 149.0, '
                    '"delivered": "2026-11-26", "customer_since": "2021-03-02", "previous_refunds": 0}'},
        lambda: state(0, **order),
        {"kind": "assistant", "content": "I can see the ProBlend 900, delivered on 26 November. Would you prefer a "
                                         "replacement or a refund to your card?"},
        {"kind": "user", "content": "A refund please, I've already bought another one locally."},
        lambda: state(1, **order, decision="refund"),
        {"kind": "assistant", "content": "Understood, issuing the refund now.",
         "tool_calls": [{"id": "call_refund_1", "name": "issue_refund",
                         "arguments": {"order_id": "48213", "amount_eur": 149.0, "reason": "damaged_on_arrival"}}]},
        {"kind": "tool", "tool_call_id": "call_refund_1", "name": "issue_refund", "is_error": True,
         "content": "PaymentGatewayError: card ending 4417 expired; refund must go to store credit or a new card"},
        {"kind": "assistant", "content": "The refund couldn't go to the card ending 4417 because it has expired. "
                                         "I can refund you as store credit right away, or to another card if you "
                                         "send the details through the secure link. Which would you like?"},
        {"kind": "user", "content": "Store credit is fine."},
        lambda: state(2, **order, decision="refund", method="store_credit"),
        {"kind": "assistant", "content": "Done in a moment.",
         "tool_calls": [{"id": "call_refund_2", "name": "issue_refund", "arguments": store_credit}]},
        {"kind": "tool", "tool_call_id": "call_refund_2", "name": "issue_refund", "is_error": True,
         "content": "TimeoutError: the payments service did not answer within 10 s"},
        # The payments service's confirmation reached the dispatcher after the tool had
        # given up: the refund went out, and code records it.
        lambda: ledger.record_action(conversation_id=cid, idempotency_key=REFUND_KEY, name="issue_refund",
                                     arguments=store_credit, result={"status": "ok", "credit_id": "SC-99120",
                                                                     "amount_eur": 149.0},
                                     status="performed", actor=SUPPORT_AGENT),
        {"kind": "assistant",
         "content": "The payments service timed out. Retrying with the same key, so it cannot pay twice.",
         "tool_calls": [{"id": "call_refund_3", "name": "issue_refund", "arguments": store_credit}]},
        {"kind": "tool", "tool_call_id": "call_refund_3", "name": "issue_refund",
         "content": '{"status": "already_performed", "credit_id": "SC-99120", "amount_eur": 149.0}'},
        lambda: ledger.record_action(conversation_id=cid, idempotency_key=REFUND_KEY, name="issue_refund",
                                     arguments=store_credit, result={"status": "already_performed",
                                                                     "credit_id": "SC-99120", "amount_eur": 149.0},
                                     status="performed", actor=SUPPORT_AGENT),
        lambda: state(3, **order, decision="refund", method="store_credit", outcome="refunded: store credit SC-99120"),
        {"kind": "assistant", "content": "You now have 149.00 EUR of store credit (reference SC-99120). No need to "
                                         "send the jug back. Sorry again for the trouble!"},
        {"kind": "note",
         "text": "Customer preferred store credit once the card refund failed. Card on file is expired."},
    ]
    positions = []
    for step in steps:
        if callable(step):
            step()
        else:
            positions.append(store.append_message(conversation_id=cid, message=step))
    return conversation, positions


FILES = ["billing/invoice.py", "billing/tax.py", "billing/tests/test_invoice.py", "api/routes.py", "core/money.py"]
TASKS = [
    "rounding of VAT on multi-line invoices",
    "the currency conversion cache that never expires",
    "a flaky test in test_invoice around month boundaries",
    "the /invoices endpoint returning 500 on an empty cart",
    "Decimal vs float mixing in core/money.py",
]


def _coding_session(rng: random.Random, turns: int = 600, marks: dict | None = None):
    """The long coding session; `marks` gets the positions the demo facts cite."""
    marks = {} if marks is None else marks
    conversation = store.create_conversation(
        title="Refactor billing: VAT rounding and money types",
        subject="team:payments",
        meta={"repo": "kestrel/shop", "agent": "coder v0.9"},
    )
    cid = conversation.pk
    marks["system"] = store.append_message(conversation_id=cid, message={
        "kind": "system",
        "content": "You are a coding agent working in the kestrel/shop repository. Run the tests before every commit."})
    call = 0
    checkpoint_done = False
    for turn in range(turns):
        task = TASKS[turn % len(TASKS)]
        path = rng.choice(FILES)
        call += 2
        failed = rng.random() < 0.3
        # One turn, one batch (one counter bump): on PostgreSQL, bumping one conversation's row
        # thousands of times in the demo's single transaction made each append slower than the last.
        turn_rows = store.append_messages(conversation_id=cid, messages=[
            {"kind": "user", "content": f"Next: look at {task}. Start from {path}."},
            {"kind": "assistant", "content": f"Reading {path} first.",
             "tool_calls": [{"id": f"call_{call - 1}", "name": "read_file",
                             "arguments": {"path": path, "start": 1, "end": 120}}],
             "meta": {"model": "claude-sonnet", "usage": {"input_tokens": 2000 + 37 * turn, "output_tokens": 60}}},
            {"kind": "tool", "tool_call_id": f"call_{call - 1}", "name": "read_file",
             "content": f"# {path}\nfrom decimal import Decimal, ROUND_HALF_UP\n\ndef line_total(qty, unit):\n"
                        "    return (Decimal(qty) * Decimal(unit)).quantize(Decimal('0.01'), ROUND_HALF_UP)\n"},
            {"kind": "assistant", "content": "Running the billing tests.",
             "tool_calls": [{"id": f"call_{call}", "name": "run_tests",
                             "arguments": {"path": "billing/tests", "flags": ["-x", "-q"]}}]},
            {"kind": "tool", "tool_call_id": f"call_{call}", "name": "run_tests", "is_error": failed,
             "content": ("FAILED billing/tests/test_invoice.py::test_vat_rounding - "
                         "assert Decimal('20.01') == Decimal('20.00')"
                         if failed else f"{40 + turn % 7} passed in {1 + rng.random():.2f}s")},
            {"kind": "assistant",
             "content": ("The VAT is rounded per line, then summed; it should be summed, then rounded once. Fixing."
                         if failed else f"Tests pass. {task.capitalize()} is handled; committing.")},
        ])
        marks.setdefault(f"task:{turn % len(TASKS)}", turn_rows.first_position)
        position = turn_rows.last_position
        if failed:
            marks.setdefault("vat_fix", position)
        if not checkpoint_done and turn == turns // 2:
            position = store.append_message(conversation_id=cid, message={
                "kind": "note", "text": "Context window at 80%: folding the first half of the session."})
            store.checkpoint_at(
                conversation_id=cid,
                position=position,
                summary=("So far: VAT is now summed then rounded once (billing/tax.py), money values are Decimal "
                         "end to end (core/money.py), the currency cache expires after 1 hour, and the month-boundary "
                         "test is fixed by freezing time. Open: the /invoices 500 on an empty cart."),
                created_by="agent:coder",
            )
            checkpoint_done = True
    return conversation


def _journal():
    conversation = store.create_conversation(
        title="Night shift journal: inbox triage agent",
        subject="agent:triage-01",
        meta={"agent": "triage-01"},
    )
    entries = [
        ("woke", "Woke at 02:00 UTC for the scheduled inbox sweep. 37 unread."),
        ("heard", "Email from ops: the warehouse in Leipzig is closed until Monday."),
        ("thought", "Orders routed to Leipzig will slip; customers asking about delivery dates need a heads-up."),
        ("did", "Tagged 12 delivery-date questions with 'leipzig-closure' and drafted a template reply."),
        ("said", "Posted in #support: 'Leipzig closed until Monday; template LEIPZIG-DELAY is ready for review.'"),
        ("heard", "Reply from Sam: approved, send it."),
        ("did", "Sent the template to 12 customers."),
        ("note", "Next sweep: check whether any of the 12 replied asking to cancel."),
        ("thought", "Two emails look like phishing (lookalike domain kestrel-h0me.com); do not open links."),
        ("did", "Moved 2 suspected phishing emails to quarantine and reported them to security."),
        ("note", "Sweep done at 02:41 UTC. 0 unread."),
    ]
    for kind, text in entries:
        store.append_message(conversation_id=conversation.pk, message={"kind": kind, "text": text})
    return conversation


REVIEWER = "user:demo-reviewer"


def _support_facts(ticket, at: list[int]):
    """What the support agent learnt about Maria Keller, in every state the review
    pages show: current, awaiting review, rejected, superseded and invalidated.
    `at` are the ticket's positions, in the order of its steps."""
    cid, agent = ticket.pk, "key:support-bot"

    def propose(text, category, importance, position, **kw):
        return facts.propose_fact(subject=SUPPORT_SUBJECT, text=text, category=category, importance=importance,
                                  created_by=agent, source_conversation_id=cid, source_position=at[position], **kw)

    credit = propose("Prefers store credit when a card refund fails", "preference", 7, 16)
    facts.approve_fact(fact_id=credit.pk, actor=REVIEWER)
    since = propose("Customer since 2021", "profile", 4, 4,
                    valid_from=datetime(2021, 3, 2, tzinfo=UTC))
    facts.approve_fact(fact_id=since.pk, actor=REVIEWER)
    facts.supersede_fact(fact_id=since.pk, actor=REVIEWER,
                         text="Customer since 2 March 2021; no refunds before order 48213",
                         reason="Exact date and refund history from the order lookup")
    card = propose("Refunds go to her card ending 4417", "profile", 5, 7,
                   valid_from=timezone.now() - timedelta(days=30))
    facts.approve_fact(fact_id=card.pk, actor=REVIEWER)
    facts.invalidate_fact(fact_id=card.pk, actor=REVIEWER,
                          reason="The card expired: the refund to it failed (issue_refund error)")
    pattern = propose("Likely to return items often", "observation", 3, 1)
    facts.reject_fact(fact_id=pattern.pk, actor=REVIEWER,
                      reason="One damaged delivery is not a pattern; too speculative to keep about a person")
    # Left for a person to review on first start.
    propose("Card ending 4417 is expired", "observation", 6, 8)


def _payments_facts(coding, marks: dict):
    """What the coding agent settled for the payments team."""
    cid, agent = coding.pk, "key:coder"
    rule = facts.propose_fact(subject="team:payments", text="Run the billing tests before every commit",
                              category="decision", importance=5, created_by=agent,
                              source_conversation_id=cid, source_position=marks["system"])
    facts.approve_fact(fact_id=rule.pk, actor=REVIEWER)
    vat_at = marks.get("vat_fix", marks.get("task:0"))
    if vat_at is not None:
        vat = facts.propose_fact(
            subject="team:payments", text="VAT is summed over an invoice's lines, then rounded once (ROUND_HALF_UP), "
            "never rounded per line", category="decision", importance=8, created_by=agent,
            source_conversation_id=cid, source_position=vat_at)
        facts.approve_fact(fact_id=vat.pk, actor=REVIEWER)
    if "task:3" in marks:
        facts.propose_fact(subject="team:payments", text="The /invoices endpoint returns 500 on an empty cart",
                           category="observation", importance=6, created_by=agent,
                           source_conversation_id=cid, source_position=marks["task:3"])


def _coding_snapshots(coding, marks: dict):
    """The harness snapshotted the workspace before the first turns (as the client's
    `snapshot_workspace` does); the agent committed after the third, so HEAD moved."""
    head, committed = hashlib.sha1(b"kestrel/shop HEAD").hexdigest(), hashlib.sha1(b"kestrel/shop VAT fix").hexdigest()
    figures = [(1, 12, 3), (2, 31, 9), (4, 58, 14), (1, 6, 0), (2, 19, 2)]
    for turn, (files, insertions, deletions) in enumerate(figures):
        position = marks.get(f"task:{turn}")
        if position is None:
            continue
        ledger.record_snapshot(
            conversation_id=coding.pk, position=position, repo="/home/dev/kestrel-shop",
            commit=hashlib.sha1(f"snapshot {turn}".encode()).hexdigest(), base=head if turn < 3 else committed,
            files_changed=files, insertions=insertions, deletions=deletions, actor="key:coder",
        )


def _claude_agent_session(start):
    """A Claude Agent SDK session with a compaction and a subagent, stored as the SDK's
    SessionStore stores it (memoryui_client.integrations.claude): batches of entries per
    turn through the imports door, the subagent's transcript after the turn that
    spawned it, its .meta.json as an agent_metadata entry."""
    session = samples.claude_agent_session(start=start)
    entries, turn = session.entries, []
    for entry in entries:  # the SDK flushes once per turn: at each new prompt
        content = (entry.get("message") or {}).get("content")
        if turn and entry.get("type") == "user" and isinstance(content, str) and not entry.get("isCompactSummary"):
            entry_appends.append_entries(format="claude-code", namespace=session.project_key,
                                    external_id=session.session_id, entries=turn, actor="key:claude-agent-sdk")
            turn = []
        turn.append(entry)
    entry_appends.append_entries(format="claude-code", namespace=session.project_key, external_id=session.session_id,
                            entries=turn, actor="key:claude-agent-sdk")
    for subpath, sub in session.subagents.items():
        meta = {**session.subagent_meta.get(subpath, {}), "type": "agent_metadata"}
        entry_appends.append_entries(format="claude-code", namespace=session.project_key,
                                external_id=f"{session.session_id}/{subpath}", entries=sub + [meta],
                                actor="key:claude-agent-sdk")
    return Conversation.objects.get(namespace=session.project_key, external_id=session.session_id)


def _openai_agents_session():
    """An OpenAI Agents SDK session, turn by turn, as MemoryuiSession.add_items stores it."""
    items, turn = samples.openai_agents_items(), []
    for item in items:
        if turn and item.get("role") == "user":
            sessions.append_items(namespace="openai-agents", session_id=samples.OPENAI_SESSION_ID, items=turn,
                                  actor="key:travel-desk")
            turn = []
        turn.append(item)
    stream = sessions.append_items(namespace="openai-agents", session_id=samples.OPENAI_SESSION_ID, items=turn,
                                   actor="key:travel-desk")
    return Conversation.objects.get(pk=stream.source.conversation_id)


def _mcp_conversation():
    """A conversation an agent in Claude Code wrote through memoryui-mcp (create_conversation,
    then append_messages): the same store calls the API makes for those tools."""
    conversation, _ = store.get_or_create_conversation(
        namespace="claude-code-mcp", external_id="release-notes-4.2", title=samples.MCP_TITLE,
        meta={"written_by": "memoryui-mcp", "client": "Claude Code"})
    store.append_messages(conversation_id=conversation.pk, messages=samples.mcp_messages())
    return conversation


def load_demo(*, coding_turns: int = 600) -> list:
    """Create the demonstration conversations and the facts their agents proposed
    (some reviewed, some waiting); returns the conversations."""
    rng = random.Random(48213)
    marks = {}
    with transaction.atomic():
        ticket, ticket_positions = _support_ticket()
        _support_facts(ticket, ticket_positions)
        coding = _coding_session(rng, turns=coding_turns, marks=marks)
        _payments_facts(coding, marks)
        _coding_snapshots(coding, marks)
        journal = _journal()
        fork = store.fork_conversation(
            conversation_id=ticket.pk, position=6, title="Order #48213: what if we offered a replacement?"
        )
        store.append_message(conversation_id=fork.pk, message={
            "kind": "assistant", "content": "Before refunding: we have the ProBlend 900 in stock and could ship a new "
                                            "one tomorrow at no cost. Would that suit you better?"})
        # The fork carried the task state as of #6 (version 2) and goes its own way from it.
        ledger.set_state(conversation_id=fork.pk, expected_version=2, actor=SUPPORT_AGENT, state={
            "order": "48213", "item": "ProBlend 900 blender", "amount_eur": 149.0, "decision": "replacement offered"})
        # One conversation through each framework door (clients/python/…/integrations).
        claude_session = _claude_agent_session(timezone.now() - timedelta(days=2, hours=3))
        agents_session = _openai_agents_session()
        mcp = _mcp_conversation()
    return [ticket, coding, journal, fork, claude_session, agents_session, mcp]

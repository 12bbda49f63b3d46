"""Demonstration data: what a new user sees on first start.

Everything is written through the store, as an agent would write it.
"""

import random

from django.db import transaction

from . import store

SUPPORT_SUBJECT = "customer:maria.keller@example.com"


def _support_ticket():
    conversation = store.create_conversation(
        title="Order #48213: blender arrived cracked",
        subject=SUPPORT_SUBJECT,
        meta={"channel": "email", "agent": "support-bot v3.2"},
    )
    steps = [
        {"kind": "system", "content": "You are the support agent for Kestrel Home. Refunds over 200 EUR need a supervisor. Be brief and kind."},
        {"kind": "user", "content": "Hi, my order 48213 arrived today and the blender jug has a crack down the side. I'd like my money back please."},
        {"kind": "thought", "text": "Customer reports damage on arrival. Look the order up before promising anything."},
        {"kind": "assistant", "content": "I'm sorry it arrived damaged. Let me pull up your order.",
         "tool_calls": [{"id": "call_lookup_1", "name": "lookup_order", "arguments": {"order_id": "48213"}}],
         "meta": {"model": "claude-sonnet", "usage": {"input_tokens": 812, "output_tokens": 41}}},
        {"kind": "tool", "tool_call_id": "call_lookup_1", "name": "lookup_order",
         "content": '{"order_id": "48213", "item": "ProBlend 900 blender", "price_eur": 149.0, "delivered": "2026-11-26", "customer_since": "2021-03-02", "previous_refunds": 0}'},
        {"kind": "assistant", "content": "I can see the ProBlend 900, delivered on 26 November. Would you prefer a replacement or a refund to your card?"},
        {"kind": "user", "content": "A refund please, I've already bought another one locally."},
        {"kind": "assistant", "content": "Understood, issuing the refund now.",
         "tool_calls": [{"id": "call_refund_1", "name": "issue_refund", "arguments": {"order_id": "48213", "amount_eur": 149.0, "reason": "damaged_on_arrival"}}]},
        {"kind": "tool", "tool_call_id": "call_refund_1", "name": "issue_refund", "is_error": True,
         "content": "PaymentGatewayError: card ending 4417 expired; refund must go to store credit or a new card"},
        {"kind": "assistant", "content": "The refund couldn't go to the card ending 4417 because it has expired. I can refund you as store credit right away, or to another card if you send the details through the secure link. Which would you like?"},
        {"kind": "user", "content": "Store credit is fine."},
        {"kind": "assistant", "content": "Done in a moment.",
         "tool_calls": [{"id": "call_refund_2", "name": "issue_refund", "arguments": {"order_id": "48213", "amount_eur": 149.0, "method": "store_credit"}}]},
        {"kind": "tool", "tool_call_id": "call_refund_2", "name": "issue_refund", "content": '{"status": "ok", "credit_id": "SC-99120", "amount_eur": 149.0}'},
        {"kind": "assistant", "content": "You now have 149.00 EUR of store credit (reference SC-99120). No need to send the jug back. Sorry again for the trouble!"},
        {"kind": "note", "text": "Customer preferred store credit once the card refund failed. Card on file is expired."},
    ]
    for step in steps:
        store.append_message(conversation_id=conversation.pk, message=step)
    return conversation


FILES = ["billing/invoice.py", "billing/tax.py", "billing/tests/test_invoice.py", "api/routes.py", "core/money.py"]
TASKS = [
    "rounding of VAT on multi-line invoices",
    "the currency conversion cache that never expires",
    "a flaky test in test_invoice around month boundaries",
    "the /invoices endpoint returning 500 on an empty cart",
    "Decimal vs float mixing in core/money.py",
]


def _coding_session(rng: random.Random, turns: int = 600):
    conversation = store.create_conversation(
        title="Refactor billing: VAT rounding and money types",
        subject="team:payments",
        meta={"repo": "kestrel/shop", "agent": "coder v0.9"},
    )
    cid = conversation.pk
    store.append_message(conversation_id=cid, message={
        "kind": "system", "content": "You are a coding agent working in the kestrel/shop repository. Run the tests before every commit."})
    call = 0
    checkpoint_done = False
    for turn in range(turns):
        task = TASKS[turn % len(TASKS)]
        path = rng.choice(FILES)
        store.append_message(conversation_id=cid, message={
            "kind": "user", "content": f"Next: look at {task}. Start from {path}."})
        call += 1
        store.append_message(conversation_id=cid, message={
            "kind": "assistant", "content": f"Reading {path} first.",
            "tool_calls": [{"id": f"call_{call}", "name": "read_file", "arguments": {"path": path, "start": 1, "end": 120}}],
            "meta": {"model": "claude-sonnet", "usage": {"input_tokens": 2000 + 37 * turn, "output_tokens": 60}}})
        store.append_message(conversation_id=cid, message={
            "kind": "tool", "tool_call_id": f"call_{call}", "name": "read_file",
            "content": f"# {path}\nfrom decimal import Decimal, ROUND_HALF_UP\n\ndef line_total(qty, unit):\n    return (Decimal(qty) * Decimal(unit)).quantize(Decimal('0.01'), ROUND_HALF_UP)\n"})
        call += 1
        failed = rng.random() < 0.3
        store.append_message(conversation_id=cid, message={
            "kind": "assistant", "content": "Running the billing tests.",
            "tool_calls": [{"id": f"call_{call}", "name": "run_tests", "arguments": {"path": "billing/tests", "flags": ["-x", "-q"]}}]})
        store.append_message(conversation_id=cid, message={
            "kind": "tool", "tool_call_id": f"call_{call}", "name": "run_tests", "is_error": failed,
            "content": ("FAILED billing/tests/test_invoice.py::test_vat_rounding - assert Decimal('20.01') == Decimal('20.00')"
                        if failed else f"{40 + turn % 7} passed in {1 + rng.random():.2f}s")})
        store.append_message(conversation_id=cid, message={
            "kind": "assistant",
            "content": ("The VAT is rounded per line, then summed; it should be summed, then rounded once. Fixing."
                        if failed else f"Tests pass. {task.capitalize()} is handled; committing.")})
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


def load_demo(*, coding_turns: int = 600) -> list:
    """Create the demonstration conversations; returns them."""
    rng = random.Random(48213)
    with transaction.atomic():
        ticket = _support_ticket()
        coding = _coding_session(rng, turns=coding_turns)
        journal = _journal()
        fork = store.fork_conversation(
            conversation_id=ticket.pk, position=6, title="Order #48213: what if we offered a replacement?"
        )
        store.append_message(conversation_id=fork.pk, message={
            "kind": "assistant", "content": "Before refunding: we have the ProBlend 900 in stock and could ship a new one tomorrow at no cost. Would that suit you better?"})
    return [ticket, coding, journal, fork]

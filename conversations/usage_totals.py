"""Each conversation's tokens and cost so far, for the conversation list to show and sort by.

Counting them means reading every reply's usage: too much for a list of many conversations
on every load. `UsageTotal` keeps what was counted, through which position; `refresh` reads
only the rows appended since, for the conversations asked for (a page of the list, or every
conversation of the scope before sorting by tokens or cost: the first such sort on a large
server counts everything once, the next ones only what is new). Rows never change, so a
total is never wrong, only behind; a fork counts its copied rows as its own.
"""

from decimal import Decimal

from django.db import transaction

from .models import Message, UsageTotal
from .usage import stored_usage

BATCH = 2000


def refresh(conversations) -> dict:
    """{conversation id: UsageTotal}, each counted through the conversation's last row."""
    conversations = list(conversations)
    known = {t.conversation_id: t for t in UsageTotal.objects.filter(conversation_id__in=[c.pk for c in conversations])}
    out = {}
    for conversation in conversations:
        total = known.get(conversation.pk) or UsageTotal(conversation_id=conversation.pk)
        last = conversation.next_position - 1
        if total.upto < last:
            _count(total, last)
        out[conversation.pk] = total
    return out


def _count(total: UsageTotal, last: int) -> None:
    cost = Decimal(total.cost_micros) / 1_000_000
    rows = (Message.objects.of(total.conversation_id)
            .filter(position__gt=total.upto, position__lte=last, kind="assistant", content__contains='"usage"')
            .values_list("content", flat=True))
    for content in rows.iterator(chunk_size=BATCH):
        usage = stored_usage(content)
        if usage is None:
            continue
        total.replies += 1
        total.input_tokens += usage.input
        total.output_tokens += usage.output
        total.cache_tokens += usage.cache_read + usage.cache_write
        if usage.cost is None:
            total.unpriced += 1
        else:
            cost += usage.cost
    total.cost_micros = int(cost * 1_000_000)
    total.upto = last
    with transaction.atomic():
        UsageTotal.objects.update_or_create(conversation_id=total.conversation_id, defaults={
            "upto": total.upto, "replies": total.replies, "input_tokens": total.input_tokens,
            "output_tokens": total.output_tokens, "cache_tokens": total.cache_tokens,
            "cost_micros": total.cost_micros, "unpriced": total.unpriced})

from django import template

from conversations.ledger.reads import compact as _compact

register = template.Library()


@register.filter
def compact(value) -> str:
    """A JSON value on one line."""
    return _compact(value)


@register.filter
def short_sha(value: str) -> str:
    return (value or "")[:10]

"""The API's JSON renderer: stored message bytes go out unchanged.

A message is stored as JSON text, encoded once by the store. Ninja serializes every
answer from its `*Out` schema; a field holding a `RawJson` (`api_schemas.StoredJson`)
passes validation untouched, and this renderer writes its text into the answer as it
is, byte for byte, where any JSON encoder would re-encode a parsed value (separators,
escapes and float spellings could all change). Moments are written as everywhere else
(`params.iso`: UTC, a `Z`, microseconds kept); text is UTF-8, not `\\u` escapes.
"""

import re
import secrets
from datetime import datetime

from ninja.renderers import BaseRenderer
from ninja.responses import NinjaJSONEncoder

from .params import iso


class RawJson:
    """JSON text to send as it is (its producer vouches that it is valid JSON)."""

    __slots__ = ("text",)

    def __init__(self, text: str):
        self.text = text


class _Encoder(NinjaJSONEncoder):
    def __init__(self):
        super().__init__(ensure_ascii=False)
        self.raws: list[str] = []
        # A token no value can hold by chance marks where each raw text goes.
        self.token = secrets.token_hex(8)

    def default(self, o):
        if isinstance(o, RawJson):
            self.raws.append(o.text)
            return f"{self.token}:{len(self.raws) - 1}"
        if isinstance(o, datetime):
            return iso(o)
        return super().default(o)


class JsonRenderer(BaseRenderer):
    media_type = "application/json"
    charset = "utf-8"

    def render(self, request, data, *, response_status):
        encoder = _Encoder()
        text = encoder.encode(data)
        if not encoder.raws:
            return text
        raws = encoder.raws
        return re.sub(f'"{encoder.token}:([0-9]+)"', lambda m: raws[int(m.group(1))], text)

"""Logs an operator's tools can read: MEMORYUI_LOG_FORMAT=json writes one JSON object a line.

Every record written while a request is served carries that request's id (a context
variable set by memoryui.requestlog), so a request's line, its warnings and its
traceback can be joined. A traceback is a field of its record, not lines of its own:
a log shipper that reads a line at a time keeps it whole.

No Django import here: gunicorn's master formats its own lines with this too
(memoryui/gunicorn_conf.py), before any app is loaded.
"""

import json
import logging
from contextvars import ContextVar
from datetime import UTC, datetime

request_id: ContextVar[str] = ContextVar("memoryui_request_id", default="")

# Attributes every LogRecord has; anything else given through `extra=` is a field of the line.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        rid = request_id.get()
        if rid:
            line["request_id"] = rid
        for key, value in vars(record).items():
            # Plain values only: Django passes the request object, whose repr holds the query string.
            if (key not in _STANDARD and not key.startswith("_") and key not in line
                    and isinstance(value, (str, int, float, bool, type(None)))):
                line[key] = value
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            line["exception"] = record.exc_text
        if record.stack_info:
            line["stack"] = self.formatStack(record.stack_info)
        return json.dumps(line, ensure_ascii=False)

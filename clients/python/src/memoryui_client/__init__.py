"""memoryui's Python client: `Memoryui`, `AsyncMemoryui`, typed errors, and model-API formats."""

from ._core import Call, Retries
from .client import AsyncMemoryui, Memoryui
from .errors import (
    BadRequest,
    CheckpointSplitsToolCall,
    Conflict,
    Forbidden,
    IdempotencyKeyReused,
    InvalidInput,
    MemoryuiError,
    NotFound,
    PayloadTooLarge,
    PositionConflict,
    RateLimited,
    ServerError,
    TransportError,
    Unauthenticated,
    Unencodable,
    UnsupportedMediaType,
)
from .formats import NothingToSend, to_anthropic_messages, to_gemini_contents, to_openai_messages
from .workspace import Snapshot, SnapshotError, restore_snapshot, take_snapshot

__all__ = [
    "AsyncMemoryui", "BadRequest", "Call", "CheckpointSplitsToolCall", "Conflict", "Forbidden", "IdempotencyKeyReused",
    "InvalidInput",
    "Memoryui", "MemoryuiError", "NotFound", "NothingToSend", "PayloadTooLarge", "PositionConflict", "RateLimited",
    "Retries",
    "ServerError", "Snapshot", "SnapshotError", "TransportError", "Unauthenticated", "Unencodable",
    "UnsupportedMediaType",
    "restore_snapshot", "take_snapshot", "to_anthropic_messages", "to_gemini_contents", "to_openai_messages",
]

"""The conversations part of the agent API (issue: Agent API)."""

from ninja import Router

router = Router(tags=["conversations"])

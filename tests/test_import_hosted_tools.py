"""Hosted tool calls imported from OpenAI Responses bodies and Codex rollouts are rows: the
conversation page shows each call and its result, and the exports of the active view are
requests the providers' typed parameters accept."""

import json
from pathlib import Path

import pytest
from django.test import Client

from conversations.export import export_stream
from conversations.imports import importer
from conversations.models import Conversation
from tests.api_support import Api, login_as, make_key
from tests.provider_oracle import assert_valid_anthropic, assert_valid_openai, openai_body

pytestmark = pytest.mark.django_db
FIX = Path(__file__).parent / "fixtures" / "formats"


def test_the_page_shows_each_hosted_call_and_its_result():
    answer = Api(Client(), make_key(["read", "write"])).post(
        "/imports", {"content": (FIX / "openai_responses_hosted.json").read_text()}).json()
    assert answer["messages"] == 8 and not answer["problems"]
    page = Client()
    login_as(page, "auditor")
    html = page.get(f"/conversations/{answer['conversation_id']}/").content.decode()
    for shown in ("web_search", "code_interpreter", "image_generation", "ws_68f0c2b7", "tide times Brest today"):
        assert shown in html, shown


@pytest.mark.parametrize("name", ["openai_responses_hosted.json", "openai_responses_image_only.json",
                                  "codex_web_search.jsonl", "anthropic_response.json", "openai_chat_response.json"])
def test_the_exports_of_a_body_with_hosted_calls_or_a_response_are_valid_requests(name):
    result = importer.import_text((FIX / name).read_text())
    conversation = Conversation.objects.get(pk=result.conversation_id)
    assert result.messages > 0
    assert_valid_openai(openai_body(json.loads("".join(export_stream(conversation.pk, "openai-chat").chunks))))
    assert_valid_anthropic(json.loads("".join(export_stream(conversation.pk, "anthropic").chunks)))

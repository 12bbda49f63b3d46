"""The crawler's world: demo-like data and an id for every kind of path parameter, shared by
the crawler (tests/test_crawler.py) and the browser walk over every page
(tests/test_browser_every_page.py). Registered by tests/conftest.py (`pytest_plugins`).
"""

import pytest

from conversations import api_keys, store
from conversations.demo import load_demo
from conversations.facts.models import Fact
from conversations.retention import erasure
from conversations.retention.models import DeletionReceipt, PruneRun
from conversations.retention.pruning import prune_older_than
from tests.retention_support import make_user


@pytest.fixture
def world():
    """Demo-like data and an id for every kind of path parameter."""
    conversations = load_demo(coding_turns=12)
    admin = make_user("crawler", "admin")
    _, secret = api_keys.create_api_key(name="crawler",
                                        scopes=["read", "write", "admin", "facts:read", "facts:write"])
    spare_key, _ = api_keys.create_api_key(name="spare", scopes=["read"])
    spare_member = make_user("spare-member", "auditor")
    doomed = store.create_conversation(title="to delete", subject="cust:doomed")
    store.append_message(conversation_id=doomed.pk, message={"kind": "user", "content": "bye"})
    receipt = erasure.execute_deletion(subject="cust:doomed", conversation_ids=[], actor="test")
    prune_older_than(days=36500, actor="test")
    fact = Fact.objects.order_by("id").first()
    # The demo's fork: short (a page renders fast), with lineage, a checkpoint-free tail
    # and task state, so the pages' richer paths run too.
    fork = next(c for c in conversations if c.parent_id == conversations[0].pk)
    return {
        "admin": admin, "secret": secret,
        "values": {
            "conversation_id": str(fork.pk), "position": "1", "fact_id": str(fact.pk),
            "key_id": str(spare_key.pk), "run_id": str(PruneRun.objects.order_by("id").first().pk),
            "request_id": str(receipt.pk if receipt else DeletionReceipt.objects.first().pk),
            "fmt": "json", "rest": "no/such/endpoint", "user_id": str(spare_member.pk),
        },
    }

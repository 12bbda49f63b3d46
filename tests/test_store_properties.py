"""A stateful property test: random append / checkpoint / fork / corrupt sequences
checked against a plain in-memory model of what the log must hold."""

import json

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)

from conversations import reads, store
from conversations.message_schema import JOURNAL_KINDS

from .test_store import insert_raw_row

# Text the store keeps: no lone surrogates, no NUL (a summary cannot hold one; the
# refusal itself is tested in test_store.py).
texts = st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
                min_size=1, max_size=40).filter(
    lambda t: t.strip()
)
# A message may carry NUL (it is stored as escaped JSON); a summary is a text column and may not.
summaries = texts.filter(lambda t: "\x00" not in t)


class LogModel(RuleBasedStateMachine):
    """Model: per conversation, a list of (raw text or None when broken) and a list of folds."""

    @initialize()
    def start(self):
        self.rows = {}  # conversation id -> list of expected raw texts (None: broken row)
        self.broken = {}  # conversation id -> set of broken positions
        self.folds = {}  # conversation id -> list of (position, summary), in creation order
        self.forks = []  # (parent id, position, child id)
        c = store.create_conversation(title="root")
        self._track(c.pk)

    def _track(self, cid, rows=None, broken=None, folds=None):
        self.rows[cid] = rows or []
        self.broken[cid] = broken or set()
        self.folds[cid] = folds or []

    # Creation order, not id order: ids are random, draws must replay the same way.
    conversations = property(lambda self: list(self.rows))

    @rule(data=st.data(), kind=st.sampled_from(JOURNAL_KINDS), text=texts)
    def append(self, data, kind, text):
        cid = data.draw(st.sampled_from(self.conversations))
        position = store.append_message(conversation_id=cid, message={"kind": kind, "text": text})
        assert position == len(self.rows[cid])
        self.rows[cid].append(json.dumps({"kind": kind, "text": text}, ensure_ascii=False, separators=(",", ":")))

    @rule(data=st.data())
    def corrupt(self, data):
        cid = data.draw(st.sampled_from(self.conversations))
        from conversations.models import Conversation

        position = insert_raw_row(Conversation.objects.get(pk=cid), '{"kind": "unknown-kind", "text": 1}')
        assert position == len(self.rows[cid])
        self.rows[cid].append(None)
        self.broken[cid].add(position)

    @precondition(lambda self: any(self.rows[c] for c in self.rows))
    @rule(data=st.data(), summary=summaries)
    def checkpoint(self, data, summary):
        cid = data.draw(st.sampled_from([c for c in self.conversations if self.rows[c]]))
        low = self.folds[cid][-1][0] if self.folds[cid] else 0
        position = data.draw(st.integers(min_value=low, max_value=len(self.rows[cid]) - 1))
        store.checkpoint_at(conversation_id=cid, position=position, summary=summary)
        self.folds[cid].append((position, summary))

    @precondition(lambda self: any(self.rows[c] for c in self.rows) and len(self.rows) < 6)
    @rule(data=st.data())
    def fork(self, data):
        cid = data.draw(st.sampled_from([c for c in self.conversations if self.rows[c]]))
        position = data.draw(st.integers(min_value=0, max_value=len(self.rows[cid]) - 1))
        child = store.fork_conversation(conversation_id=cid, position=position)
        folds = [f for f in self.folds[cid] if f[0] <= position]
        latest = []
        # With ties on position the latest created wins, as in the store.
        if folds:
            top = max(f[0] for f in folds)
            latest = [[f for f in folds if f[0] == top][-1]]
        self._track(
            child.pk,
            rows=list(self.rows[cid][: position + 1]),
            broken={p for p in self.broken[cid] if p <= position},
            folds=latest,
        )
        self.forks.append((cid, position, child.pk))

    @invariant()
    def full_record_matches(self):
        for cid, rows in self.rows.items():
            page = reads.list_messages(cid)
            assert [i.raw for i in page.items] == [r for r in rows if r is not None]
            assert [i.position for i in page.items] == [p for p, r in enumerate(rows) if r is not None]
            assert page.skipped == sorted(self.broken[cid])

    @invariant()
    def active_view_matches(self):
        for cid, rows in self.rows.items():
            view = reads.list_active(cid)
            if self.folds[cid]:
                position, summary = self.folds[cid][-1]
                assert view.checkpoint.message_position == position
                assert view.handoff["content"] == summary
                start = position + 1
            else:
                assert view.checkpoint is None
                start = 0
            assert [i.raw for i in view.page.items] == [r for r in rows[start:] if r is not None]

    @invariant()
    def forks_keep_their_prefix(self):
        for parent, position, child in self.forks:
            # Parents only grow, so the child's first rows stay the parent's prefix.
            assert self.rows[child][: position + 1] == self.rows[parent][: position + 1]
            child_page = reads.list_messages(child, limit=position + 1)
            parent_page = reads.list_messages(parent, limit=position + 1)
            assert [i.raw for i in child_page.items] == [i.raw for i in parent_page.items]


@pytest.mark.django_db
def test_random_operation_sequences_match_the_model():
    run_state_machine_as_test(
        LogModel,
        settings=settings(
            max_examples=20,
            stateful_step_count=20,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
            database=None,
        ),
    )

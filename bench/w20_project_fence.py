"""Workload 20: what the project fence costs reads, at 1,000,000 messages across 20 projects.

The target: "the project filter costs reads at most 1.1× today's: list, page, active view,
search and recall at 1,000,000 messages across 20 projects, ratios in one run".

The corpus: 20 projects of 200 conversations of 250 messages each (the generator's texts,
every message with its own ticket number), the conversations of all projects created in
turn (project = conversation number mod 20), so every project's rows are spread over the
whole message table and the full-text index, as they are when several agents write at
once. The index is in the state the nightly prune leaves (operators.md): on SQLite its
segments merged into one (`compact_fts_index`, the prune's last step) before the newest 1/90
of the conversations (a day's writes at the default 90 days' retention) are written. Each
conversation has a checkpoint half-way (the active view starts there). Facts:
10 subjects per project, 25 approved facts each (5,000). Built with bulk SQL through the
schema and its triggers, never through the API.

Each read is a request through Django's test client, the whole stack (the key's
authentication, the project middleware, the handler, JSON): the first page of
`GET /conversations`; `GET /conversations/{id}/messages?after=125` (a page half-way
in); `GET /conversations/{id}/active`; `GET /search` for two common words, a phrase and
one message's ticket number; `GET /facts/recall` for a subject with a three-word query.

- **project**: with a key of one project (the 8th): the fence as it runs in production;
  on PostgreSQL as a role that is not a superuser, so row-level security holds too.
- **today**: the same request with an all-projects key naming no project (every project:
  no filter), on the same data, as the server answered before projects: on PostgreSQL
  as the superuser (no row-level security existed), and with the indexes of before
  projects beside today's (`TODAY_INDEXES`, built on this throw-away database only), which
  an unfiltered read would otherwise lack. The same conversation for the page and the active
  view; the list and a search read the first page of every project; recall's subjects are
  each project's own, so both recall the same 25 facts.
- PostgreSQL also measures **fence, superuser**: the project's key as the superuser (the
  fence without row-level security), to tell the two apart.

Warm, alternating, each sample the mean of a batch of requests, the figure the median of
the samples. ratio = project / today, taken within each repetition (the variants run one
after the other) and the median of those; target ≤ 1.1.
"""

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta

import common

PROJECTS, CONVERSATIONS, PER = 20, 200, 250  # per project: 20 × 200 × 250 = 1,000,000
QUICK_CONVERSATIONS, QUICK_PER = 2, 30
SUBJECTS, FACTS_PER_SUBJECT = 10, 25
QUICK_SUBJECTS, QUICK_FACTS = 2, 5
MEASURED = 7  # the project whose key reads (0-based)
START = datetime(2026, 1, 1, tzinfo=UTC)
PG_NAME = "memoryui_bench_w20"
APP_ROLE = "memoryui_bench_app"
QUERY = "refund store credit"
# A store that keeps 90 days (the default retention) takes about 1/90 of its rows a day.
RETENTION_DAYS = 90
# Keep the built PostgreSQL database and use it again while tuning (the build takes minutes).
KEEP = os.environ.get("MEMORYUI_BENCH_W20_KEEP") == "1"
# The indexes the unfiltered reads had before projects (conversations 0001, facts 0001 and
# 0004), under names of their own: today's lead with the project.
TODAY_INDEXES = [
    "CREATE INDEX IF NOT EXISTS bench_today_activity ON conversations_conversation (last_activity_at DESC, id DESC)",
    "CREATE INDEX IF NOT EXISTS bench_today_fact_subject ON facts_fact (subject, status)",
    "CREATE INDEX IF NOT EXISTS bench_today_fact_recall ON facts_fact (subject, valid_from, invalid_at, expires_at, "
    "importance, recorded_at, last_accessed_at) WHERE status = 'approved' AND superseded_by_id IS NULL",
]


def sizes(quick: bool) -> tuple[int, int, int, int]:
    if quick:
        return QUICK_CONVERSATIONS, QUICK_PER, QUICK_SUBJECTS, QUICK_FACTS
    return CONVERSATIONS, PER, SUBJECTS, FACTS_PER_SUBJECT


def templates(count: int = 4096):
    """(kind, JSON before the ticket number, JSON after it), as workload 14 makes them."""
    from conversations.message_schema import encode_message

    out = []
    for i in range(count):
        m = common.message_for(i)
        key = "text" if "text" in m else "content"
        m[key] = f"{m[key]} ticket T@@@"
        kind, text = encode_message(m)
        before, after = text.split("@@@")
        out.append((kind, before, after))
    return out


def build(quick: bool) -> dict:
    """The corpus (module docstring); returns what the reads need."""
    from django.db import connection, transaction

    from conversations import project_store, projects, store
    from conversations.facts.models import APPROVED, Fact
    from conversations.models import Conversation, Message
    from conversations.retention import disk
    from conversations.retention.reclaim import compact_fts_index

    per_project, per, subjects, facts = sizes(quick)
    made = [project_store.create_project(slug=f"bench-{p:02d}", name=f"Bench {p:02d}") for p in range(PROJECTS)]
    total = PROJECTS * per_project
    rows = []
    for c in range(total):
        at = START + timedelta(minutes=c)
        rows.append(Conversation(project_id=made[c % PROJECTS].pk, title=f"bench conversation {c}",
                                 subject=f"customer:{c % 50}", subject_norm=f"customer:{c % 50}", namespace="bench",
                                 created_at=at, last_activity_at=at, received_at=at, next_position=per))
    with transaction.atomic():
        Conversation.everywhere.bulk_create(rows, batch_size=2000)
    ids = [r.pk for r in rows]
    # The index as the nightly prune leaves it (operators.md schedules one): merged into one
    # segment at its end (on SQLite), then a day's writes on top, in segments of their own.
    day = total - max(1, total // RETENTION_DAYS)
    _messages(connection, ids[:day], per, Message._meta.db_table)
    if connection.vendor == "sqlite":
        compact_fts_index(disk.MESSAGE_FTS)
    _messages(connection, ids[day:], per, Message._meta.db_table, first=day)
    for c, cid in enumerate(ids):
        with projects.scoped(projects.one(made[c % PROJECTS].pk)):
            store.checkpoint_at(conversation_id=cid, position=per // 2 - 1, summary=f"the first half of {c}",
                                actor="bench")
    now = datetime.now(UTC)
    with transaction.atomic():
        Fact.everywhere.bulk_create([
            Fact(project_id=project.pk, subject=f"{project.slug}:customer:{s}",
                 subject_norm=f"{project.slug}:customer:{s}", category="preference", importance=1 + (n % 10),
                 status=APPROVED, valid_from=now - timedelta(days=n + 1), recorded_at=now - timedelta(days=n + 1),
                 text=f"{common.message_for(n)['content'][:120]} prefers refund as store credit {n}",
                 created_by="bench", expires_at=now + timedelta(days=365))
            for project in made for s in range(subjects) for n in range(facts)], batch_size=2000)
    with connection.cursor() as cursor:
        for sql in TODAY_INDEXES:
            cursor.execute(sql)
        if connection.vendor == "postgresql":
            cursor.execute("VACUUM ANALYZE")
    return {"projects": [p.pk for p in made], "conversations": [str(i) for i in ids], "per": per,
            "messages": total * per, "facts": PROJECTS * subjects * facts}


def _messages(connection, ids, per: int, table: str, first: int = 0) -> None:
    from django.db import transaction

    from conversations.models import Conversation

    parts = templates()
    db_ids = [Conversation._meta.pk.get_db_prep_value(c, connection) for c in ids]
    step = 30
    with transaction.atomic(), connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("CREATE TEMP TABLE bench_template (i int PRIMARY KEY, kind text, head text, tail text)")
            cursor.executemany("INSERT INTO bench_template VALUES (%s, %s, %s, %s)",
                               [(i, k, h, t) for i, (k, h, t) in enumerate(parts)])
            for c, cid in enumerate(db_ids, start=first):
                cursor.execute(
                    f"INSERT INTO {table} (conversation_id, position, kind, content, created_at) "
                    f"SELECT %s, g, t.kind, t.head || (%s * {per} + g) || t.tail, "
                    f"%s::timestamptz + (%s * interval '1 minute') + g * interval '{step} seconds' "
                    f"FROM generate_series(0, {per - 1}) g "
                    f"JOIN bench_template t ON t.i = (%s * {per} + g) %% {len(parts)}",
                    [cid, c, START, c, c])
            cursor.execute("DROP TABLE bench_template")
            return
        sql = f"INSERT INTO {table} (conversation_id, position, kind, content, created_at) VALUES (%s, %s, %s, %s, %s)"
        for c, cid in enumerate(db_ids, start=first):
            batch = []
            for g in range(per):
                kind, head, tail = parts[(c * per + g) % len(parts)]
                when = connection.ops.adapt_datetimefield_value(START + timedelta(minutes=c, seconds=g * step))
                batch.append((cid, g, kind, f"{head}{c * per + g}{tail}", when))
            cursor.executemany(sql, batch)


def existing() -> dict | None:
    """The corpus of a run before (KEEP), or None."""
    from conversations.facts.models import Fact
    from conversations.models import Conversation, Message, Project

    made = list(Project.objects.filter(slug__startswith="bench-").order_by("slug").values_list("pk", flat=True))
    if len(made) != PROJECTS:
        return None
    ids = [str(c) for c in Conversation.everywhere.filter(namespace="bench").order_by("created_at", "id")
           .values_list("pk", flat=True)]
    per = Conversation.everywhere.filter(namespace="bench").first().next_position
    return {"projects": made, "conversations": ids, "per": per, "messages": Message.objects.count(),
            "facts": Fact.everywhere.count()}


def requests(made: dict) -> dict:
    """label → (path, query) of each read, about the measured project's rows."""
    per = made["per"]
    # The measured project's conversation half-way through the table, and a ticket of it.
    ours = [c for c in range(len(made["conversations"])) if c % PROJECTS == MEASURED]
    c = ours[len(ours) // 2]
    cid = made["conversations"][c]
    slug = f"bench-{MEASURED:02d}"
    return {
        "list": ("/api/v1/conversations", {}),
        "page": (f"/api/v1/conversations/{cid}/messages", {"after": per // 2}),
        "active view": (f"/api/v1/conversations/{cid}/active", {}),
        "search, two words": ("/api/v1/search", {"q": "refund warehouse"}),
        "search, a phrase": ("/api/v1/search", {"q": '"shipping label"'}),
        "search, one ticket": ("/api/v1/search", {"q": f"T{c * per + per // 3}"}),
        "recall": ("/api/v1/facts/recall", {"subject": f"{slug}:customer:1", "query": QUERY}),
    }


def check(label: str, answer: dict, project_ids: set | None) -> int:
    """How many items the answer holds; with `project_ids`, that each is the project's."""
    from conversations.models import Conversation

    items = answer["items"]
    if project_ids is not None and label.startswith(("list", "search")):
        held = {str(c) for c in Conversation.everywhere.filter(project_id__in=project_ids).values_list("pk", flat=True)}
        found = {item["id"] if label == "list" else item["conversation_id"] for item in items}
        assert found <= held, (label, found - held)
    return len(items)


def measure(database: str, args) -> list[dict]:
    reps = args.reps or (2 if args.quick else 60)
    batch = 1 if args.quick else 4
    if database == "sqlite":
        common.setup_django(args.workdir / "project-fence.sqlite3")
    else:
        name = PG_NAME + ("_quick" if args.quick else "")
        if not KEEP:
            subprocess.run(["dropdb", "--if-exists", name], check=True, capture_output=True)
        subprocess.run(["createdb", name], capture_output=True)
        common.migrate_database(f"postgres:///{name}", args.workdir / "data-pg")
        common.close_django()
    from django.db import connection
    from django.test import Client

    from conversations import api_keys
    from conversations.models import Project

    started = time.perf_counter()
    made = existing() if KEEP and database == "postgresql" else None
    if made is None:
        made = build(args.quick)
    build_s = time.perf_counter() - started
    print(f"  {database}: {made['messages']:,} messages, {made['facts']:,} facts in {build_s:.0f} s", flush=True)
    if database == "postgresql":
        _app_role(connection)
    project = Project.objects.get(pk=made["projects"][MEASURED])
    scopes = ["read", "facts:read"]
    keys = {"project": api_keys.create_api_key(name="bench-project", scopes=scopes, project=project)[1],
            "today": api_keys.create_api_key(name="bench-today", scopes=scopes, all_projects=True)[1]}
    # Who runs each variant's statements on PostgreSQL: the application's role, or the superuser.
    variants = {"project": (keys["project"], APP_ROLE), "today": (keys["today"], None)}
    if database == "postgresql":
        variants["fence, superuser"] = (keys["project"], None)
    client = Client(SERVER_NAME="localhost")

    def as_role(role):
        """Before a variant's requests, not timed: the role its statements run as. Straight on
        the driver's connection: a Django cursor would send the bench's own scope first."""
        if database == "postgresql":
            connection.ensure_connection()
            connection.connection.execute(f"SET ROLE {role}" if role else "RESET ROLE")

    def call(key, path, query):
        response = client.get(path, query, HTTP_AUTHORIZATION=f"Bearer {key}")
        assert response.status_code == 200, (path, response.status_code, response.content[:300])
        return response

    rows = []
    for label, (path, query) in requests(made).items():
        found = {}
        for name, (key, role) in variants.items():
            as_role(role)
            answer = call(key, path, query).json()
            found[name] = check(label, answer, {project.pk} if name != "today" else None)
            assert found[name] > 0 or "ticket" in label, (label, name)

        def timer(key, role, path=path, query=query):
            def run():
                as_role(role)
                t0 = time.perf_counter()
                for _ in range(batch):
                    call(key, path, query)
                return (time.perf_counter() - t0) / batch
            return run

        runs = common.alternate({name: timer(*variant) for name, variant in variants.items()}, reps)
        medians = {name: common.median(values) * 1000 for name, values in runs.items()}
        # Each repetition's variants ran one after the other: their ratio is taken within it, so a
        # spell of load from elsewhere on the machine slows both sides of a ratio.
        ratios = {name: round(common.median([a / b for a, b in zip(values, runs["today"], strict=True)]), 3)
                  for name, values in runs.items() if name != "today"}
        rows.append({"database": database, "read": label, "ms": medians, "ratios": ratios, "items": found,
                     "messages": made["messages"], "facts": made["facts"], "build_seconds": round(build_s, 1)})
        print(f"  {database} {label}: " + ", ".join(f"{k} {v:.2f} ms" for k, v in medians.items())
              + "; " + ", ".join(f"{k} {v:.2f}×" for k, v in ratios.items()), flush=True)
    common.close_django()
    if database == "postgresql" and not KEEP:
        subprocess.run(["dropdb", "--if-exists", PG_NAME + ("_quick" if args.quick else "")], capture_output=True)
    return rows


def _app_role(connection) -> None:
    """A role that is not a superuser, as the application connects in production: the
    row-level security policies apply to it (migration 0010)."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [APP_ROLE])
        if cursor.fetchone() is None:
            cursor.execute(f"CREATE ROLE {APP_ROLE} NOLOGIN")
        cursor.execute(f"GRANT USAGE ON SCHEMA public TO {APP_ROLE}")
        cursor.execute(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {APP_ROLE}")
        cursor.execute(f"GRANT USAGE, SELECT ON ALL SEQUENCES IN SCHEMA public TO {APP_ROLE}")


def main(argv=None):
    argv, only = common.database_child(argv)
    args = common.parse_args(__doc__.splitlines()[0], argv)
    if only:
        rows = measure(only, args)
        (args.workdir / f"w20-{only}.json").write_text(json.dumps(rows))
        return 0
    started = time.perf_counter()
    databases = ["sqlite"] + (["postgresql"] if common.postgres_reachable() else [])
    rows = common.rows_per_database(__file__, "w20", databases, args)

    res = common.Results("20 project fence")
    res.sizes = {"messages": rows[0]["messages"] if rows else 0, "facts": rows[0]["facts"] if rows else 0,
                 "projects": PROJECTS, "databases": databases, "quick": args.quick,
                 "build_seconds": {r["database"]: r["build_seconds"] for r in rows}}
    for r in rows:
        db = "SQLite" if r["database"] == "sqlite" else "PostgreSQL"
        ms, ratio = r["ms"], r["ratios"]["project"]
        note = (f"items: {r['items']['project']} (today {r['items']['today']}); ratio: the median of the ratios "
                "within each repetition")
        if "fence, superuser" in ms:
            note += (f"; the fence alone, as the superuser (no row-level security): {ms['fence, superuser']:.2f} ms, "
                     f"{r['ratios']['fence, superuser']:.2f}× today")
        res.add(metric=f"{db}: {r['read']}, one project of {PROJECTS} ({r['messages']:,} messages): ms per request "
                       "(raw column: today, every project unfiltered)",
                memoryui=ms["project"], raw=ms["today"], unit="ms", target="project / today ≤ 1.1", ratio=ratio,
                passed=ratio <= 1.1, note=note)
    res.seconds = time.perf_counter() - started
    res.write(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())

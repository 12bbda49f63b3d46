"""Workload 16: the same tool-calling LangGraph agent checkpointed by memoryui's
`MemoryuiSaver` (over HTTP to gunicorn, SQLite, the settings of `make run`) and by
LangGraph's `SqliteSaver` (in-process, WAL, synchronous=FULL).

The graph: an agent node on LangChain's fake chat model that asks a weather tool, a
ToolNode that answers, and the agent's reply; each turn is one `graph.invoke` with a
new user message (four checkpoints a turn). THREADS threads of TURNS turns each, one
after another. Rows: checkpoints written per second, and bytes on disk per checkpoint
(the database file and its WAL after a checkpoint of the WAL, less the empty
migrated file; memoryui's figure includes the readable rows it projects). The two
peers alternate (common.alternate), medians of the repetitions. The memoryui run also
pays one HTTP round trip per checkpoint and per pending-writes batch; SqliteSaver pays none.
"""

import itertools
import os
import shutil
import signal
import sys
import time
from pathlib import Path

import common

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "clients" / "python" / "src"))


def agent_graph(saver):
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode

    @tool
    def get_weather(city: str) -> str:
        """The temperature in a city, in °C."""
        return f"{city}: 14 °C, light rain, wind from the west at 12 km/h"

    counter = itertools.count()

    def replies():
        for n in counter:
            yield AIMessage(content="", tool_calls=[{"id": f"call_{n}", "name": "get_weather",
                                                     "args": {"city": "Paris"}, "type": "tool_call"}])
            yield AIMessage(content="It is 14 °C in Paris with light rain; the wind is from the west. "
                                    "Take an umbrella if you go out this afternoon.")

    model = GenericFakeChatModel(messages=replies())

    def agent(state: MessagesState):
        return {"messages": [model.invoke(state["messages"])]}

    def route(state: MessagesState):
        return "tools" if state["messages"][-1].tool_calls else END

    builder = StateGraph(MessagesState)
    builder.add_node("agent", agent)
    builder.add_node("tools", ToolNode([get_weather]))
    builder.add_edge(START, "agent")
    builder.add_conditional_edges("agent", route, ["tools", END])
    builder.add_edge("tools", "agent")
    return builder.compile(checkpointer=saver)


def drive(graph, run: int, threads: int, turns: int) -> int:
    """Run the turns; returns how many checkpoints the graph wrote."""
    written = 0
    for t in range(threads):
        config = {"configurable": {"thread_id": f"run{run}-thread{t}"}}
        for turn in range(turns):
            graph.invoke({"messages": [("user", f"What is the weather in Paris today? (turn {turn})")]}, config)
        written += len(list(graph.checkpointer.list(config)))
    return written


def main(argv=None):
    args = common.parse_args(__doc__.splitlines()[0], argv)
    threads, turns = (2, 3) if args.quick else (10, 10)
    reps = args.reps or (1 if args.quick else 3)
    started = time.perf_counter()

    db_path = args.workdir / "w16-memoryui.sqlite3"
    common.setup_django(db_path)
    from conversations import api_keys

    _, api_key = api_keys.create_api_key(name="bench-w16", scopes=["read", "write"])
    common.close_django()
    empty_memoryui = common.bytes_on_disk(db_path)

    from w8_http import free_port, start_gunicorn

    port = free_port()
    server = start_gunicorn(port, args.workdir / "w16-gunicorn.log")
    from langgraph.checkpoint.sqlite import SqliteSaver

    from memoryui_client import Retries
    from memoryui_client.integrations.langgraph import MemoryuiSaver

    saver = MemoryuiSaver(url=f"http://127.0.0.1:{port}", api_key=api_key, retries=Retries())
    peer_path = args.workdir / "w16-sqlitesaver.sqlite3"
    import sqlite3

    conn = sqlite3.connect(peer_path, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    peer = SqliteSaver(conn)
    peer.setup()
    conn.commit()
    empty_peer = common.bytes_on_disk(peer_path)
    graphs = {"memoryui": agent_graph(saver), "langgraph": agent_graph(peer)}
    counts = {"memoryui": 0, "langgraph": 0}
    runs = itertools.count()

    def runner(name):
        def go():
            t0 = time.perf_counter()
            counts[name] += drive(graphs[name], next(runs), threads, turns)
            return time.perf_counter() - t0
        return go

    try:
        timings = common.alternate({name: runner(name) for name in graphs}, reps)
    finally:
        saver.close()
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)
    per_run = {name: counts[name] / reps for name in counts}
    rate = {name: per_run[name] / common.median(timings[name]) for name in timings}
    size = {"memoryui": (common.bytes_on_disk(db_path) - empty_memoryui) / counts["memoryui"],
            "langgraph": (common.bytes_on_disk(peer_path) - empty_peer) / counts["langgraph"]}
    conn.close()

    res = common.Results("16 LangGraph checkpointer")
    res.sizes = {"threads": threads, "turns_per_thread": turns, "checkpoints_per_run": per_run["memoryui"],
                 "reps": reps, "quick": args.quick}
    res.add(metric="tool-calling agent: checkpoints/s (memoryui: MemoryuiSaver over HTTP; LangGraph: SqliteSaver "
                   "in-process)", memoryui=rate["memoryui"], langgraph=rate["langgraph"], unit="checkpoints/s",
            target="memoryui / SqliteSaver (no target)", ratio=rate["memoryui"] / rate["langgraph"],
            note="each MemoryuiSaver checkpoint is an HTTP request that also appends its new messages as rows")
    res.add(metric="tool-calling agent: bytes on disk per checkpoint", memoryui=size["memoryui"],
            langgraph=size["langgraph"], unit="B", target="memoryui / SqliteSaver (no target)",
            ratio=size["memoryui"] / size["langgraph"],
            note="memoryui keeps the same serialised checkpoint plus the projected rows and their chain hashes")
    res.seconds = time.perf_counter() - started
    res.write(args.out)
    if not os.environ.get("MEMORYUI_BENCH_KEEP"):
        shutil.rmtree(args.workdir / "data", ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

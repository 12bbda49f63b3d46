"""What the background embedder works through, registered by the apps that keep vectors.

An app that stores vectors (facts, messages) registers a `Job` from its AppConfig.ready():
`counts(model_id)` says how many of its vectors the current model made, how many another
model made (stale: the model changed) and how many texts wait for a first vector; `run(
embedder, model_id, limit)` embeds up to `limit` of the waiting and stale ones and returns
how many it did. Each call commits what it did, so the work is resumable by construction:
whatever a crash interrupts is still waiting or stale, and is found again by the next call.
"""

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Job:
    name: str
    label: str
    counts: Callable[[int], dict]
    run: Callable[..., int]


_JOBS: dict[str, Job] = {}


def register(job: Job) -> None:
    _JOBS[job.name] = job


def registered() -> list[Job]:
    return list(_JOBS.values())

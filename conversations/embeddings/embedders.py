"""Who turns texts into vectors: the model inside the wordllama package, or an endpoint.

`active()` is the embedder the server uses, chosen by the settings once per process:

- **embedded (the default)**: WordLlama's 256-dimension static model, whose weights (16 MB)
  and tokenizer ship inside the `wordllama` wheel. It is loaded from the installed
  package's own folder with downloads turned off, so it never reaches the network (a test
  proves no socket is opened); ~0.2–1 s to load, tens of thousands of short texts a second
  on one core.
- **an OpenAI-compatible `/v1/embeddings` endpoint** (`MEMORYUI_EMBEDDINGS_URL`, with
  `MEMORYUI_EMBEDDINGS_MODEL` and `MEMORYUI_EMBEDDINGS_KEY`): texts go in batches, a
  failed batch is tried again after a growing pause (a 429, a 5xx, a timeout or a refused
  connection; a 4xx other than 429 is a mistake to report, not to repeat).

Every vector leaves here unit length, float32, so a dot product is a cosine. Each
embedder has a `name` stored with every vector it makes (and the vector's dimension with
it): vectors of another name are stale, and are embedded again in the background
(conversations/embeddings/worker.py).
"""

import json
import logging
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
from django.conf import settings

from . import vectors

log = logging.getLogger("memoryui.embeddings")

# The longest text embedded, in characters: past it a static model's average says no more,
# and an endpoint's token limit would refuse the batch.
MAX_CHARS = 8000


class EmbeddingFailed(Exception):
    """The endpoint did not answer with vectors (after its retries)."""


class Embedder:
    """Texts in, unit float32 vectors out ((len(texts), dimension))."""

    name = ""

    def embed(self, texts: list[str]) -> np.ndarray:
        raise NotImplementedError

    def dimension(self) -> int:
        """How many dimensions its vectors have (an endpoint is asked once)."""
        dimension = getattr(self, "_dimension", None)
        if dimension is None:
            dimension = self._dimension = int(self.embed(["dimension"]).shape[1])
        return dimension


def _clip(texts) -> list[str]:
    return [(t or "")[:MAX_CHARS] for t in texts]


# The model pads a batch to its longest text and looks up every token's row at once: a
# (texts × tokens × dimension) float array. 256 tool outputs of 8,000 characters made it
# half a gigabyte in the server's worker. A batch is held to this many characters of its
# longest text times its count (a token is at least one character): ~16 MB of rows.
BATCH_CHARS = 16384


def _chunks_by_length(texts: list[str]) -> list[list[int]]:
    """The texts' indexes in batches of like length (little padding), each within BATCH_CHARS."""
    order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
    chunks, current = [], []
    for i in order:
        longest = max(len(texts[i]), 1)  # sorted: the newest is the longest
        if current and longest * (len(current) + 1) > BATCH_CHARS:
            chunks.append(current)
            current = []
        current.append(i)
    if current:
        chunks.append(current)
    return chunks


class WordLlamaEmbedder(Embedder):
    """The model in the wordllama wheel, loaded from the package's own files only."""

    CONFIG, DIMENSION = "l2_supercat", 256
    name = f"wordllama-{CONFIG}-{DIMENSION}"

    def __init__(self):
        self._model = None
        self._dimension = self.DIMENSION
        self._lock = threading.Lock()

    @staticmethod
    def package_folder() -> Path:
        """The installed package's folder: it holds weights/ and tokenizers/, which is what
        WordLlama.load looks for under its cache_dir."""
        import wordllama  # noqa: PLC0415 — a large import, paid only by a process that embeds

        return Path(wordllama.__file__).resolve().parent

    def model(self):
        with self._lock:
            if self._model is None:
                from wordllama import WordLlama  # noqa: PLC0415 — see package_folder

                self._model = WordLlama.load(config=self.CONFIG, dim=self.DIMENSION,
                                             cache_dir=self.package_folder(), disable_download=True)
            return self._model

    def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.DIMENSION), dtype=np.float32)
        if len(texts) == 1:
            return self._embed_one(_clip(texts)[0])
        texts = _clip(texts)
        out = np.empty((len(texts), self.DIMENSION), dtype=np.float32)
        for chunk in _chunks_by_length(texts):
            out[chunk] = self.model().embed([texts[i] for i in chunk], norm=False, batch_size=len(chunk))
        return vectors.normalised(out)

    def _embed_one(self, text: str) -> np.ndarray:
        """One text (a proposal, a query) the way the model's batch path pools it (the mean
        of its tokens' rows), without its batch machinery: the tokenizer's batch call wakes a
        thread pool, which inside a request, between two fsyncs, cost a proposal 0.06 ms of
        its 0.25 ms of embedding (bench/w22_meaning.py)."""
        model = self.model()
        ids = model.tokenizer.encode(text, add_special_tokens=False).ids
        if not ids:
            return np.zeros((1, self.DIMENSION), dtype=np.float32)
        table = model.embedding
        rows = table[np.clip(np.asarray(ids, dtype=np.int32), 0, table.shape[0] - 1)]
        return vectors.normalised(rows.sum(axis=0, dtype=np.float32) / np.float32(len(ids)))


class EndpointEmbedder(Embedder):
    """An OpenAI-compatible embeddings endpoint (`POST …/v1/embeddings`)."""

    def __init__(self, url: str, model: str, key: str = "", *, batch: int = 64, timeout: float = 30.0,
                 retries: int = 3, backoff: float = 0.5, sleep=time.sleep):
        url = url.rstrip("/")
        self.url = url if url.endswith("/embeddings") else url + "/embeddings"
        self.model, self.key = model, key
        self.batch, self.timeout, self.retries, self.backoff = max(1, batch), timeout, max(0, retries), backoff
        self._sleep = sleep
        self.name = model

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = _clip(texts)
        parts = [self._batch(texts[i:i + self.batch]) for i in range(0, len(texts), self.batch)]
        if not parts:
            return np.zeros((0, 0), dtype=np.float32)
        return vectors.normalised(np.concatenate(parts))

    def _batch(self, texts: list[str]) -> np.ndarray:
        # An empty string is refused by some servers; a space embeds as "nothing said".
        body = json.dumps({"model": self.model, "input": [t or " " for t in texts]}).encode()
        headers = {"Content-Type": "application/json"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        problem = ""
        for attempt in range(self.retries + 1):
            if attempt:
                self._sleep(self.backoff * 2 ** (attempt - 1))
            request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as answer:  # noqa: S310 — the operator's URL
                    return self._vectors(json.loads(answer.read()), len(texts))
            except urllib.error.HTTPError as exc:
                problem = f"HTTP {exc.code}"
                if exc.code != 429 and exc.code < 500:
                    break
            except (urllib.error.URLError, TimeoutError, OSError) as exc:
                problem = str(getattr(exc, "reason", exc))
            except (ValueError, KeyError, TypeError) as exc:
                problem = f"an answer that is not an embeddings list ({exc})"
                break
        raise EmbeddingFailed(f"the embeddings endpoint failed: {problem}"[:300])

    @staticmethod
    def _vectors(answer: dict, count: int) -> np.ndarray:
        data = sorted(answer["data"], key=lambda d: d.get("index", 0))
        if len(data) != count:
            raise ValueError(f"{len(data)} vectors for {count} texts")
        return np.asarray([d["embedding"] for d in data], dtype=np.float32)


_active: dict = {}
_active_lock = threading.Lock()


def configured() -> tuple:
    """What the settings ask for: a key that changes when the embedder should."""
    return (settings.MEMORYUI_EMBEDDINGS_URL, settings.MEMORYUI_EMBEDDINGS_MODEL,
            settings.MEMORYUI_EMBEDDINGS_KEY, settings.MEMORYUI_EMBEDDINGS_BATCH,
            settings.MEMORYUI_EMBEDDINGS_TIMEOUT, settings.MEMORYUI_EMBEDDINGS_RETRIES)


def active() -> Embedder:
    """The server's embedder (one per process and configuration)."""
    key = configured()
    with _active_lock:
        found = _active.get(key)
        if found is None:
            url, model, api_key, batch, timeout, retries = key
            if url:
                found = EndpointEmbedder(url, model, api_key, batch=batch, timeout=timeout, retries=retries)
            else:
                found = WordLlamaEmbedder()
            _active.clear()
            _active[key] = found
        return found

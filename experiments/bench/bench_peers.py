"""Side by side with the peers (issue 35, item 5): cost and verdicts per text on one llama.cpp server.

Five ways to judge the same texts on the same rubrics, all through one recording proxy on 127.0.0.1
in front of one llama.cpp server (``python -m llama_cpp.server``, the embedded SmolLM2-135M GGUF
unless ``--server-url`` names another), one call at a time:

* ``ours-independent``: :func:`rubric_induce.probing.api.probe`, one call per (text, rubric), the
  answer distribution read from the logprobs (``[probe] packing = "independent"``, the default);
* ``ours-packed``: the same with ``packing = "packed"``: one call per text, one answer line per rubric;
* ``autorubric-criterion``: Autorubric's ``CriterionGrader`` (one LLM call per criterion, its default),
  through LiteLLM's OpenAI-compatible provider (``openai/<model>`` with ``api_base``);
* ``autorubric-single``: the same grader with ``llm_calls="per_item"``: one call for the whole rubric;
* ``deepeval-geval``: deepeval's ``GEval``, one metric per rubric as the deepeval hand-off builds it
  (:func:`rubric_induce.handoff.deepeval_geval`), answered by the server through the hand-off's model
  adapter (:func:`rubric_induce.handoff.deepeval_model`, JSON-schema constrained replies).

The proxy counts, per text and method, the LLM calls (POSTs to ``/chat/completions`` or
``/completions``), other requests (tokenizer, model list), and the prompt and completion tokens the
server reports in each reply's ``usage``; the script times each text. One change is made on the way:
a ``response_format`` of type ``json_schema`` (what LiteLLM sends for a Pydantic schema) is rewritten to
``{"type": "json_object", "schema": ...}``, the form llama-cpp-python's server reads (it predates
``json_schema`` and rejects it with 422); vLLM, the llama.cpp C++ server and the OpenAI API take
``json_schema`` as sent. Nothing else in a request or reply is touched.

**Verdicts and agreement.** Every method ends in a yes/no verdict per (text, rubric), "the rubric's
statement holds":

* ours: the expected answer value of the probe's distribution is above the scale's midpoint (3 on
  1-5); a failed probe has no verdict;
* Autorubric: each rubric is a binary criterion (``requirement`` = the rubric text, weight +10 for
  SAT, -10 for DSAT, so MET means the statement holds either way); MET is yes, UNMET no,
  CANNOT_ASSESS or a failed judgment no verdict;
* GEval: its 0-10 score is mapped back through the hand-off's score ranges to the answer it stands
  for, and that answer's value is compared with the midpoint as ours is (5 answers: SAT holds at
  7-10, DSAT at 0-3, as the ranges run worst first); a metric that raised has no verdict.

Agreement with ``ours-independent`` is over the pairs where both have a verdict; coverage is the share
of pairs with a verdict; Cohen's kappa corrects agreement for chance (a judge that always says the same
has kappa 0).

Methods run interleaved per text (text 1 by every method, then text 2 ...) so load on the machine
falls on all of them alike. The peers are in the ``peers`` extra (``pip install
'rubric-induce[peers,deepeval,openai]'``), never in the package's dependencies.

    nice -n 10 .venv/bin/python experiments/bench/bench_peers.py --limit 12 --out runs/bench_peers
    .venv/bin/python experiments/bench/bench_peers.py --server-url http://127.0.0.1:8000/v1 --model smollm2 ...
"""
from __future__ import annotations

import asyncio
import contextlib
import http.client
import json
import os
import re
import sys
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import begin, parser

from rubric_induce.core.errors import MissingDependencyError, RubricInduceError  # noqa: E402
from rubric_induce.data import Example, Rubric  # noqa: E402

RESOURCES = ROOT / "rubric_induce" / "resources"
METHODS = ("ours-independent", "ours-packed", "autorubric-criterion", "autorubric-single", "deepeval-geval")
REFERENCE = "ours-independent"
LLM_PATHS = ("/chat/completions", "/completions")
_HOP = {"connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade",
        "content-length", "host", "accept-encoding", "content-encoding"}


# ----------------------------------------------------------------------------- the recording proxy
class RecordingProxy:
    """An HTTP proxy on 127.0.0.1 that forwards every request to ``upstream`` and records each one.

    ``tag`` (set by the caller between texts) is stored with every record, so calls are attributed to
    the text and method that made them. Each record: ``tag``, ``method``, ``path``, ``status``,
    ``llm`` (a POST to a completions path), ``prompt_tokens`` / ``completion_tokens`` (from the reply's
    ``usage``; None when it has none), ``seconds`` and ``rewrote_format``. Use as a context manager."""

    def __init__(self, upstream: str, *, timeout: float = 900.0, log: Path | None = None) -> None:
        url = urllib.parse.urlsplit(upstream)
        if url.scheme != "http" or not url.hostname:
            raise ValueError(f"the proxy forwards to plain http://host:port URLs, not {upstream!r}")
        self.upstream_host, self.upstream_port = url.hostname, url.port or 80
        self.upstream_prefix = url.path.rstrip("/")  # e.g. /v1
        self.timeout = float(timeout)
        self.log = log  # each record appended as a JSON line as it is made (to watch a long run)
        self.tag: Any = None
        self.records: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        """The proxy's URL with the upstream's path (``http://127.0.0.1:<port>/v1``)."""
        assert self._server is not None, "start the proxy first"
        return f"http://127.0.0.1:{self._server.server_address[1]}{self.upstream_prefix}"

    def start(self) -> RecordingProxy:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _forward(self) -> None:
                proxy._handle(self)

            do_GET = do_POST = do_PUT = do_DELETE = _forward  # noqa: N815

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="recording-proxy", daemon=True)
        self._thread.start()
        return self

    def close(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> RecordingProxy:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _handle(self, h: BaseHTTPRequestHandler) -> None:
        t0 = time.perf_counter()
        tag = self.tag
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else b""
        path = h.path
        is_llm = h.command == "POST" and urllib.parse.urlsplit(path).path.rstrip("/").endswith(LLM_PATHS)
        rewrote = False
        if is_llm and body:
            body, rewrote = rewrite_response_format(body)
        headers = {k: v for k, v in h.headers.items() if k.lower() not in _HOP}
        headers["Content-Length"] = str(len(body))
        status, reply, reply_headers = 502, b"", {}
        try:
            conn = http.client.HTTPConnection(self.upstream_host, self.upstream_port, timeout=self.timeout)
            try:
                conn.request(h.command, path, body=body if body or h.command != "GET" else None, headers=headers)
                resp = conn.getresponse()
                status, reply = resp.status, resp.read()
                reply_headers = {k: v for k, v in resp.getheaders() if k.lower() not in _HOP}
            finally:
                conn.close()
        except OSError as exc:
            reply = json.dumps({"error": {"message": f"recording proxy: upstream failed: {exc}"}}).encode()
            reply_headers = {"Content-Type": "application/json"}
        prompt, completion = usage_of(reply) if is_llm else (None, None)
        with self._lock:
            self.records.append({"tag": tag, "method": h.command, "path": path, "status": status, "llm": is_llm,
                                 "prompt_tokens": prompt, "completion_tokens": completion,
                                 "seconds": time.perf_counter() - t0, "rewrote_format": rewrote})
            if self.log is not None:
                with open(self.log, "a", encoding="utf-8") as f:
                    f.write(json.dumps(self.records[-1], default=str) + "\n")
        h.send_response(status)
        for k, v in reply_headers.items():
            h.send_header(k, v)
        h.send_header("Content-Length", str(len(reply)))
        h.end_headers()
        h.wfile.write(reply)

    def summary(self, tag: Any = None, *, records: Sequence[dict[str, Any]] | None = None) -> dict[str, Any]:
        """Totals over the records with ``tag`` (all records when None): LLM calls, other requests,
        prompt and completion tokens, failed LLM calls (status not 2xx), LLM calls without usage."""
        with self._lock:
            recs = [r for r in (records if records is not None else self.records) if tag is None or r["tag"] == tag]
        llm = [r for r in recs if r["llm"]]
        return {"calls": len(llm), "other_requests": len(recs) - len(llm),
                "prompt_tokens": sum(r["prompt_tokens"] or 0 for r in llm),
                "completion_tokens": sum(r["completion_tokens"] or 0 for r in llm),
                "failed_calls": sum(not 200 <= r["status"] < 300 for r in llm),
                "calls_without_usage": sum(r["prompt_tokens"] is None for r in llm),
                "rewrote_format": sum(r["rewrote_format"] for r in llm)}


def rewrite_response_format(body: bytes) -> tuple[bytes, bool]:
    """``response_format: {"type": "json_schema", "json_schema": {"schema": S}}`` -> ``{"type":
    "json_object", "schema": S}`` (llama-cpp-python's server form); any other body unchanged."""
    try:
        doc = json.loads(body)
    except ValueError:
        return body, False
    fmt = doc.get("response_format") if isinstance(doc, dict) else None
    if not isinstance(fmt, dict) or fmt.get("type") != "json_schema":
        return body, False
    schema = (fmt.get("json_schema") or {}).get("schema")
    doc["response_format"] = {"type": "json_object", **({"schema": schema} if schema is not None else {})}
    return json.dumps(doc).encode(), True


def usage_of(reply: bytes) -> tuple[int | None, int | None]:
    """Prompt and completion tokens from a completion reply (JSON, or the last ``usage`` of an SSE stream)."""
    docs: list[Any] = []
    try:
        docs = [json.loads(reply)]
    except ValueError:
        for line in reply.decode("utf-8", "replace").splitlines():
            if line.startswith("data:") and line[5:].strip() not in ("", "[DONE]"):
                try:
                    docs.append(json.loads(line[5:]))
                except ValueError:
                    pass
    for doc in reversed(docs):
        usage = doc.get("usage") if isinstance(doc, dict) else None
        if isinstance(usage, dict) and usage.get("prompt_tokens") is not None:
            return int(usage["prompt_tokens"]), int(usage.get("completion_tokens") or 0)
    return None, None


# ----------------------------------------------------------------------------- the server
@contextlib.contextmanager
def served(args: Any) -> Iterator[str]:
    """``--server-url``, or a llama.cpp server with the embedded GGUF started for the run (``--n-ctx``)."""
    if args.server_url is not None:
        yield args.server_url
        return
    from rubric_induce.backends.llama_server import running_llama_server

    with running_llama_server(args.out / "server.log", n_ctx=args.n_ctx, startup_s=180) as url:
        yield url


# ----------------------------------------------------------------------------- verdicts
def midpoint(rubric: Rubric) -> float:
    values = rubric.scale.values
    return (min(values) + max(values)) / 2.0


def probe_verdict(record: Any, rubric: Rubric) -> bool | None:
    """Ours: the statement holds when the expected answer value is above the scale's midpoint."""
    if record is None or not record.ok:
        return None
    expected = record.expected
    return None if not np.isfinite(expected) else bool(expected > midpoint(rubric))


def geval_verdict(raw_score: float | None, rubric: Rubric, ranges: Sequence[dict[str, Any]]) -> bool | None:
    """GEval's 0-10 score -> the answer whose score range holds it -> above the midpoint or not."""
    if raw_score is None or not np.isfinite(raw_score):
        return None
    s = int(round(float(raw_score)))
    for entry in ranges:
        lo, hi = entry["score_range"]
        if lo <= s <= hi:
            m = re.search(r"\[answer (.+)\]$", entry["expected_outcome"], re.S)
            if m and m.group(1) in rubric.scale.labels:
                value = rubric.scale.values[rubric.scale.labels.index(m.group(1))]
                return bool(value > midpoint(rubric))
    return None


def autorubric_verdict(verdict: Any, error: Any = None) -> bool | None:
    """Autorubric: MET -> True, UNMET -> False, CANNOT_ASSESS or a failed judgment -> None."""
    if error or verdict is None:
        return None
    name = getattr(verdict, "value", verdict)
    return True if name == "MET" else False if name == "UNMET" else None


def agreement(ref: Sequence[bool | None], other: Sequence[bool | None]) -> dict[str, Any]:
    """Agreement of ``other`` with ``ref`` over the pairs where both have a verdict, its coverage, and
    Cohen's kappa (None when undefined: fewer than one pair, or chance agreement 1)."""
    pairs = [(a, b) for a, b in zip(ref, other) if a is not None and b is not None]
    n = len(pairs)
    covered = sum(b is not None for b in other)
    out: dict[str, Any] = {"pairs": n, "coverage": covered / len(other) if other else None,
                           "agreement": None, "kappa": None,
                           "yes_rate": (sum(b for b in other if b is not None) / covered) if covered else None}
    if not n:
        return out
    a = np.array([p[0] for p in pairs], dtype=float)
    b = np.array([p[1] for p in pairs], dtype=float)
    po = float(np.mean(a == b))
    pe = float(a.mean() * b.mean() + (1 - a.mean()) * (1 - b.mean()))
    out["agreement"] = po
    out["kappa"] = None if pe >= 1.0 else (po - pe) / (1.0 - pe)
    return out


# ----------------------------------------------------------------------------- the methods
def _require(module: str, package: str, extra: str) -> Any:
    import importlib

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise MissingDependencyError(package, "experiments/bench/bench_peers.py", extra=extra) from exc


class Method:
    """One way of judging: ``judge(example, text)`` -> {rubric id: verdict or None} (+ errors)."""

    name: str

    def judge(self, example: Example, text: str) -> tuple[dict[str, bool | None], list[str]]:
        raise NotImplementedError

    def close(self) -> None:
        pass


class Ours(Method):
    def __init__(self, name: str, url: str, model: str, rubrics: list[Rubric], *, packing: str, seed: int,
                 top_logprobs: int) -> None:
        from rubric_induce.backends import get_backend
        from rubric_induce.probing.api import ProbeParams

        self.name, self.rubrics, self.seed = name, rubrics, seed
        self.params = ProbeParams(packing=packing)
        self.backend = get_backend(f"openai-compatible/{model}@{url}", max_concurrency=1, max_retries=1,
                                   timeout=900.0, top_logprobs=top_logprobs, api_key_from_env=False)

    def judge(self, example, text):
        from rubric_induce.probing.api import probe

        table = probe([example], self.rubrics, self.backend, self.params, seed=self.seed)
        recs = {r.rubric_id: r for r in table.records}
        errors = sorted({r.error for r in table.records if r.error})
        return {rb.id: probe_verdict(recs.get(rb.id), rb) for rb in self.rubrics}, errors

    def close(self):
        self.backend.close()


class Autorubric(Method):
    def __init__(self, name: str, url: str, model: str, rubrics: list[Rubric], *, llm_calls: str, seed: int,
                 max_tokens: int) -> None:
        litellm = _require("litellm", "litellm", "peers")
        litellm.suppress_debug_info = True  # its "Provider List" banner on every cost look-up of a local model
        ar = _require("autorubric", "autorubric", "peers")
        from autorubric.graders import CriterionGrader

        self.name, self.rubrics = name, rubrics
        config = ar.LLMConfig(model=f"openai/{model}", api_base=url, api_key="sk-local", temperature=0.0,
                              max_tokens=max_tokens, timeout=900.0, max_retries=1, max_parallel_requests=1,
                              cache_enabled=False, seed=seed)
        self.grader = CriterionGrader(judge_model_config=config, llm_calls=llm_calls, seed=seed)
        self.rubric = ar.Rubric([ar.Criterion(name=r.id, requirement=r.text,
                                              weight=-10.0 if r.polarity == "DSAT" else 10.0) for r in rubrics])

    def judge(self, example, text):
        report = asyncio.run(self.rubric.grade(text, grader=self.grader))
        verdicts: dict[str, bool | None] = {r.id: None for r in self.rubrics}
        errors: list[str] = []
        for rb, crit in zip(self.rubrics, report.report or []):
            verdicts[rb.id] = autorubric_verdict(crit.final_verdict, crit.error)
            if crit.error:
                errors.append(str(crit.error)[:200])
        if getattr(report, "error", None):
            errors.append(str(report.error)[:200])
        return verdicts, sorted(set(errors))


class GEval(Method):
    def __init__(self, name: str, url: str, model: str, rubrics: list[Rubric], *, max_tokens: int) -> None:
        _require("deepeval", "deepeval", "deepeval")
        from rubric_induce.backends import get_backend
        from rubric_induce.data import RubricSet
        from rubric_induce.handoff import deepeval_geval, deepeval_model
        from rubric_induce.handoff.deepeval_metrics import deepeval_spec

        self.name, self.rubrics = name, rubrics
        self.backend = get_backend(f"openai-compatible/{model}@{url}", max_concurrency=1, max_retries=1,
                                   timeout=900.0, api_key_from_env=False)
        source = RubricSet(list(rubrics))
        self.spec = deepeval_spec(source)
        self.metrics = deepeval_geval(self.spec, model=deepeval_model(self.backend, max_tokens=max_tokens),
                                      async_mode=False)

    def judge(self, example, text):
        from deepeval.test_case import LLMTestCase

        verdicts: dict[str, bool | None] = {}
        errors: list[str] = []
        for rb, metric, g in zip(self.rubrics, self.metrics, self.spec["geval"]):
            try:
                score = metric.measure(LLMTestCase(input="", actual_output=text))
                raw = None if score is None else float(score) * 10.0
            except Exception as exc:  # a metric that raised has no verdict; counted, never hidden
                raw = None
                errors.append(f"{type(exc).__name__}: {str(exc)[:160]}")
            verdicts[rb.id] = geval_verdict(raw, rb, g["rubric"])
        return verdicts, sorted(set(errors))

    def close(self):
        self.backend.close()


def build_methods(names: Sequence[str], url: str, model: str, rubrics: list[Rubric], args: Any) -> list[Method]:
    makers: dict[str, Callable[[], Method]] = {
        "ours-independent": lambda: Ours("ours-independent", url, model, rubrics, packing="independent",
                                         seed=args.seed, top_logprobs=args.top_logprobs),
        "ours-packed": lambda: Ours("ours-packed", url, model, rubrics, packing="packed", seed=args.seed,
                                    top_logprobs=args.top_logprobs),
        "autorubric-criterion": lambda: Autorubric("autorubric-criterion", url, model, rubrics,
                                                   llm_calls="per_criterion", seed=args.seed,
                                                   max_tokens=args.peer_max_tokens),
        "autorubric-single": lambda: Autorubric("autorubric-single", url, model, rubrics, llm_calls="per_item",
                                                seed=args.seed, max_tokens=args.single_call_max_tokens),
        "deepeval-geval": lambda: GEval("deepeval-geval", url, model, rubrics, max_tokens=args.peer_max_tokens),
    }
    return [makers[n]() for n in names]


# ----------------------------------------------------------------------------- the run
def load_inputs(texts: Path, rubrics: Path, limit: int | None, seed: int,
                pick: str = "random") -> tuple[list[Example], list[Rubric]]:
    """The examples (``limit`` of them: a seeded random draw, or the shortest rendered texts) and rubrics."""
    from rubric_induce.data.mapping import read_examples
    from rubric_induce.data.render import render_example
    from rubric_induce.handoff import import_rubrics

    exs = read_examples(texts)
    if limit is not None and limit < len(exs):
        if pick == "shortest":
            exs = sorted(exs, key=lambda e: (len(render_example(e)), e.id))[:limit]
        else:
            rng = np.random.default_rng(seed)
            exs = [exs[i] for i in sorted(rng.choice(len(exs), size=limit, replace=False))]
    return exs, list(import_rubrics(rubrics))


def run(args: Any) -> dict[str, Any]:
    from rubric_induce.data.render import render_example

    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # no fetch of LiteLLM's price list
    os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
    examples, rubrics = load_inputs(args.texts, args.rubrics, args.limit, args.seed, args.pick)
    names = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = [m for m in names if m not in METHODS]
    if unknown:
        raise SystemExit(f"bench_peers: unknown method(s) {unknown}; choose from {', '.join(METHODS)}")
    args.out.mkdir(parents=True, exist_ok=True)
    with served(args) as url:
        (args.out / "calls.jsonl").unlink(missing_ok=True)
        with RecordingProxy(url, log=args.out / "calls.jsonl") as proxy:
            methods = build_methods(names, proxy.base_url, args.model, rubrics, args)
            rows: list[dict[str, Any]] = []
            try:
                for i, ex in enumerate(examples):
                    text = render_example(ex)
                    for m in methods:
                        proxy.tag = (m.name, ex.id)
                        t0 = time.perf_counter()
                        try:
                            verdicts, errors = m.judge(ex, text)
                        except Exception as exc:  # a whole text failed: no verdicts, the error kept
                            verdicts = {r.id: None for r in rubrics}
                            errors = [f"{type(exc).__name__}: {str(exc)[:300]}"]
                        wall = time.perf_counter() - t0
                        proxy.tag = None
                        row = {"method": m.name, "text": ex.id, "wall_s": wall, **proxy.summary((m.name, ex.id)),
                               "verdicts": verdicts, "errors": errors}
                        rows.append(row)
                        if args.progress:
                            print(f"[{i + 1}/{len(examples)}] {m.name:21s} {ex.id:22s} calls={row['calls']:3d} "
                                  f"prompt={row['prompt_tokens']:6d} completion={row['completion_tokens']:5d} "
                                  f"{wall:6.1f} s  verdicts={sum(v is not None for v in verdicts.values())}"
                                  f"/{len(rubrics)}" + (f"  errors={errors[:1]}" if errors else ""), flush=True)
                        (args.out / "rows.json").write_text(json.dumps(rows, indent=1))
            finally:
                for m in methods:
                    m.close()
    return summarize(rows, names, examples, rubrics, args, url)


def from_rows(args: Any) -> dict[str, Any]:
    """Summarise the ``rows.json`` of one or more runs (e.g. stopped part-way): each method over the texts
    it finished (its ``texts`` column); agreement over the pairs both it and the reference judged."""
    examples, rubrics = load_inputs(args.texts, args.rubrics, args.limit, args.seed, args.pick)
    names = [m.strip() for m in args.methods.split(",") if m.strip()]
    rows = [r for path in args.from_rows for r in json.loads(Path(path).read_text(encoding="utf-8"))]
    done = {r["text"] for r in rows if r["method"] in names}
    examples = [ex for ex in examples if ex.id in done]
    rows = [r for r in rows if r["text"] in done and r["method"] in names]
    args.out.mkdir(parents=True, exist_ok=True)
    return summarize(rows, names, examples, rubrics, args, args.server_url or "own llama_cpp.server")


def summarize(rows: list[dict[str, Any]], names: Sequence[str], examples: Sequence[Example],
              rubrics: Sequence[Rubric], args: Any, url: str) -> dict[str, Any]:
    from rubric_induce.data.render import render_example

    keys = [(ex.id, rb.id) for ex in examples for rb in rubrics]
    verdict = {(r["method"], r["text"], rid): v for r in rows for rid, v in r["verdicts"].items()}
    reference = getattr(args, "reference", None) or REFERENCE
    ref = [verdict.get((reference, t, rid)) for t, rid in keys] if reference in names else None
    methods: dict[str, Any] = {}
    for name in names:
        mine = [r for r in rows if r["method"] == name]
        n = max(1, len(mine))
        per_text = {k: sum(r[k] for r in mine) / n for k in
                    ("calls", "other_requests", "prompt_tokens", "completion_tokens", "wall_s")}
        ran = {r["text"] for r in mine}
        idx_all = [i for i, (t, _) in enumerate(keys) if t in ran]  # a method is judged on the texts it ran
        vs = [verdict.get((name, t, rid)) for t, rid in keys]
        pick = (lambda seq, idx: [seq[i] for i in idx])
        agree = agreement(pick(ref, idx_all) if ref is not None else pick(vs, idx_all), pick(vs, idx_all))
        by_rubric = {}
        for rb in rubrics:
            idx = [i for i in idx_all if keys[i][1] == rb.id]
            by_rubric[rb.id] = agreement(pick(ref, idx) if ref is not None else pick(vs, idx), pick(vs, idx))
        methods[name] = {"texts": len(mine), "per_text": per_text,
                         "totals": {k: sum(r[k] for r in mine) for k in
                                    ("calls", "other_requests", "prompt_tokens", "completion_tokens",
                                     "failed_calls", "calls_without_usage", "rewrote_format")},
                         "texts_with_errors": sum(bool(r["errors"]) for r in mine),
                         "error_examples": sorted({e for r in mine for e in r["errors"]})[:5],
                         "vs_reference": agree, "by_rubric": by_rubric}
    versions = {}
    for pkg in ("autorubric", "litellm", "deepeval", "openai", "llama_cpp_python"):
        try:
            from importlib.metadata import version

            versions[pkg] = version(pkg.replace("_", "-"))
        except Exception:
            versions[pkg] = None
    conditions = {"texts_file": str(args.texts), "rubrics_file": str(args.rubrics), "texts": len(examples),
                  "text_ids": [ex.id for ex in examples], "pick": args.pick,
                  "text_chars": [len(render_example(ex)) for ex in examples], "rubrics": len(rubrics), "seed": args.seed,
                  "server": "own llama_cpp.server (embedded SmolLM2-135M GGUF)" if args.server_url is None
                  else url, "model": args.model, "n_ctx": args.n_ctx if args.server_url is None else None,
                  "top_logprobs": args.top_logprobs, "peer_max_tokens": args.peer_max_tokens,
                  "single_call_max_tokens": args.single_call_max_tokens, "reference": reference,
                  "cpus": os.cpu_count(), "loadavg_end": list(os.getloadavg()), "versions": versions,
                  "command": " ".join([Path(sys.executable).name, *sys.argv])}
    return {"experiment": "bench_peers", "conditions": conditions, "methods": methods, "rows": rows,
            "table_md": table_md(methods, reference)}


def _f(x: Any, fmt: str) -> str:
    return "n/a" if x is None else format(x, fmt)


def table_md(methods: dict[str, Any], reference: str = REFERENCE) -> str:
    head = ("| method | texts | calls / text | prompt tok / text | completion tok / text | wall s / text | "
            f"verdict coverage | agreement with {reference} | kappa | 'holds' rate |")
    lines = [head, "|" + "---|" * 10]
    for name, m in methods.items():
        p, a = m["per_text"], m["vs_reference"]
        lines.append(f"| {name} | {m['texts']} | {p['calls']:.1f} | {p['prompt_tokens']:.0f} | "
                     f"{p['completion_tokens']:.0f} | {p['wall_s']:.1f} | {_f(a['coverage'], '.0%')} | "
                     f"{_f(a['agreement'], '.0%')} ({a['pairs']} pairs) | {_f(a['kappa'], '.2f')} | "
                     f"{_f(a['yes_rate'], '.0%')} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = parser("bench_peers", __doc__.split("\n\n")[0])
    ap.add_argument("--texts", type=Path, default=RESOURCES / "demo_uss_dialogues.jsonl",
                    help="examples JSONL ({id, fields, labels}); default: the demo dialogues")
    ap.add_argument("--rubrics", type=Path, default=RESOURCES / "demo_uss_rubrics.json",
                    help="any rubric file rubric-induce imports; default: the 8 demo rubrics")
    ap.add_argument("--limit", type=int, default=12, help="texts drawn (seeded) from --texts; 0: all")
    ap.add_argument("--pick", choices=("random", "shortest"), default="random",
                    help="which --limit texts: a seeded random draw, or the shortest (to fit a busy machine)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--server-url", default=None,
                    help="an OpenAI-compatible base URL (http://host:port/v1); default: start the embedded "
                         "SmolLM2 behind python -m llama_cpp.server")
    ap.add_argument("--model", default="smollm2", help="the model name sent to the server")
    ap.add_argument("--n-ctx", type=int, default=4096, help="context of the server this script starts")
    ap.add_argument("--methods", default=",".join(METHODS), help=f"comma-separated, of {', '.join(METHODS)}")
    ap.add_argument("--top-logprobs", type=int, default=20,
                    help="ours: [backend] top_logprobs (20: OpenAI's cap and packed probing's fixed value)")
    ap.add_argument("--peer-max-tokens", type=int, default=512,
                    help="reply cap of a per-criterion Autorubric call and a GEval call")
    ap.add_argument("--single-call-max-tokens", type=int, default=1536,
                    help="reply cap of Autorubric's one call per text (the whole rubric's answer)")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "bench_peers")
    ap.add_argument("--no-progress", dest="progress", action="store_false")
    ap.add_argument("--reference", default=REFERENCE,
                    help="the method whose verdicts the others are compared with (with --from-rows: any method "
                         "name in the rows)")
    ap.add_argument("--from-rows", type=Path, nargs="+", default=None,
                    help="no server: summarise the rows.json of one or more runs (stopped or not), each method "
                         "over the texts it finished, with the same --texts/--rubrics/--limit/--pick/--methods")
    exp, args = begin(ap, argv)
    if args.limit == 0:
        args.limit = None
    import signal

    def _stop(signum: int, frame: Any) -> None:  # SIGTERM unwinds like Ctrl-C, so the server is stopped
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _stop)
    try:
        results = from_rows(args) if args.from_rows else run(args)
    except RubricInduceError as exc:
        print(f"bench_peers: {exc}", file=sys.stderr)
        return exp.close(exit_code=2)
    (args.out / "results.json").write_text(json.dumps(results, indent=1, default=str))
    c = results["conditions"]
    print(f"\n# Peers side by side: {c['texts']} texts x {c['rubrics']} rubrics, {c['server']}, one call at a time\n")
    print(results["table_md"])
    print(f"\nresults: {args.out / 'results.json'}")
    return exp.close()


if __name__ == "__main__":
    raise SystemExit(main())

"""Does a llama.cpp server's ``logit_bias`` change the logprobs it reports, and does it keep the
relative probabilities of the answers?

Starts ``python -m llama_cpp.server`` on 127.0.0.1 with the embedded SmolLM2-135M model (or uses
``--base-url``), asks several rating prompts for the first token's ``top_logprobs`` without a
bias and with the same ``+B`` bias on every answer token ("1".."5"), and prints, per prompt:

* ``max|dlp|``: the largest change of an answer's reported logprob (0: logit_bias leaves the
  reported logprobs alone, as OpenAI's API does since 2024);
* ``ratio err``: the largest change of ``log p(a) - log p(b)`` over answer pairs listed in both
  (0: the relative answer probabilities are kept);
* how many answers are listed in the top-k with and without the bias, and the greedy token
  with and without it (the bias does act on decoding).

Run: ``python experiments/bench/bench_logit_bias.py [--bias 5] [--top 20]``.
"""
from __future__ import annotations

import contextlib
import itertools
import math
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import begin, parser

PROMPTS = [
    "Answer: 'Paris is the capital of France.' How correct is this answer, from 1 (wrong) to 5 (correct)?",
    "USER: book a table for 4\nSYSTEM: done, a table for 4 at 7pm.\nDoes the system fulfil the request? "
    "Rate from 1 (not at all) to 5 (fully).",
    "USER: where is my refund?\nSYSTEM: I cannot help with that.\nIs the user satisfied? Rate 1 to 5.",
    "Summary: 'The cat sat.' Source: 'A long article about economics.' Is the summary relevant? 1 to 5.",
    "USER: thanks, that was great!\nSYSTEM: you're welcome.\nDoes the user thank the system? Rate 1 to 5.",
]
ANSWERS = ["1", "2", "3", "4", "5"]


def answer_token_ids(model: str) -> dict[str, list[int]]:
    """Token ids whose text, stripped, is an answer ("4" and " 4" are different tokens)."""
    import llama_cpp

    llm = llama_cpp.Llama(model_path=model, vocab_only=True, verbose=False)
    out: dict[str, list[int]] = {a: [] for a in ANSWERS}
    for tid in range(llm.n_vocab()):
        text = llm.detokenize([tid]).decode("utf-8", errors="ignore").strip()
        if text in out:
            out[text].append(tid)
    return out


def first_token(client, messages, top: int, bias: dict[str, float] | None) -> tuple[dict[str, float], str]:
    extra = {"logit_bias": bias} if bias else {}
    r = client.chat.completions.create(model="smollm2", messages=messages, max_tokens=1, temperature=0.0,
                                       logprobs=True, top_logprobs=top, extra_body=extra)
    first = r.choices[0].logprobs.content[0]
    out: dict[str, float] = {}
    for alt in first.top_logprobs:
        key = alt.token.strip()
        if key in ANSWERS:
            out[key] = math.log(math.exp(out.get(key, -math.inf)) + math.exp(alt.logprob))
    return out, first.token


def main(argv: list[str] | None = None) -> int:
    ap = parser("bench_logit_bias", __doc__.split("\n")[0])
    ap.add_argument("--base-url", default=None)
    ap.add_argument("--bias", type=float, default=5.0)
    ap.add_argument("--top", type=int, default=20)
    exp, args = begin(ap, argv)
    import openai

    from rubric_induce.backends.local import default_model_path

    model = str(default_model_path())
    ids = answer_token_ids(model)
    bias = {str(t): args.bias for a in ANSWERS for t in ids[a]}
    with contextlib.ExitStack() as stack:
        url = args.base_url
        if url is None:
            from rubric_induce.backends.llama_server import running_llama_server

            log = Path(stack.enter_context(tempfile.TemporaryDirectory())) / "server.log"
            url = stack.enter_context(running_llama_server(log, model=Path(model), startup_s=60))
        client = stack.enter_context(openai.OpenAI(base_url=url, api_key="sk-no-key", max_retries=0, timeout=60))
        print(f"llama.cpp server {url}; bias +{args.bias:g} on {len(bias)} answer tokens; top_logprobs={args.top}")
        print(f"{'prompt':>6} {'listed':>7} {'listed+b':>8} {'max|dlp|':>9} {'ratio err':>9}  greedy token (+bias)")
        worst_dlp = worst_ratio = 0.0
        for i, text in enumerate(PROMPTS):
            msgs = [{"role": "user", "content": text}]
            plain, tok = first_token(client, msgs, args.top, None)
            biased, tok_b = first_token(client, msgs, args.top, bias)
            both = [a for a in ANSWERS if a in plain and a in biased]
            dlp = max((abs(biased[a] - plain[a]) for a in both), default=float("nan"))
            ratio = max((abs((biased[a] - biased[b]) - (plain[a] - plain[b]))
                         for a, b in itertools.combinations(both, 2)), default=float("nan"))
            worst_dlp = max(worst_dlp, dlp) if not math.isnan(dlp) else worst_dlp
            worst_ratio = max(worst_ratio, ratio) if not math.isnan(ratio) else worst_ratio
            print(f"{i:>6} {len(plain):>7} {len(biased):>8} {dlp:>9.4f} {ratio:>9.2e}  {tok!r} ({tok_b!r})")
        print(f"worst: max|dlp| {worst_dlp:.4f}, ratio err {worst_ratio:.2e}")
    return exp.close()


if __name__ == "__main__":
    sys.exit(main())

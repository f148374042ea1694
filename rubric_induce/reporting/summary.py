"""The opening of a run's report, read from the run directory alone.

Built from ``manifest.json``, ``config.json``, the stage markers and ``selected.jsonl``, so the
``report`` stage of ``run`` and ``rubric-induce report RUN`` write the same report.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rubric_induce.core.mdtext import md_code, md_text
from rubric_induce.core.safepaths import inside_folder
from rubric_induce.data import RubricSet
from rubric_induce.data.probes import probe_health_markdown
from rubric_induce.evaluation.judges import pooled_judges_line

__all__ = ["run_summary_markdown"]


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
    return data if isinstance(data, dict) else {}


def _num(v: Any) -> str:
    return "n/a" if v is None else f"{v:.3f}"


def _pct(v: Any) -> str:
    return "n/a" if v is None else f"{100 * v:.1f}%"


def _headline(ev: dict[str, Any], question: str | None) -> list[str]:
    """The held-out headline: each figure next to its baseline, the human ceiling, the warnings."""
    sel = ev.get("selection") or {}
    cal = ev.get("calibrated") or {}
    judges = ev.get("judges") or {}
    warnings = ev.get("warnings") or []
    if not (sel or cal or judges or warnings):
        return []
    lines = ["", "## Held-out headline", ""]
    if warnings:
        lines += [f"- **Warning:** {md_text(w)}" for w in warnings] + [""]
    base = ev.get("baselines") or {}
    if sel:
        maj = base.get("majority") or {}
        vs = ""
        if maj.get("accuracy") is not None:
            cls = "positive" if maj.get("majority_class") == 1 else "negative"
            vs = f" (majority class, always {cls}: accuracy {_pct(maj.get('accuracy'))}, F1 {_pct(maj.get('f1'))})"
        dn = sel.get("delta_netsat")
        lines.append(f"- NetSAT at the threshold: accuracy {_pct(sel.get('accuracy'))}, F1 {_pct(sel.get('f1'))}"
                     f"{vs}, ΔNetSAT {'n/a' if dn is None else f'{dn:.2f}'} (intervals in "
                     "[evaluation.md](evaluation.md))")
    graded = ev.get("netsat_graded") or {}
    if graded:
        lines.append(f"- netsat vs graded {md_code(ev.get('label'))}: Pearson {_num(graded.get('pearson'))}, Spearman "
                     f"{_num(graded.get('spearman'))} (n = {graded.get('n')})")
    for name, m in cal.items():
        rmse = f", RMSE {_num(m.get('rmse'))}" if name == "calibrated" and m.get("rmse") is not None else ""
        lines.append(f"- {md_text(name)} vs human {md_code(question)}: Pearson {_num(m.get('pearson'))}, Spearman "
                     f"{_num(m.get('spearman'))}, Kendall {_num(m.get('kendall'))}{rmse} (n = {m.get('n')})")
    const = base.get("constant") or {}
    if const.get("rmse") is not None:
        lines.append(f"- constant baseline (training mean {_num(const.get('mean'))}): RMSE {_num(const.get('rmse'))}; "
                     "no correlation (undefined)")
    line = pooled_judges_line(judges)  # the per-judge table's floor, with n and intervals
    if line:
        lines.append(line)
    return lines


_FAULT_COLUMNS = (("retries", "retries"), ("http_429", "HTTP 429"), ("http_5xx", "HTTP 5xx"),
                  ("timeouts", "timeouts"), ("connection_errors", "connection errors"),
                  ("bad_replies", "bad replies"), ("failures", "failed calls"),
                  ("retry_after_capped", "Retry-After capped"), ("retry_wait_s", "waited (s)"),
                  ("timeout_s", "lost to timeouts (s)"))


def _prompt_cache_section(manifest: dict[str, Any]) -> list[str]:
    """The share of new calls' prompt tokens served from a prefix cache: the provider's prompt cache
    (``usage.prompt_tokens_details.cached_tokens``) or the embedded model's KV cache."""
    backend = manifest.get("backend") or {}
    served = backend.get("kind") in ("openai", "openai-compatible")
    rows = []
    for name, info in (manifest.get("stages") or {}).items():
        u = (info or {}).get("usage") or {}
        if u.get("prompt_tokens") and "cached_tokens" in u:
            rows.append((name, int(u["cached_tokens"]), int(u["prompt_tokens"])))
    if not rows or not (served or any(c for _, c, _ in rows)):
        return []
    where = "the provider's prompt cache" if served else "the model's KV cache (prefix reuse)"
    parts = [f"{name} {c}/{p} ({c / p:.0%})" for name, c, p in rows]
    total_c, total_p = sum(c for _, c, _ in rows), sum(p for _, _, p in rows)
    note = ("" if not served or total_c else " A server that does not report "
            "`usage.prompt_tokens_details.cached_tokens` (llama.cpp's) shows 0 here whatever it reuses.")
    return ["", f"Prompt tokens served from {where}: {total_c} of {total_p} ({total_c / total_p:.0%}); per stage: "
                + ", ".join(parts) + f" (new calls only; cached tokens are priced at the cached-input rate).{note}"]


def _faults_section(manifest: dict[str, Any], out: Path) -> list[str]:
    """The served backend's faults per stage (from the manifest, else the markers): a table when any
    counter is non-zero, one "none" line when all are zero, nothing for backends that count none."""
    rows = []
    for name, info in (manifest.get("stages") or {}).items():
        usage = (info or {}).get("usage") or _load(out / "stages" / f"{name}.json").get("usage") or {}
        if any(k in usage for k, _ in _FAULT_COLUMNS):
            rows.append((name, info.get("status", ""), usage))
    if not rows:
        return []
    if not any(u.get(k) for _, _, u in rows for k, _ in _FAULT_COLUMNS):
        return ["", "Backend faults: none (no retry, HTTP 429 or 5xx, timeout, connection error, bad reply "
                    "or failed call)."]
    lines = ["", "## Backend faults", "",
             "| stage | " + " | ".join(label for _, label in _FAULT_COLUMNS) + " |",
             "|---|" + "---:|" * len(_FAULT_COLUMNS)]
    for name, status, u in rows:
        if not any(u.get(k) for k, _ in _FAULT_COLUMNS):
            continue  # stages without faults
        cells = [f"{float(u.get(k, 0) or 0):.1f}" if k.endswith("_s") else str(int(u.get(k, 0) or 0))
                 for k, _ in _FAULT_COLUMNS]
        lines.append(f"| {name}{' (' + status + ')' if status and not status.startswith('done') else ''} | "
                     + " | ".join(cells) + " |")
    lines += ["", "Retried requests that then succeeded cost only time; failed calls stopped the stage or "
                  "left failed probes. Raise backend.timeout, backend.max_retries or backend.retry_after_max, "
                  "or lower backend.concurrency, when a server is overloaded."]
    return lines


def _screens_section(gen: dict, sel: dict) -> list[str]:
    """Generated rubrics rejected by the screens, and rubrics the polarity check flipped or dropped, by reason."""
    rejected = gen.get("rejected") or {}
    polarity = sel.get("polarity_reasons") or {}
    if not rejected and not polarity:
        return []
    lines = ["", "## Generation screens", ""]
    if rejected:
        lines.append("Rejected at generation (pool.manifest.json has examples with the offending sentence or "
                     "copied span): " + ", ".join(f"{k} {v}" for k, v in sorted(rejected.items())) + ".")
    if polarity:
        what = "flipped" if sel.get("polarity_flipped") else "dropped"
        lines.append(f"Polarity check on the training split ({what}; selected.jsonl's manifest has each test): "
                     + ", ".join(f"{k} {v}" for k, v in sorted(polarity.items())) + ".")
    return lines


def _opening(manifest: dict, config: dict, pairwise: bool) -> str:
    """One paragraph: the config, the data and its split, the label and the backend."""
    data = manifest.get("data") or {}
    label = data.get("label") or (config.get("data") or {}).get("label")
    spec = (manifest.get("backend") or {}).get("spec") or (config.get("backend") or {}).get("spec")
    if pairwise:  # the pairs are the data; each response's 1/0 label is internal to the run
        return (f"Config {md_code(manifest.get('config_file'))}; {md_text(data.get('n_pairs', '?'))} pairs "
                f"({md_text(data.get('n_train_pairs', '?'))} train / {md_text(data.get('n_test_pairs', '?'))} "
                f"held out, split by pair, seed {md_text(manifest.get('seed'))}), each response probed on its "
                f"own ({md_text(data.get('n_examples', '?'))} responses); backend {md_code(spec)}.")
    return (f"Config {md_code(manifest.get('config_file'))}; {md_text(data.get('n_examples', '?'))} examples "
            f"({md_text(data.get('n_train', '?'))} train / {md_text(data.get('n_test', '?'))} held out, split "
            f"by group, seed {md_text(manifest.get('seed'))}); label {md_code(label)}; backend {md_code(spec)}.")


def _pipeline_section(out: Path, manifest: dict) -> list[str]:
    """The stages' table (seconds, calls, tokens, a brief result) and the stages skipped for want of a package."""
    lines = ["## Pipeline", "",
             "| stage | seconds | LLM calls (cached) | prompt + completion tokens | result |",
             "|---|---|---|---|---|"]
    stage_names = [n for n in (manifest.get("stages") or {}) if n != "report"]
    for name in stage_names:  # each names a marker file: inside the run folder only
        inside_folder(out / "stages", f"{name}.json", path=out / "manifest.json", field="stages")
    for name in stage_names:
        m = _load(out / "stages" / f"{name}.json")
        u, summ = m.get("usage") or {}, m.get("summary") or {}
        calls = f"{int(u.get('calls', 0))} ({int(u.get('cache_hits', 0))})" if u else ""
        tokens = f"{int(u.get('prompt_tokens', 0))} + {int(u.get('completion_tokens', 0))}" if u else ""
        brief = ", ".join(f"{k} {v:.3g}" if isinstance(v, float) else f"{k} {v}" for k, v in summ.items()
                          if isinstance(v, (int, float, str)) and not isinstance(v, bool)
                          and k not in ("style", "estimator", "score_mode", "skipped")
                          and not (k in ("call_errors", "reused") and not v))[:120]
        if summ.get("skipped"):
            brief = "skipped: optional package missing (see below)"
        lines.append(f"| {md_text(name)} | {md_text(m.get('seconds', ''))} | {calls} | {tokens} | {md_text(brief)} |")
    skipped = [note for n in stage_names
               if (note := (_load(out / "stages" / f"{n}.json").get("summary") or {}).get("skipped"))]
    if skipped:
        lines += ["", "## Skipped for want of an optional package", ""] + [f"- {md_text(s)}" for s in skipped]
    return lines


def _probes_section(out: Path) -> list[str]:
    """Bounded, failed, reused and truncated probes, and what selection did with them (none when all is well)."""
    probe_summ = _load(out / "stages" / "probe.json").get("summary") or {}
    sel_summ = _load(out / "stages" / "select.json").get("summary") or {}
    if not (probe_summ.get("bounded") or probe_summ.get("failed") or sel_summ.get("dropped")):
        return []
    lines = ["", "## Probes", "",
             f"{probe_summ.get('probes', '?')} probes: {probe_summ.get('bounded', 0)} bounded (an allowed "
             f"answer outside the backend's top-k: kept, below the bound; raise backend.top_logprobs where "
             f"the server allows), {probe_summ.get('failed', 0)} failed"
             + (f" ({probe_summ['call_errors']} of them calls that failed after the backend's retries: "
                "rerun the same command to retry just those)" if probe_summ.get("call_errors") else "")
             + "; "
             + (f"{probe_summ['reused']} kept from an interrupted run; " if probe_summ.get("reused") else "")
             + f"{probe_summ.get('truncated', 0)} truncated to probe.max_example_tokens. Selection: "
             f"{sel_summ.get('probes_filled', 0)} failed training probe(s) scored neutral, "
             f"{sel_summ.get('dropped', 0)} rubric(s) dropped past select.max_failure_rate"
             + (": " + ", ".join(md_code(d) for d in sel_summ.get("dropped_ids") or [])
                if sel_summ.get("dropped") else "")
             + "."]
    health = {rid: {"bounded": h.get("bounded", 0), "failed": h.get("failed", 0), "absent": 0}
              for rid, h in (probe_summ.get("per_rubric") or {}).items()}
    return lines + probe_health_markdown(health).splitlines()


def _selected_section(out: Path, pairwise: bool) -> list[str]:
    """The selected rubrics, numbered, with their polarity, id and method."""
    if not (out / "selected.jsonl").exists():
        return []
    chosen = RubricSet.load(out / "selected.jsonl")
    thr = "n/a" if chosen.threshold is None else f"{chosen.threshold:.3f}"
    lines = ["", "## Selected rubrics (compared by the Bradley-Terry head)" if pairwise
             else f"## Selected rubrics (NetSAT threshold {thr})", ""]
    return lines + [f"{i}. **{md_text(r.polarity or r.aspect or '')}** {md_text(r.text)} <sub>{md_code(r.id)}, "
                    f"{md_text(r.provenance.get('method', '?'))}</sub>" for i, r in enumerate(chosen, 1)]


def run_summary_markdown(run_dir: str | Path) -> str | None:
    """Markdown: what each stage did and cost, the selected rubrics, the held-out headline figures
    (None when ``run_dir`` is not a ``rubric-induce run`` directory)."""
    out = Path(run_dir)
    manifest = _load(out / "manifest.json")
    if manifest.get("format") != "rubric-induce-run":
        return None
    config = _load(out / "config.json")
    data = manifest.get("data") or {}
    label = data.get("label") or (config.get("data") or {}).get("label")
    pairwise = data.get("kind") == "pairwise"
    lines = [_opening(manifest, config, pairwise), "", *_pipeline_section(out, manifest)]
    lines += _prompt_cache_section(manifest)
    lines += _faults_section(manifest, out)
    lines += _probes_section(out)
    sel_summ = _load(out / "stages" / "select.json").get("summary") or {}
    lines += _screens_section(_load(out / "stages" / "generate.json").get("summary") or {}, sel_summ)
    lines += _selected_section(out, pairwise)
    ev = _load(out / "evaluation.json") or _load(out / "stages" / "evaluate.json").get("summary") or {}
    question = ev.get("question") or (config.get("calibrate") or {}).get("question") or label
    lines += _headline(ev, question)
    if (out / "feedback.md").exists():
        lines += ["", "LLM-written strengths and weaknesses: [feedback.md](feedback.md)."]
    lines += ["", *_next_step(out, pairwise), ""]
    return "\n".join(lines)


def _next_step(out: Path, pairwise: bool) -> list[str]:
    """How to use the run on new data: ``compare`` for a pairwise run's new pairs, ``score`` otherwise."""
    if pairwise:
        return ["Compare new pairs with this run: " + md_code(f"rubric-induce compare {out} --pairs pairs.jsonl "
                                                              "--out verdicts.jsonl")
                + " (P(A ≻ B) from the Bradley-Terry head), or `RubricScorer.load(...).compare_pairs(...)` in Python."]
    return ["Score new texts with this run: " + md_code(f"rubric-induce score {out} --input texts.jsonl "
                                                        "--out scores.jsonl")
            + ", or `RubricScorer.load(...)` in Python."]

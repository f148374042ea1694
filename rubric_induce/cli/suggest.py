"""``rubric-induce suggest``: the next texts to label, and what each label is for (the estimate, the
calibration and selection, the guarantee's threshold); CSV or JSONL out, optionally as Label
Studio tasks with a labelling config."""
from __future__ import annotations

import csv
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from rubric_induce.cli._shared import split_list
from rubric_induce.core.errors import DataError

__all__ = ["command", "Pool"]


@dataclass
class Pool:
    """The texts to choose from, the judge's distribution on them, and what the run says about them."""

    ids: list[str]
    probs: Any
    scale: tuple[float, ...]
    texts: dict[str, dict[str, str]] = field(default_factory=dict)  # id -> text fields (where known)
    labelled_texts: list[str] = field(default_factory=list)         # texts already labelled (for diversity)
    fields: list[str] = field(default_factory=lambda: ["text"])
    question: str | None = None
    rubrics: list[str] = field(default_factory=list)
    embedder_model: str | None = None
    fake_backend: bool = False
    confidence: Any = None  # the run's guarantee's confidence per text (threshold purpose), NaN where none


def _from_judgements(path: Path, judge: str | None) -> Pool:
    from rubric_induce.data.judgements import read_judgements

    jd = read_judgements(path)
    col = jd.judge(judge or jd.judge_names[0])
    pool = ~jd.labelled & col.present
    text_of = {jd.ids[i]: e["text"] for i, e in enumerate(jd.extra) if isinstance(e.get("text"), str)}
    return Pool([jd.ids[i] for i in range(jd.n) if pool[i]], col.probs[pool], jd.scale,
                {k: {"text": v} for k, v in text_of.items()},
                [text_of[jd.ids[i]] for i in range(jd.n) if jd.labelled[i] and jd.ids[i] in text_of])


def _from_scores(path: Path, input_path: Path | None) -> Pool:
    from rubric_induce.evaluation.estimate_inputs import judgements_from_scores, read_table

    jd = judgements_from_scores(path)
    pool = Pool(list(jd.ids), jd.judges["run"].probs, jd.scale)
    if input_path is not None:
        for _line, row in read_table(input_path):
            rid, fields = row.get("id"), row.get("fields")  # flat rows, or rubric-induce's {"fields": {...}}
            if isinstance(fields, dict) and all(isinstance(v, str) for v in fields.values()) and fields:
                pool.texts[str(rid)] = dict(fields)
                pool.fields = list(fields)
            elif rid is not None and isinstance(row.get("text"), str):
                pool.texts[str(rid)] = {"text": row["text"]}
    return pool


def run_guarantee(run: Path):
    """The run's fitted guarantee the report shows (the highest target that answers something), or
    None when the run has none that answers any text."""
    from rubric_induce.reporting.guarantee import pick_guarantee
    from rubric_induce.scoring.selective import fitted_guarantees

    folder = run if run.is_dir() else run.parent
    if not (folder / "artifact.json").is_file():
        return None
    g = pick_guarantee([x.to_dict() for x in fitted_guarantees(folder)])
    return g if g is not None and g.threshold is not None else None


def _from_run(run: Path, input_path: Path, backend: str | None, cache: Path | None, guarantee: Any = None) -> Pool:
    """Score the pool with the run (probes go through the run's call cache: texts probed before cost
    nothing); with ``guarantee``, each text's confidence under it as well."""
    import numpy as np

    from rubric_induce.scoring.scorer import RubricScorer

    scorer = RubricScorer.load(run, backend=backend, cache=cache)
    examples = scorer.read(input_path, optional_run_id=True)
    results = scorer.score(examples, guarantee=guarantee)
    if not results or any(r.proba is None for r in results):
        raise DataError("the run scored no calibrated distribution (suggest needs a calibrated run)", path=run,
                        field="calibration")
    cfg = _run_config(run)
    pool = Pool([r.id for r in results], np.asarray([r.proba for r in results], dtype=float),
                tuple(float(v) for v in results[0].scale), {e.id: dict(e.fields) for e in examples},
                fields=list(scorer.fields or ["text"]), question=results[0].question,
                rubrics=[r.text for r in scorer.rubrics], embedder_model=(cfg.get("dedup") or {}).get("model"),
                fake_backend=str((cfg.get("backend") or {}).get("spec", "")).startswith("fake"))
    if guarantee is not None:
        pool.confidence = np.array([np.nan if r.confidence is None else r.confidence for r in results], dtype=float)
    return pool


def _run_config(run: Path) -> dict[str, Any]:
    path = (run if run.is_dir() else run.parent) / "config.json"
    try:
        return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    except (OSError, json.JSONDecodeError):
        return {}


def _embeddings(pool: Pool, how: str) -> tuple[Any, Any, str]:
    """Pool and labelled texts' embeddings, and which embedder gave them (None, None: no texts)."""
    from rubric_induce.evaluation.suggest import hashed_embeddings

    texts = [" ".join(pool.texts[i].values()) if i in pool.texts else None for i in pool.ids]
    if any(t is None for t in texts):
        return None, None, "none (no texts: the judge's distributions stand in)"
    use_model = how == "model" or (how == "auto" and not pool.fake_backend)
    if use_model:
        try:
            from rubric_induce.core.embeddings import SentenceEmbedder

            emb = SentenceEmbedder(pool.embedder_model)
            return emb.encode(texts), emb.encode(pool.labelled_texts) if pool.labelled_texts else None, emb.name
        except Exception as exc:  # a missing model or package: say so, fall back only under auto
            if how == "model":
                raise DataError(f"cannot load the embedding model: {exc}", field="embedder") from None
    return hashed_embeddings(texts), hashed_embeddings(pool.labelled_texts) if pool.labelled_texts else None, "hashed words"


def _rows(pool: Pool, suggestions) -> list[dict[str, Any]]:
    out = []
    for s in suggestions:
        row = {"id": s.id, **s.to_dict()}
        row.update(pool.texts.get(s.id, {}))
        row["label"] = None  # filled in by the rater; estimate --labels reads it back
        out.append(row)
    return out


def _write(rows: list[dict[str, Any]], out: Path | None) -> None:
    if out is not None and out.suffix.lower() in (".csv", ".tsv"):
        columns = list(dict.fromkeys(k for r in rows for k in r))
        with out.open("w", encoding="utf-8", newline="") as fh:
            writer = csv.DictWriter(fh, columns, delimiter="," if out.suffix.lower() == ".csv" else "\t")
            writer.writeheader()
            writer.writerows({k: ("" if v is None else v) for k, v in r.items()} for r in rows)
        return
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    if out is None:
        sys.stdout.write(text)
    else:
        from rubric_induce.data.jsonl import atomic_write_text

        atomic_write_text(out, text)


@click.command("suggest")
@click.argument("run", required=False, type=click.Path(exists=True, path_type=Path))
@click.option("--input", "input_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="The pool of unlabelled texts (with RUN: scored by the run; with --scores: their texts).")
@click.option("--judgements", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A judgements file: its unlabelled rows are the pool (a 'text' field gives their texts).")
@click.option("--judge", default=None, help="With --judgements: the judge (default: the file's first).")
@click.option("--scores", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A run's score output on the pool (rubric-induce score RUN --input POOL --out FILE).")
@click.option("-n", "n", type=click.IntRange(min=1), default=20, show_default=True,
              help="Texts per purpose (for the estimate: the expected number drawn).")
@click.option("--for", "purposes", default="estimate,calibration", show_default=True,
              help="Purposes, comma-separated: estimate, calibration, threshold.")
@click.option("--threshold", type=float, default=None,
              help="For 'threshold': the confidence threshold to label around (default with RUN: its fitted "
                   "guarantee's, on the guarantee's own confidence measure).")
@click.option("--mix", type=click.FloatRange(0, 1, min_open=True), default=0.5, show_default=True,
              help="Estimate: the uniform share of the sampling rule (bounds every weight by n / (mix * budget)).")
@click.option("--seed", type=int, default=0, show_default=True, help="The coins' seed (estimate).")
@click.option("--embedder", type=click.Choice(["auto", "model", "hash"]), default="auto", show_default=True,
              help="Calibration's diversity: the dedup stage's embedding model, or hashed words (auto: hashed "
                   "words with the fake backend or without the model).")
@click.option("--backend", default=None, help="With RUN: score through this backend instead of the run's.")
@click.option("--cache", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="With RUN: the LLM call cache (default: the run's).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="CSV, TSV or JSONL (by suffix; default: JSONL on stdout).")
@click.option("--label-studio", "label_studio", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Also write Label Studio tasks (tasks.json) and a labelling config (config.xml) here.")
def command(run, input_path, judgements, judge, scores, n, purposes, threshold, mix, seed, embedder, backend, cache,
            out, label_studio) -> None:
    """List the next texts to label, and what each label is for.

    \b
    estimate     active inference: each pool text is drawn with a probability tied to the judge's
                 uncertainty; the label's weight in `estimate` is 1 / sampling_probability
    calibration  the judge is unsure and no labelled text is near (uncertainty x embedding distance)
    threshold    the judge's confidence is nearest the guarantee's threshold (RUN's fitted
                 guarantee, the one the report shows; else --threshold)

    \b
    Examples:
      rubric-induce suggest runs/demo --input pool.jsonl -n 30 --out next.csv
      rubric-induce suggest --judgements judged.jsonl --judge gpt-4o --for estimate -n 50 --out next.csv
    """
    from rubric_induce.evaluation.suggest import SuggestParams, suggest

    sources = [x for x in (run, judgements, scores) if x is not None]
    if len(sources) != 1:
        raise click.UsageError("give one of RUN (with --input), --judgements or --scores")
    if run is not None and input_path is None:
        raise click.UsageError("RUN needs --input POOL (the texts to choose from)")
    guarantee = None
    if run is not None and threshold is None and "threshold" in split_list(purposes):
        guarantee = run_guarantee(run)
        if guarantee is not None:
            threshold = guarantee.threshold
            click.echo(f"threshold {threshold:.4g} from the run's {guarantee.line()}", err=True)
    params = SuggestParams(n=n, purposes=tuple(split_list(purposes)), mix=mix, threshold=threshold, seed=seed)
    params.check()  # before scoring the pool: a missing threshold costs no call
    if run is not None:
        pool = _from_run(run, input_path, backend, cache, guarantee)
    elif judgements is not None:
        pool = _from_judgements(judgements, judge)
    else:
        pool = _from_scores(scores, input_path)
    emb, lab_emb, used = _embeddings(pool, embedder) if "calibration" in params.purposes else (None, None, "")
    found = suggest(pool.ids, pool.probs, pool.scale, params, embeddings=emb, labelled_embeddings=lab_emb,
                    confidence=pool.confidence)
    rows = _rows(pool, found)
    _write(rows, out)
    counts = ", ".join(f"{p}: {sum(1 for s in found if s.purpose == p)}" for p in params.purposes)
    click.echo(f"suggested {len(rows)} text(s) from a pool of {len(pool.ids)} ({counts})"
               + (f"; diversity from {used}" if used else "") + (f"; wrote {out}" if out else ""), err=True)
    if label_studio is not None:
        if any(r["id"] not in pool.texts for r in rows):
            raise DataError("Label Studio tasks need the texts: give --input POOL (or a 'text' field in the "
                            "judgements file)", field="label-studio")
        from rubric_induce.handoff.label_studio import write_handoff

        tasks, config = write_handoff(label_studio, rows, pool.scale, fields=pool.fields, question=pool.question,
                                      rubrics=pool.rubrics)
        click.echo(f"wrote {tasks} and {config} (import the tasks into a project with this labelling config)", err=True)

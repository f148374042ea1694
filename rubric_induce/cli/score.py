"""``rubric-induce score``: score texts (or existing probes) with a run's induced rubrics; JSONL out
(or CSV / TSV / a JSON array, by ``--out``'s suffix).

One form: ``score ARTIFACT (--input FILE | --probes FILE) [--out FILE]``. ARTIFACT is a run
directory or artifact folder (``artifact.json``), or a folder written by ``rubric-induce
calibrate`` (calibrator only: then ``--probes`` is required). Without a run, ``score --judgements
FILE --guarantee-file G.json`` answers or abstains any judges' outputs
(:mod:`rubric_induce.cli.score_judgements`).

Scoring texts prints (stderr) the endpoint it sends them to, its URL's credentials redacted. An
endpoint read from ``artifact.json`` gets no API key from the environment (a shared run folder
must not be able to send your key to its host); ``--backend`` naming the endpoint sends it.
"""
from __future__ import annotations

import csv
import itertools
import json
import math
import os
import sys
import tempfile
from array import array
from pathlib import Path
from typing import Any

import click
import numpy as np

from rubric_induce.backends.base import fault_summary
from rubric_induce.backends.openai_compat import environment_api_key
from rubric_induce.calibration.artifacts import load_calibrator
from rubric_induce.calibration.predict import calibrated_rows, calibrator_features
from rubric_induce.cli._shared import (
    backend_options_given,
    echo,
    progress_option,
    run_backend_options,
    show_progress,
    split_list,
)
from rubric_induce.cli.score_judgements import score_judgements_file
from rubric_induce.cli.selective import guarantee_options, guarantee_summary, selective_entry
from rubric_induce.core.errors import DataError
from rubric_induce.core.params import suggest
from rubric_induce.data.mapping import MAPPING_FORMATS
from rubric_induce.data.probes_parquet import is_parquet, load_probe_table, scan_probes
from rubric_induce.evaluation.heldout import constant_warning
from rubric_induce.scoring.artifact import ARTIFACT_NAME
from rubric_induce.scoring.options import AdaptiveOptions, ScoreParams
from rubric_induce.scoring.scorer import RubricScorer
from rubric_induce.scoring.stream import read_chunks, score_chunks, stream_probes
from rubric_induce.scoring.stream_parquet import stream_parquet_probes

__all__ = ["command", "input_mapping", "write_rows", "out_format", "RowWriter"]


def input_mapping(scorer, fmt: str | None, id_field: str | None, text_field: str | None,
                  maps: tuple[str, ...] = ()):
    """The run's input mapping (its text columns and id column) with the command line's overrides."""
    base = scorer.input_mapping()
    fields = list(scorer.fields or base.text or ["text"])
    text = dict(base.text or {f: f for f in fields})
    if text_field:
        if len(fields) != 1:
            raise DataError(f"--text-field names one column, but this run reads {len(fields)} fields "
                            f"({', '.join(fields)}); give --map FIELD=COLUMN for each", field="--text-field")
        text = {fields[0]: text_field}
    for item in maps:
        name, sep, column = item.partition("=")
        name, column = name.strip(), column.strip()
        if not sep or not name or not column:
            raise DataError(f"expected FIELD=COLUMN, got {item!r}", field="--map")
        if scorer.fields and name not in scorer.fields:
            raise DataError(f"unknown field {name!r}{suggest(name, scorer.fields)}; this run reads "
                            f"{', '.join(scorer.fields)}", field="--map")
        text[name] = column
    changes: dict[str, Any] = {"text": text}
    if fmt:
        changes["format"] = fmt
    if id_field:
        changes["id"] = id_field
    try:
        return base.replace(**changes)
    except DataError as exc:
        raise DataError(exc.message, field=exc.field) from None


#: What a pairwise run's ``score`` reads, and where pairs go instead.
PAIRWISE_HINT = ("this is a pairwise run: score reads single responses (columns prompt and response, or --map "
                 "prompt=COLUMN --map response=COLUMN); for P(A > B) of pairs use rubric-induce compare RUN --pairs FILE")


#: ``--out`` suffixes and the format written (anything else: JSON Lines).
OUT_FORMATS = {".csv": "csv", ".tsv": "tsv", ".json": "json", ".jsonl": "jsonl", ".ndjson": "jsonl"}


def out_format(out_path: Path | None) -> str:
    """The format ``--out`` asks for by its suffix: csv, tsv, json (an array) or jsonl (the default)."""
    return OUT_FORMATS.get(out_path.suffix.lower(), "jsonl") if out_path else "jsonl"


def _cell(value: Any) -> Any:
    """A CSV cell: numbers and text as they are, null empty, lists and objects as JSON."""
    if value is None:
        return ""
    if isinstance(value, (list, dict)):
        return json.dumps(value, ensure_ascii=False)
    return value


class RowWriter:
    """Rows written one at a time as ``--out``'s suffix says (see :func:`write_rows`), so that no list
    of every row is held: JSONL and a JSON array are written as they come, into a temporary file
    that :meth:`close` renames to ``--out`` (:meth:`abort` removes it: a failed run leaves no half
    file); CSV / TSV rows go to a spool file first (the header is every key of every row), then
    into the table. Without ``--out``: JSON Lines on stdout, as they come."""

    def __init__(self, out_path: Path | None) -> None:
        self.out_path, self.fmt, self.n = out_path, out_format(out_path), 0
        self._columns: dict[str, None] = {}
        self._tmp: Path | None = None
        if out_path is None:
            self._sink = sys.stdout
            return
        fd, tmp = tempfile.mkstemp(prefix=f".{out_path.name}.", suffix=".tmp", dir=out_path.parent)
        self._tmp = Path(tmp)
        self._sink = open(fd, "w+" if self.fmt in ("csv", "tsv") else "w", encoding="utf-8")

    def write(self, row: dict[str, Any]) -> None:
        if self.fmt in ("csv", "tsv"):  # spooled as JSON lines; the columns are known at the end
            self._columns.update(dict.fromkeys(row))
            self._sink.write(json.dumps(row, ensure_ascii=False) + "\n")
        elif self.fmt == "json":  # as json.dump(rows, indent=1) writes the list, one item at a time
            item = json.dumps(row, ensure_ascii=False, indent=1).replace("\n", "\n ")
            self._sink.write(("[\n " if self.n == 0 else ",\n ") + item)
        else:
            self._sink.write(json.dumps(row, ensure_ascii=False) + "\n")
        self.n += 1

    def close(self) -> None:
        """Finish the file and put it in place."""
        if self._tmp is None:
            return
        try:
            if self.fmt in ("csv", "tsv"):
                self._sink.seek(0)
                columns = list(self._columns)
                with self.out_path.open("w", encoding="utf-8", newline="") as sink:
                    writer = csv.writer(sink, delimiter="," if self.fmt == "csv" else "\t")
                    writer.writerow(columns)
                    for line in self._sink:
                        row = json.loads(line)
                        writer.writerow([_cell(row.get(c)) for c in columns])
                self.abort()
                return
            if self.fmt == "json":
                self._sink.write("[]\n" if self.n == 0 else "\n]\n")
            self._sink.close()
            os.replace(self._tmp, self.out_path)
            self._tmp = None
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        """Drop what was written (nothing reaches ``--out``)."""
        if self._tmp is None:
            return
        self._sink.close()
        self._tmp.unlink(missing_ok=True)
        self._tmp = None


def write_rows(rows, out_path: Path | None) -> None:
    """Write the rows as ``--out``'s suffix says (.csv/.tsv: one line per text, nested values as JSON
    text; .json: an array; else JSONL), or JSONL on stdout."""
    writer = RowWriter(out_path)
    try:
        for row in rows:
            writer.write(row)
    except BaseException:
        writer.abort()
        raise
    writer.close()


class _Summary:
    """What the summary lines after scoring read, kept as compact columns as the rows are written
    (about 30 bytes a text): the predictions, answer checks, labels, answers, rubrics asked."""

    def __init__(self) -> None:
        self.n = 0
        self.scale: list[float] | None = None  # the answer scale: a near-constant prediction is judged against it
        self.prediction = array("d")  # NaN: none
        self.surprise = array("d")  # NaN: none
        self.label = array("b")  # -1: none
        self.answered = 0
        self.asked = self.calls_saved = 0

    def add(self, res) -> None:
        self.n += 1
        self.scale = self.scale or res.scale
        self.prediction.append(math.nan if res.prediction is None else res.prediction)
        self.surprise.append(math.nan if res.answer_surprise is None else res.answer_surprise)
        self.label.append(-1 if res.label is None else int(res.label))
        self.answered += bool(res.answered)
        self.asked += len(res.asked or [])
        self.calls_saved += res.calls_saved or 0


@click.command("score")
@click.argument("artifact", nargs=-1, required=False, type=click.Path(exists=True, path_type=Path))
@click.option("--input", "input_path", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="Texts to score: JSONL/JSON (flat columns or rubric-induce examples), CSV or TSV, read with the "
                   "run's mapping (its text columns and id column). Read, probed, scored and written 4,096 rows at "
                   "a time (checks across rows hold per chunk); --adaptive reads every text first.")
@click.option("--probes", "probes_path", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="Score existing probes instead (no LLM call): a probe table JSONL of the texts, or the same "
                   "table as Parquet (FILE.parquet; needs pyarrow, the parquet extra), scored in the order of their "
                   "ids, 4,096 at a time (a table of more than 65,536 texts is copied into temporary bucket files "
                   "beside it, removed at the end). The summary lines cover every text.")
@click.option("--text-field", default=None,
              help="Column/key holding the text, for a run with one text field (default: the run's column).")
@click.option("--map", "maps", multiple=True, metavar="FIELD=COLUMN",
              help="Column holding one of the run's text fields (repeatable; default: the run's columns).")
@click.option("--id-field", default=None, help="Column/key holding a row id (default: the run's id column where "
                                               "the file has it, else `id` where a row has it, else a hash of "
                                               "the texts).")
@click.option("--format", "fmt", type=click.Choice([f for f in MAPPING_FORMATS]), default=None,
              help="Input format (default: auto, from the file name).")
@click.option("--out", "out_path", type=click.Path(dir_okay=False, path_type=Path), default=None,
              help="File to write, by its suffix: .csv or .tsv (one row per text; nested values such as "
                   "distributions and drivers as JSON text), .json (an array), else JSON Lines (default: JSON "
                   "Lines on stdout).")
@run_backend_options
@click.option("--judge", default=None, help="Predict this judge (one the calibrator was trained on), or 'shared': "
                                             "the shared weights only, for a judge it has not seen. Any other name "
                                             "is an error listing the known judges.")
@click.option("--trusted", default=None, help="Comma-separated trusted judges to aggregate over.")
@click.option("--aggregate", type=click.Choice(["mean", "max"]), default="mean", show_default=True,
              help="How --trusted judges' expected scores are combined.")
@click.option("--question", default=None, help="Calibrator only: question to predict (default: its main one).")
@click.option("--adaptive", is_flag=True, default=False,
              help="Ask each text only the rubrics expected to move its calibrated prediction (greedy expected "
                   "reduction of its variance, or of a two-answer label's decision entropy), until --stop-at or "
                   "--budget. Each row lists the rubrics asked and the calls saved. With --probes: replays the "
                   "policy on the table (which calls it would have made). Needs a calibrated run.")
@click.option("--budget", type=click.IntRange(min=0), default=None,
              help="--adaptive: at most this many rubric calls per text (default: all rubrics).")
@click.option("--stop-at", "stop_at", type=float, default=None,
              help="--adaptive: stop asking a text once the best expected gain is at or below this. In the "
                   "target's variance units (answer scale squared), or bits for a two-answer label; 0 stops only "
                   "when no rubric can move the prediction. Default: 0.001 of the largest uncertainty the scale "
                   "allows (((max-min)/2)^2, or 1 bit).")
@click.option("--outcomes", type=click.Choice(["both", "answers", "gaussian"]), default=None,
              help="--adaptive: how the policy imagines an unasked rubric's answer: the answer network's classes, "
                   "the Gaussian fill's spread, or both gains averaged (default). 'gaussian' held up better when the "
                   "texts differ from the training ones (BENCHMARKS.md).")
@click.option("--answer-check/--no-answer-check", default=True, show_default=True,
              help="Runs with an adaptive model: give each row its answer_surprise and print whether the texts look "
                   "unlike the training texts (no labels needed). Off saves one pass of the answer networks per "
                   "rubric.")
@guarantee_options
@click.option("--judgements", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="Instead of a run: a judgements file of any judges' outputs on new texts (the layout "
                   "calibrate-guarantee --judgements reads; no label needed), each text answered or abstained "
                   "with --guarantee-file's record for --guarantee (and --delta). Rows: id, decision, answer, "
                   "confidence, by (the judge or jury that answered), calls, cost.")
@click.option("--guarantee-file", "guarantee_file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
              default=None, help="--judgements: the records written by calibrate-guarantee --judgements "
                                 "(FILE.guarantees.json); --guarantee TARGET picks one when it holds several.")
@progress_option
@click.pass_context
def command(ctx, artifact, input_path, probes_path, text_field, maps, id_field, fmt, out_path, backend_spec,
            cache_path, judge, trusted, aggregate, question, adaptive, budget, stop_at, outcomes, answer_check,
            progress, guarantee, delta, measure, cascade, judgements, guarantee_file, **backend_opts) -> None:
    """Score texts with a run directory's selected (and calibrated) rubrics.

    Each output line holds the per-rubric answer distributions, NetSAT, the binary label at the
    selected threshold, the calibrated prediction with its uncertainty, and the rubrics that
    drove it.

    \b
    Examples:
      rubric-induce score runs/demo --input new_dialogues.jsonl --out scores.jsonl
      rubric-induce score runs/demo --input chats.csv --text-field transcript --trusted annotator1,annotator2
      rubric-induce score runs/summ --input new.csv --map source=article --map text=summary
      rubric-induce score runs/demo --probes runs/demo/probes.jsonl          (no LLM call)
      rubric-induce score runs/cal --probes probes.jsonl                      (a calibrator alone)
      rubric-induce score runs/demo --input new.jsonl --adaptive --budget 3   (only the rubrics that matter)
      rubric-induce score runs/demo --input new.jsonl --guarantee 0.9 --delta 0.1  (answer or abstain)
      rubric-induce score --cascade runs/cheap runs/strong --input new.jsonl --guarantee 0.9
      rubric-induce score --judgements new.jsonl --guarantee-file judged.guarantees.json --guarantee 0.85
    """
    if judgements is not None or guarantee_file is not None:  # any judges' outputs, no run
        score_judgements_file(ctx, artifact, {"judgements": judgements, "guarantee_file": guarantee_file,
                                              "guarantee": guarantee, "delta": delta, "out_path": out_path},
                              write_rows)
        return
    if not artifact:
        raise click.UsageError("give a run directory ARTIFACT (or --judgements FILE --guarantee-file G.json)")
    artifact = selective_entry(artifact, cascade=cascade, guarantee=guarantee, delta=delta, measure=measure,
                               input_path=input_path, probes_path=probes_path, out_path=out_path,
                               backend_spec=backend_spec, cache_path=cache_path, adaptive=adaptive,
                               mapping=lambda s: input_mapping(s, fmt, id_field, text_field, maps),
                               progress=show_progress(progress), write_rows=write_rows)
    if artifact is None:
        return
    who = _check_usage(input_path, probes_path, judge, trusted, adaptive, budget, stop_at, outcomes)
    if not _is_run(artifact):
        if probes_path is None:
            raise click.UsageError(f"{artifact} has no {ARTIFACT_NAME}: a calibrator folder scores --probes FILE only")
        if adaptive:
            raise click.UsageError(f"--adaptive scores with a run's rubrics: point at a run directory (with "
                                   f"{ARTIFACT_NAME}), not a calibrator folder")
        _score_with_calibrator(artifact, probes_path, who, aggregate, question, out_path)
        return
    if question is not None:
        raise click.UsageError("--question is for a calibrator folder; a run predicts its own question")
    params = ScoreParams(judge=who, aggregate=aggregate, answer_check=answer_check,
                         adaptive=AdaptiveOptions(budget=budget, stop_at=stop_at, outcomes=outcomes or "both")
                         if adaptive else None,
                         guarantee={"target": guarantee, "delta": delta, "measure": measure}
                         if guarantee is not None else None)
    given = backend_options_given(backend_opts) or None  # checked against the backend's kind in load
    scorer = RubricScorer.load(artifact, backend=backend_spec, cache=cache_path, backend_options=given)
    try:
        params = scorer.check(params)  # before reading the texts or opening the backend
        if probes_path is not None:
            chunks = _probe_chunks(scorer, probes_path, params)
        else:
            mapping = input_mapping(scorer, fmt, id_field, text_field, maps)
            chunks = _text_chunks(scorer, input_path, mapping, params, optional_run_id=not id_field,
                                  progress=show_progress(progress))  # new texts often have no id column
        summary = _write_chunks(chunks, out_path)
    finally:
        if probes_path is None:  # also when probing failed before the first chunk (every probe failed)
            _say_faults(scorer)
        scorer.close()
    _say_summary(scorer, summary, params, out_path)


def _check_usage(input_path, probes_path, judge, trusted, adaptive, budget, stop_at, outcomes) -> Any:
    """The options that go together; returns whose prediction (a judge, the trusted list, or None)."""
    if (input_path is None) == (probes_path is None):
        raise click.UsageError("give exactly one of --input FILE (texts) or --probes FILE (existing probes)")
    if judge is not None and trusted is not None:
        raise click.UsageError("give at most one of --judge and --trusted")
    if not adaptive and (budget is not None or stop_at is not None or outcomes is not None):
        raise click.UsageError("--budget, --stop-at and --outcomes go with --adaptive")
    return split_list(trusted) if trusted else judge


def _is_run(artifact: Path) -> bool:
    """A run directory or artifact folder (with artifact.json), not a calibrator folder."""
    return (artifact / ARTIFACT_NAME).exists() if artifact.is_dir() else artifact.name == ARTIFACT_NAME


def _probe_chunks(scorer: RubricScorer, probes_path: Path, params: ScoreParams):
    """The results of a probe table's texts (sorted by id), a chunk at a time: streamed from the file,
    JSONL or Parquet by its suffix (adaptive scoring replays the policy on every text at once, so it reads the whole table)."""
    if params.adaptive is None:
        return (stream_parquet_probes if is_parquet(probes_path) else stream_probes)(scorer, probes_path, params)
    store = scan_probes(probes_path, [r.id for r in scorer.rubrics])  # arrays, not records
    return scorer.iter_score_probes(store, sorted(store.example_ids), params)


def _text_chunks(scorer: RubricScorer, input_path: Path, mapping, params: ScoreParams, *, optional_run_id: bool,
                 progress: bool):
    """The results of ``--input``'s texts, read, probed and scored a chunk at a time (adaptive
    scoring asks every text in lockstep, so it reads them all first); a pairwise run's reading
    error says what it reads instead."""
    try:
        if params.adaptive is not None:
            examples = scorer.read(input_path, mapping, optional_run_id=optional_run_id)
            _say_endpoint(scorer)
            yield from scorer.iter_score(examples, params, progress=progress)
            return
        texts = read_chunks(scorer, input_path, mapping, optional_run_id=optional_run_id)
        first = next(texts)  # a file that cannot be read fails before the endpoint line
        _say_endpoint(scorer)
        yield from score_chunks(scorer, itertools.chain([first], texts), params, progress=progress)
    except DataError as exc:
        if scorer.kind != "pairwise" or exc.path is None or Path(exc.path) != input_path:
            raise
        raise DataError(f"{exc.message}; {PAIRWISE_HINT}", path=exc.path, line=exc.line, field=exc.field) from None


def _write_chunks(chunks, out_path: Path | None) -> _Summary:
    """Each chunk's rows written as it comes; what the summary lines read is kept."""
    summary = _Summary()
    writer = RowWriter(out_path)
    try:
        for chunk in chunks:
            for res in chunk:
                writer.write(res.to_dict())
                summary.add(res)
    except BaseException:
        writer.abort()
        raise
    writer.close()
    return summary


def _say_summary(scorer: RubricScorer, summary: _Summary, params: ScoreParams, out_path: Path | None) -> None:
    """The lines after scoring (stderr): pairwise strength, a flat prediction, the answer check,
    the calls adaptive scoring saved, the guarantee, the count written."""
    if scorer.kind == "pairwise":
        echo("pairwise run: each row's strength is the response's Bradley-Terry strength, its reward (P(A > B) grows "
             "with strength(A) - strength(B)); for P(A > B) of pairs: rubric-induce compare RUN --pairs FILE"
             if scorer.pairwise_head is not None else
             "pairwise run without a Bradley-Terry head (calibrate disabled): rows hold NetSAT, no strength")
    flat = constant_warning(np.frombuffer(summary.prediction), "scored", scale=summary.scale)
    if flat:
        echo(f"warning: {flat}")
    surprise = np.frombuffer(summary.surprise)
    shift = scorer.answer_shift(surprise)
    if shift is not None:
        echo(("warning: " if shift.shifted else "") + shift.message())
    elif params.answer_check and scorer.adaptive is not None:
        echo(f"answer check: not run, {int(np.isfinite(surprise).sum())} text(s) had rubric answers read (it needs "
             "two or more)")
    if params.adaptive is not None:
        asked, total = summary.asked, summary.asked + summary.calls_saved
        saved = total - asked
        share = f" ({saved / total:.0%})" if total else ""
        echo(f"adaptive: asked {asked} of {total} (text, rubric) calls, saved {saved}{share}; "
             f"{asked / max(summary.n, 1):.2f} rubrics per text")
    if params.guarantee is not None:
        echo(guarantee_summary(scorer, summary.answered, summary.n, params.guarantee))
    if out_path:
        labels = np.frombuffer(summary.label, dtype=np.int8)
        labelled = int((labels >= 0).sum())
        extra = f"; {int((labels == 1).sum())} of {labelled} labelled positive" if labelled else ""
        echo(f"scored {summary.n} texts{extra}; wrote {out_path}")


def _say_endpoint(scorer) -> None:
    """Which endpoint the texts go to (credentials redacted), where it came from, whether a key goes along."""
    if scorer.endpoint is None:
        return
    where = "artifact.json" if scorer.backend_source == "artifact" else "--backend"
    echo(f"score: backend {scorer.endpoint} (from {where})")
    if scorer.endpoint_note:
        if environment_api_key():  # without a key in the environment there is nothing to withhold: say nothing
            echo(f"note: no API key is sent to an endpoint read from a file; to send yours: --backend {scorer.endpoint}")


def _say_faults(scorer) -> None:
    tally = scorer.faults
    line = fault_summary(tally.to_dict()) if tally is not None else None
    if line:
        echo(f"score: {line}")


def _score_with_calibrator(folder: Path, probes_path: Path, who: Any, aggregate: str, question: str | None,
                           out_path: Path | None) -> None:
    """Calibrated predictions of probed texts from a calibrator folder alone (no rubrics, no LLM)."""
    path = folder / "artifact" if (folder / "artifact").is_dir() else folder
    cal = load_calibrator(path)
    arr, X = calibrator_features(cal, load_probe_table(probes_path), source=str(probes_path))
    out = calibrated_rows(cal, X, who, question=question, aggregate=aggregate)  # an unknown judge: exit 2
    if who == "shared" and "shared" not in cal.judges_:
        echo("note: judge 'shared': the shared weights only")
    flat = constant_warning(list(out["prediction"]), "scored", scale=out["scale"])
    if flat:
        echo(f"warning: {flat}")
    write_rows(({"example_id": ex_id, "question": out["question"], "judge": who,
                  "prediction": float(out["prediction"][i]), "variance": float(out["variance"][i]),
                  "entropy": float(out["entropy"][i]),
                  "proba": {f"{v:g}": float(p) for v, p in zip(out["scale"], out["proba"][i])},
                  "missing_rubrics": [r for r, ok in zip(arr.rubric_ids, arr.ok[i]) if not ok]}
                 for i, ex_id in enumerate(arr.example_ids)), out_path)
    if out_path:
        echo(f"wrote {len(arr.example_ids)} predictions to {out_path}")

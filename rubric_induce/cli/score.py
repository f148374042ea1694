"""``rubric-induce score``: score texts (or existing probes) with a run's induced rubrics; JSONL out
(or CSV / TSV / a JSON array, by ``--out``'s suffix).

One form: ``score ARTIFACT (--input FILE | --probes FILE) [--out FILE]``. ARTIFACT is a run
directory or artifact folder (``artifact.json``), or a folder written by ``rubric-induce
calibrate`` (calibrator only: then ``--probes`` is required).

Scoring texts prints (stderr) the endpoint it sends them to, its URL's credentials redacted. An
endpoint read from ``artifact.json`` gets no API key from the environment (a shared run folder
must not be able to send your key to its host); ``--backend`` naming the endpoint sends it.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from rubric_induce.cli._shared import (
    backend_options_given,
    echo,
    progress_option,
    run_backend_options,
    show_progress,
    split_list,
)
from rubric_induce.cli.selective import guarantee_options, guarantee_summary, selective_entry
from rubric_induce.core.errors import DataError
from rubric_induce.data.mapping import MAPPING_FORMATS

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
            from rubric_induce.core.params import suggest

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
        import tempfile

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
        import os

        try:
            if self.fmt in ("csv", "tsv"):
                import csv

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


class _Tally:
    """What the summary lines after scoring read from a result, kept once its row is written."""

    __slots__ = ("prediction", "answer_surprise", "asked", "calls_saved", "answered", "label", "scale")

    def __init__(self, res) -> None:
        self.prediction, self.answer_surprise, self.label = res.prediction, res.answer_surprise, res.label
        self.scale = res.scale  # the answer scale: a near-constant prediction is judged against its range
        self.asked, self.calls_saved, self.answered = res.asked, res.calls_saved, res.answered


@click.command("score")
@click.argument("artifact", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option("--input", "input_path", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="Texts to score: JSONL/JSON (flat columns or rubric-induce examples), CSV or TSV, read with the "
                   "run's mapping (its text columns and id column).")
@click.option("--probes", "probes_path", type=click.Path(dir_okay=False, exists=True, path_type=Path), default=None,
              help="Score existing probes instead (no LLM call): a probe table JSONL of the texts.")
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
@progress_option
def command(artifact, input_path, probes_path, text_field, maps, id_field, fmt, out_path, backend_spec, cache_path,
            judge, trusted, aggregate, question, adaptive, budget, stop_at, outcomes, answer_check, progress,
            guarantee, delta, measure, cascade, **backend_opts) -> None:
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
    """
    from rubric_induce.scoring.scorer import ARTIFACT_NAME

    artifact = selective_entry(artifact, cascade=cascade, guarantee=guarantee, delta=delta, measure=measure,
                               input_path=input_path, probes_path=probes_path, out_path=out_path,
                               backend_spec=backend_spec, cache_path=cache_path, adaptive=adaptive,
                               mapping=lambda s: input_mapping(s, fmt, id_field, text_field, maps),
                               progress=show_progress(progress), write_rows=write_rows)
    if artifact is None:
        return
    wanted = {"target": guarantee, "delta": delta, "measure": measure} if guarantee is not None else None

    if (input_path is None) == (probes_path is None):
        raise click.UsageError("give exactly one of --input FILE (texts) or --probes FILE (existing probes)")
    if judge is not None and trusted is not None:
        raise click.UsageError("give at most one of --judge and --trusted")
    who: Any = split_list(trusted) if trusted else judge
    if not adaptive and (budget is not None or stop_at is not None or outcomes is not None):
        raise click.UsageError("--budget, --stop-at and --outcomes go with --adaptive")
    is_run = (artifact / ARTIFACT_NAME).exists() if artifact.is_dir() else artifact.name == ARTIFACT_NAME
    if not is_run:
        if probes_path is None:
            raise click.UsageError(f"{artifact} has no {ARTIFACT_NAME}: a calibrator folder scores --probes FILE only")
        if adaptive:
            raise click.UsageError(f"--adaptive scores with a run's rubrics: point at a run directory (with "
                                   f"{ARTIFACT_NAME}), not a calibrator folder")
        _score_with_calibrator(artifact, probes_path, who, aggregate, question, out_path)
        return
    if question is not None:
        raise click.UsageError("--question is for a calibrator folder; a run predicts its own question")
    from rubric_induce.data.probes import ProbeTable
    from rubric_induce.scoring.scorer import RubricScorer

    given = backend_options_given(backend_opts) or None  # checked against the backend's kind in load
    scorer = RubricScorer.load(artifact, backend=backend_spec, cache=cache_path, backend_options=given)
    results: list[_Tally] = []  # the rows go to the file chunk by chunk; the summaries read these
    try:
        if probes_path is not None:
            if adaptive:
                scorer._require_adaptive(aggregate)  # before reading the table
            store = ProbeTable.scan(probes_path, [r.id for r in scorer.rubrics])  # arrays, not records
            chunks = scorer.iter_score_probes(store, sorted(store.example_ids), judge=who, aggregate=aggregate,
                                              adaptive=adaptive, budget=budget, stop_at=stop_at,
                                              outcomes=outcomes or "both", answer_check=answer_check,
                                              guarantee=wanted)
        else:
            if adaptive:
                scorer._require_adaptive(aggregate)  # before reading texts or opening the backend
            try:
                examples = scorer.read(input_path, input_mapping(scorer, fmt, id_field, text_field, maps),
                                       optional_run_id=not id_field)  # new texts often have no id column
            except DataError as exc:
                if scorer.kind != "pairwise":
                    raise
                raise DataError(f"{exc.message}; {PAIRWISE_HINT}", path=exc.path, line=exc.line,
                                field=exc.field) from None
            _say_endpoint(scorer)
            chunks = scorer.iter_score(examples, judge=who, aggregate=aggregate, progress=show_progress(progress),
                                       adaptive=adaptive, budget=budget, stop_at=stop_at,
                                       outcomes=outcomes or "both", answer_check=answer_check, guarantee=wanted)
        writer = RowWriter(out_path)
        try:
            for chunk in chunks:
                for res in chunk:
                    writer.write(res.to_dict())
                    results.append(_Tally(res))
        except BaseException:
            writer.abort()
            raise
        writer.close()
    finally:
        if probes_path is None:  # also when probing failed before the first chunk (every probe failed)
            _say_faults(scorer)
        scorer.close()
    if scorer.kind == "pairwise":
        echo("pairwise run: each row's strength is the response's Bradley-Terry strength, its reward (P(A > B) grows "
             "with strength(A) - strength(B)); for P(A > B) of pairs: rubric-induce compare RUN --pairs FILE"
             if scorer.pairwise_head is not None else
             "pairwise run without a Bradley-Terry head (calibrate disabled): rows hold NetSAT, no strength")
    from rubric_induce.evaluation.heldout import constant_warning

    scale = next((r.scale for r in results if r.scale), None)  # near-constant: relative to the answer scale
    flat = constant_warning([r.prediction for r in results], "scored", scale=scale)
    if flat:
        echo(f"warning: {flat}")
    shift = scorer.answer_shift(results)
    if shift is not None:
        echo(("warning: " if shift.shifted else "") + shift.message())
    elif answer_check and scorer.adaptive is not None:
        read = sum(r.answer_surprise is not None for r in results)
        echo(f"answer check: not run, {read} text(s) had rubric answers read (it needs two or more)")
    if adaptive:
        asked = sum(len(r.asked or []) for r in results)
        total = asked + sum(r.calls_saved or 0 for r in results)
        saved = total - asked
        share = f" ({saved / total:.0%})" if total else ""
        echo(f"adaptive: asked {asked} of {total} (text, rubric) calls, saved {saved}{share}; "
             f"{asked / max(len(results), 1):.2f} rubrics per text")
    if wanted is not None:
        echo(guarantee_summary(scorer, results, wanted))
    if out_path:
        labelled = [r.label for r in results if r.label is not None]
        extra = f"; {sum(labelled)} of {len(labelled)} labelled positive" if labelled else ""
        echo(f"scored {len(results)} texts{extra}; wrote {out_path}")


def _say_endpoint(scorer) -> None:
    """Which endpoint the texts go to (credentials redacted), where it came from, whether a key goes along."""
    if scorer.endpoint is None:
        return
    where = "artifact.json" if scorer.backend_source == "artifact" else "--backend"
    echo(f"score: backend {scorer.endpoint} (from {where})")
    if scorer.endpoint_note:
        from rubric_induce.backends.openai_compat import environment_api_key

        if environment_api_key():  # without a key in the environment there is nothing to withhold: say nothing
            echo(f"note: no API key is sent to an endpoint read from a file; to send yours: --backend {scorer.endpoint}")


def _say_faults(scorer) -> None:
    from rubric_induce.backends.base import fault_summary

    tally = getattr(scorer._backend, "tally", None) if scorer._backend is not None else None
    line = fault_summary(tally.to_dict()) if tally is not None else None
    if line:
        echo(f"score: {line}")


def _score_with_calibrator(folder: Path, probes_path: Path, who: Any, aggregate: str, question: str | None,
                           out_path: Path | None) -> None:
    """Calibrated predictions of probed texts from a calibrator folder alone (no rubrics, no LLM)."""
    from rubric_induce.calibration.api import calibrated_rows, calibrator_features
    from rubric_induce.calibration.artifacts import load_calibrator
    from rubric_induce.data.probes import ProbeTable

    path = folder / "artifact" if (folder / "artifact").is_dir() else folder
    cal = load_calibrator(path)
    arr, X = calibrator_features(cal, ProbeTable.load(probes_path), source=str(probes_path))
    out = calibrated_rows(cal, X, who, question=question, aggregate=aggregate)  # an unknown judge: exit 2
    if who == "shared" and "shared" not in cal.judges_:
        echo("note: judge 'shared': the shared weights only")
    from rubric_induce.evaluation.heldout import constant_warning

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

"""``rubric-induce calibrate``: train the LLM-RUBRIC calibration network, with a cross-validated report."""
from __future__ import annotations

from pathlib import Path

import click

from rubric_induce.calibration.api import CalibrateParams, calibrate
from rubric_induce.calibration.data import from_llm_rubric, from_probes
from rubric_induce.cli._shared import echo, load_examples, mapping_file_option, split_list
from rubric_induce.core.params import click_options
from rubric_induce.data.datasets.llm_rubric import load_llm_rubric
from rubric_induce.data.mapping import load_mapping_file
from rubric_induce.data.probes import ProbeTable

__all__ = ["command"]


@click.command("calibrate")
@click.option("--dataset", type=click.Choice(["llm_rubric"]), default=None,
              help="Known dataset: llm_rubric trains on the synthetic split and tests on the real one.")
@click.option("--probes", "probes_path", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="Probe table JSONL (from `rubric-induce probe`).")
@click.option("--examples", "examples_path", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              default=None, help="Examples with per-judge judgments (or aggregate labels): rubric-induce JSONL, or "
                                 "flat JSONL/JSON/CSV/TSV read through --mapping-file.")
@mapping_file_option
@click_options(CalibrateParams, exclude=("question",))
@click.option("--question", "--main-question", "question", default=None,
              help="Question to fine-tune on and report (default: Q0 with --dataset llm_rubric; required "
                   "with --probes).")
@click.option("--questions", default=None,
              help="Comma-separated output questions for multi-task training (default: all of the dataset's, "
                   "or the main question alone with --probes).")
@click.option("--na-inputs", type=click.Choice(["references", "judgments", "none"]), default="references",
              show_default=True, help="llm_rubric: which LLM answers become all-zero 'not applicable' blocks.")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--threads", type=click.IntRange(min=1), default=None, help="torch threads (default: 1).")
@click.option("--data-root", envvar="RUBRIC_INDUCE_DATA", type=click.Path(file_okay=False, path_type=Path),
              default=None, help="Folder of the shared benchmark data. Env: RUBRIC_INDUCE_DATA.")
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), required=True,
              help="Output folder: the weights (JSON + safetensors), report.md, metrics.json, reliability PNGs.")
def command(dataset, probes_path, examples_path, mapping_file, question, questions, na_inputs, seed, threads, data_root,
            out_dir, **options) -> None:
    """Train the LLM-RUBRIC calibration network and write a cross-validation report.

    \b
    Examples:
      rubric-induce calibrate --dataset llm_rubric --out runs/cal
      rubric-induce calibrate --probes probes.jsonl --examples examples.jsonl --question satisfaction --out runs/cal
    """
    if (dataset is None) == (probes_path is None):
        raise click.UsageError("give either --dataset llm_rubric or --probes FILE --examples FILE")
    qs = split_list(questions)
    if dataset == "llm_rubric":
        question = question or "Q0"
    opts = dict(options.pop("options", None) or {})
    if threads:
        opts["n_threads"] = threads
    params = CalibrateParams.from_kwargs(options, question=question, options=opts)
    if dataset == "llm_rubric":
        train = from_llm_rubric(load_llm_rubric(data_root, split="synthetic"), questions=qs, na_inputs=na_inputs)
        test = from_llm_rubric(load_llm_rubric(data_root, split="real"), questions=qs, na_inputs=na_inputs)
    else:
        if examples_path is None:
            raise click.UsageError("--probes needs --examples (the texts with their judgments)")
        if question is None:
            raise click.UsageError("--probes needs --question naming the label to calibrate")
        scales = {}
        if mapping_file is not None:
            scales = load_mapping_file(mapping_file)[1]
        examples = load_examples(examples_path, None, None, None, mapping_file)
        train = from_probes(ProbeTable.load(probes_path), examples, questions=qs or [question],
                            not_applicable=params.not_applicable, ranges=scales or None)
        test = None
    result = calibrate(train, params, test=test, seed=seed, echo=echo)
    result.save(out_dir)
    metrics = result.metrics
    parts = []
    if "cv" in metrics:
        parts.append(f"CV: Pearson {metrics['cv']['pearson']:.3f}, RMSE {metrics['cv']['rmse']:.3f}")
    if "test" in metrics:
        parts.append(f"test: Pearson {metrics['test']['pearson']:.3f}, RMSE {metrics['test']['rmse']:.3f}")
    click.echo("; ".join(parts + [f"wrote {out_dir}"]))

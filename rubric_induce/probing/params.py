"""The probe stage's settings (:class:`ProbeParams`, the ``[probe]`` section) and its fixed names:
prompt styles, estimators, the ``Rating:`` marker, reply lengths and the probes file."""
from __future__ import annotations

from dataclasses import dataclass

from rubric_induce.core.errors import DataError
from rubric_induce.core.params import Params, param
from rubric_induce.probing.packed import PACKINGS

__all__ = ["PROBE_STYLES", "ESTIMATORS", "RATING_MARKER", "TEMPLATE_FOR_STYLE", "SAMPLE_TOKENS",
           "ANALYSIS_TOP_LOGPROBS", "PROBES_FILE", "ProbeParams"]

PROBE_STYLES = ("score-only", "rate-explain", "analyze-rate")
ESTIMATORS = ("logprobs", "sampling")
RATING_MARKER = "Rating:"
TEMPLATE_FOR_STYLE = {
    "score-only": "probe_score_only",
    "rate-explain": "probe_rate_explain",
    "analyze-rate": "probe_analyze_rate",
}
#: Reply lengths for the sampling estimator: enough to reach the answer, no more.
SAMPLE_TOKENS = {"score-only": 4, "rate-explain": 8}
#: Alternatives asked for per generated token of an analyze-rate analysis (backends that cannot
#: continue an assistant prefix read the answer from these).
ANALYSIS_TOP_LOGPROBS = 20
PROBES_FILE = "probes.jsonl"


@dataclass(frozen=True)
class ProbeParams(Params):
    """How each rubric is asked: the prompt style and how the answer distribution is estimated."""

    section = "probe"
    style: str = param("score-only", choices=PROBE_STYLES, help="Prompt style (Chiang & Lee's Closer Look).")
    estimator: str = param("logprobs", choices=ESTIMATORS,
                           help="Read logprobs, or sample N replies (for backends without logprobs).")
    samples: int = param(10, ge=1, help="Replies per probe for the sampling estimator.")
    temperature: float = param(1.0, ge=0.0, help="Sampling temperature for the sampling estimator.")
    max_analysis_tokens: int = param(200, ge=1, help="Reply length cap before the rating (analyze-rate).",
                                     hidden=True)
    max_example_tokens: int | None = param(None, gt=0, help="Cut each example's text to this many tokens "
                                           "(backend tokenizer), marked '[... truncated]' in the prompt "
                                           "and in the probe record. Default: no limit.")
    packing: str = param("independent", choices=PACKINGS,
                         help="independent: one call per (text, rubric); packed: one call per text (or per "
                              "pack_size rubrics) answering every rubric on its own 'R<n>: <answer>' line, "
                              "each read from the token logprobs at its answer position.")
    pack_size: int | None = param(None, ge=1, help="Rubrics per packed call (packing = \"packed\"); "
                                  "default: all of a text's rubrics in one call.")
    pairwise: bool = param(False, help="Pairwise runs ([data] kind = \"pairwise\"): also ask every rubric, per "
                                       "pair, which response meets it better, in both orders (A shown first, "
                                       "then B shown first), read from the logprobs at the reply's first token; "
                                       "averaging the two orders cancels position bias, and the evaluation "
                                       "reports position consistency. Two more calls per (pair, rubric).",
                     hidden=True)  # a run's option: the probe command reads single texts
    pairwise_ties: bool = param(False, help="Let the pairwise probe answer \"tie\" besides \"A\" and \"B\" "
                                            "(probe.pairwise).", hidden=True)

    def check(self) -> None:
        if self.packing == "packed" and self.estimator != "logprobs":
            raise DataError("packed probing reads each answer from the reply's token logprobs; use "
                            "packing = \"independent\" with the sampling estimator", field=self.where("packing"))
        if self.pairwise and self.packing == "packed":
            raise DataError("the pairwise probe asks one rubric per call; use packing = \"independent\" with "
                            "probe.pairwise", field=self.where("pairwise"))
        if self.pairwise_ties and not self.pairwise:
            raise DataError("pairwise_ties applies to the pairwise probe; set probe.pairwise = true too",
                            field=self.where("pairwise_ties"))
        if self.packing == "packed" and self.style != "score-only":
            raise DataError(f"packed probing has its own prompt (one answer line per rubric); style "
                            f"{self.style!r} needs packing = \"independent\"", field=self.where("packing"))

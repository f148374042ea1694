"""Each generator's settings, declared once: :class:`RubiconParams` (RUBICON and SPUR) and
:class:`AutoCalibrateParams`. The step functions (:mod:`.patterns`, :mod:`.criteria`) take their
option defaults from here, so a default is written in one place."""
from __future__ import annotations

from dataclasses import dataclass

from rubric_induce.core.errors import DataError
from rubric_induce.core.params import Params, param

__all__ = ["RubiconParams", "AutoCalibrateParams", "RUBICON_DEFAULTS", "AUTOCALIBRATE_DEFAULTS"]


@dataclass(frozen=True)
class RubiconParams(Params):
    """Options of RUBICON (growing SAT/DSAT pool) and SPUR (fixed-size set)."""

    section = "generate.options"
    top_k: int = param(3, ge=1, help="Patterns extracted per example.")
    batch_size: int = param(8, ge=1, help="Patterns per summarization call.")
    max_new: int = param(5, ge=1, help="New rubrics asked for per batch (rubicon).")
    max_shown: int | None = param(60, ge=1, help="Existing rubrics shown per summarization call (rubicon).",
                                  hidden=True)
    spur_size: int = param(10, ge=1, help="Rubrics per polarity in the SPUR set.")
    use_ds: bool | None = param(None, cli="--ds/--no-ds",
                                help="Domain sensitization block (default: on for rubicon, off for spur; "
                                     "needs generate.domain or a task description).")
    use_cdp: bool | None = param(None, cli="--cdp/--no-cdp",
                                 help="Conversation design principles block (default: on for rubicon on "
                                      "conversations, off otherwise and for spur).")
    temperature: float = param(0.0, ge=0.0, help="Generation temperature.")
    max_example_chars: int | None = param(6000, ge=100, help="Truncate each shown example to N characters.")
    retries: int = param(2, ge=0, help="Retries of an unparseable reply.", hidden=True)

    def switched(self, mode: str, conversation: bool) -> RubiconParams:
        """A copy with ``use_ds`` / ``use_cdp`` decided: an unset switch takes the mode's default
        (DS on for rubicon; CDP on for rubicon on conversations; both off for spur)."""
        on = mode == "rubicon"
        return self.with_overrides(use_ds=on if self.use_ds is None else self.use_ds,
                                   use_cdp=(on and conversation) if self.use_cdp is None else self.use_cdp)


@dataclass(frozen=True)
class AutoCalibrateParams(Params):
    """Options of AutoCalibrate (draft, revisit and refine criteria for one Likert aspect)."""

    section = "generate.options"
    aspect: str | None = param(None, help="The aspect to write criteria for (default: the label).")
    task: str | None = param(None, help="A task sentence of its own for the drafting prompts (default: worded "
                                        "from the run's task, [task] / --task-description).")
    scale: tuple[int, int] = param((1, 5), help="The human score range LOW,HIGH.")
    sample_sizes: tuple[int, ...] = param((4, 6, 8, 10, 12), ge=1, help="In-context sample sizes for drafting.")
    trials: int = param(4, ge=1, help="Monte-Carlo trials per sample size.")
    samples: int = param(3, ge=1, cli="--draft-samples", help="Temperature samples per drafting prompt.")
    top_k: int = param(5, ge=1, cli="--keep", help="Criteria kept after each revisit (top-K).")
    metric: str = param("spearman", choices=("spearman", "pearson", "kendall"),
                        help="Correlation used to rank criteria.")
    refine_sizes: tuple[int, ...] = param((1, 2, 4), ge=1, help="Misaligned-example sample sizes for refinement.")
    refine_trials: int = param(4, ge=1, help="Refinement trials per sample size.")
    refine_samples: int = param(2, ge=1, help="Temperature samples per refinement prompt.")
    rounds: int = param(1, ge=0, help="Refine-and-filter rounds.")
    draft_temperature: float = param(1.0, ge=0.0, help="Drafting temperature.")
    refine_temperature: float = param(1.0, ge=0.0, help="Refinement temperature.")
    levels: int = param(0, choices=(0, 4, 5), help="Expand the final criteria into 4 or 5 level descriptors (0 = no).")
    max_examples: int | None = param(None, ge=3, help="Budget: a seeded sample of N labelled examples.")
    max_example_chars: int | None = param(1500, ge=100, help="Truncate each shown example to N characters.")
    retries: int = param(2, ge=0, help="Retries of an unparseable reply.", hidden=True)

    def check(self) -> None:
        if self.scale[1] <= self.scale[0]:
            raise DataError(f"need LOW < HIGH, got {list(self.scale)}", field=self.where("scale"))


#: The defaults, as values the step options read (``PatternOptions.top_k = RUBICON_DEFAULTS.top_k`` ...).
RUBICON_DEFAULTS = RubiconParams()
AUTOCALIBRATE_DEFAULTS = AutoCalibrateParams()

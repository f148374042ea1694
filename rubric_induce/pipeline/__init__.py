"""``rubric-induce run``: one config file chains generate -> dedup -> probe -> select -> calibrate -> evaluate.

Every stage writes into one run directory and leaves a marker; a rerun resumes after the last
finished stage, and the SQLite call cache replays the LLM calls an interrupted stage had made.
"""
from rubric_induce.pipeline.config import RunConfig, config_from_dict, load_config
from rubric_induce.pipeline.runner import RunResult, run_dir_for, run_pipeline
from rubric_induce.pipeline.stages import STAGE_NAMES

__all__ = ["RunConfig", "load_config", "config_from_dict", "run_pipeline", "RunResult", "run_dir_for",
           "STAGE_NAMES"]

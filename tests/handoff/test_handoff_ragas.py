"""Prometheus / ragas hand-off: the exported rubric dictionaries loaded by ``ragas.metrics``.

ragas cannot share a virtual environment with the rest of the stack: its dependency ``instructor``
caps ``jiter`` below what openai >= 3.57 needs, so installing it downgrades openai by a major
version (and its ``datasets`` dependency pins huggingface-hub < 2). scripts/setup.sh therefore puts
ragas in its own environment, ``.venv-ragas`` (``RUBRIC_INDUCE_RAGAS_PYTHON`` names another), and
this test runs ragas there, with this checkout on ``PYTHONPATH`` (rubric-induce's base install needs
only numpy, scipy, click and tqdm, which ragas brings). Where ragas imports in the test's own
interpreter, that one is used.
"""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from handoff_helpers import GOOD

pytestmark = pytest.mark.tools
REPO = Path(__file__).resolve().parents[2]

SCRIPT = r'''
import json, sys, warnings
from rubric_induce.handoff import prometheus_rubrics, ragas_metrics
run, out = sys.argv[1], sys.argv[2]
import ragas
from ragas.metrics import RubricsScore  # the import path the issue names (deprecated in ragas 0.4, still there)
metrics = ragas_metrics(run)
entries = prometheus_rubrics(run)
report = {"version": ragas.__version__, "metrics": []}
for m, e in zip(metrics, entries):
    assert isinstance(m, RubricsScore), type(m)
    report["metrics"].append({"name": m.name, "rubrics": m.rubrics,
                              "instruction": m.single_turn_scoring_prompt.instruction})

# Score one sample offline: a ragas LLM that answers the scoring prompt with score 5 when the
# response is the good text, 1 otherwise (ragas parses and validates the reply itself).
import asyncio
from langchain_core.outputs import Generation, LLMResult
from ragas.dataset_schema import SingleTurnSample
from ragas.llms.base import BaseRagasLLM

class Judge(BaseRagasLLM):
    def _reply(self, prompt):
        text = prompt.to_string() if hasattr(prompt, "to_string") else str(prompt)
        good = "Booked for 7 pm" in text.split("Now perform the same with the following input")[-1]
        return LLMResult(generations=[[Generation(text=json.dumps({"feedback": "ok", "score": 5 if good else 1}))]])
    def generate_text(self, prompt, n=1, temperature=0.01, stop=None, callbacks=None):
        return self._reply(prompt)
    async def agenerate_text(self, prompt, n=1, temperature=0.01, stop=None, callbacks=None):
        return self._reply(prompt)
    def is_finished(self, response):
        return True

judged = ragas_metrics(run, llm=Judge())[0]
scores = [asyncio.run(judged.single_turn_ascore(SingleTurnSample(user_input="Book a table", response=r)))
          for r in (sys.argv[3], "Sorry, I cannot help with that.")]
report["scores"] = scores
json.dump(report, open(out, "w"))
'''


def _ragas_python(unavailable) -> str:
    if importlib.util.find_spec("ragas") is not None:
        return sys.executable
    env = os.environ.get("RUBRIC_INDUCE_RAGAS_PYTHON")
    candidate = Path(env) if env else REPO / ".venv-ragas" / "bin" / "python"
    if not candidate.exists():
        unavailable("ragas is not installed here nor in .venv-ragas (scripts/setup.sh makes it; "
                          "RUBRIC_INDUCE_RAGAS_PYTHON names another interpreter)")
    return str(candidate)


def test_ragas_loads_and_scores_the_exported_rubrics(handoff_run, handoff_rubrics, tmp_path, unavailable):
    python = _ragas_python(unavailable)
    out = tmp_path / "report.json"
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAGAS_DO_NOT_TRACK": "true", "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([python, "-c", SCRIPT, str(handoff_run), str(out), GOOD], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text(encoding="utf-8"))
    assert [m["name"] for m in report["metrics"]] == [r.id for r in handoff_rubrics]
    for m, _r in zip(report["metrics"], handoff_rubrics):
        assert list(m["rubrics"]) == ["criteria", *(f"score{k}_description" for k in range(1, 6))]
        for value in m["rubrics"].values():
            assert value in m["instruction"]  # ragas put every descriptor into its scoring prompt
    assert report["scores"] == [5, 1]

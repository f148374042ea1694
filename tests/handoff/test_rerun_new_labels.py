"""After a labelling round, a rerun with the new labels probes only the (text, rubric) pairs it has
not probed before: every earlier probe comes back from the run's call cache (fake backend, calls
counted)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from rubric_induce.backends.fake import FakeBackend
from rubric_induce.pipeline import load_config, run_pipeline

RES = Path(__file__).resolve().parents[2] / "rubric_induce" / "resources"


def _config(fake_run_config: str, examples: Path) -> str:
    """The shared fake-run config (tests/conftest.py) over ``examples``, every row read (no limit), without
    the direct judge's question (asked in the probe stage of held-out texts; this test counts rubric probes)."""
    demo = f'examples = "{RES / "demo_uss_dialogues.jsonl"}"'
    assert demo in fake_run_config and "limit = 24\n" in fake_run_config
    return (fake_run_config.replace(demo, f'examples = "{examples}"').replace("limit = 24\n", "")
            + "\n[evaluate]\ndirect_baseline = false\n")


def _pairs(run: Path) -> set[tuple[str, str]]:
    with (run / "probes.jsonl").open() as fh:
        return {(r["example_id"], r["rubric_id"]) for r in map(json.loads, fh)}


@pytest.mark.slow
def test_rerun_with_new_labels_probes_only_new_pairs(tmp_path, fake_run_config) -> None:
    lines = (RES / "demo_uss_dialogues.jsonl").read_text().splitlines()
    data = tmp_path / "labelled.jsonl"
    data.write_text("\n".join(lines[:24]) + "\n")
    cfg_path = tmp_path / "cfg.toml"
    cfg_path.write_text(_config(fake_run_config, data))
    run = tmp_path / "run"
    first = FakeBackend()
    run_pipeline(load_config(cfg_path), out=run, backend=first, echo=lambda m: None, stop_after="probe")
    before = _pairs(run)
    first_calls = sum(1 for c in first.calls if c[0] == "answer_logprobs")
    assert first_calls == len(before)

    data.write_text("\n".join(lines[:32]) + "\n")  # eight texts came back labelled
    second = FakeBackend()
    run_pipeline(load_config(cfg_path), out=run, backend=second, echo=lambda m: None, stop_after="probe")
    after = _pairs(run)
    calls = sum(1 for c in second.calls if c[0] == "answer_logprobs")
    new = after - before
    assert {e for e, _ in after} > {e for e, _ in before}  # the new texts were probed
    assert new and calls == len(new)  # one call per pair not probed before, none for the old ones
    usage = json.loads((run / "stages" / "probe.json").read_text())
    assert usage["usage"]["cache_hits"] + usage["summary"]["reused"] == len(after & before)

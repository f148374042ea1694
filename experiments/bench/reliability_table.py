"""The reliability table of BENCHMARKS.md: every case of the reliability suite, tried and held.

One command: ``python experiments/bench/reliability_table.py [--out DIR] [-- PYTEST ARGS]``. It runs
``pytest tests/reliability -m ""`` (every tier: the embedded-model kill -9 test included) with a
JUnit XML report, and prints, per area (one test file), how many cases were tried, how many held
(passed), failed or were skipped, with the command that reruns that area. A parametrised test
counts one case per parameter set; a hypothesis test counts once (its examples are in the test).
Exit status 1 when a case failed.
"""
from __future__ import annotations

import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [p for p in (str(ROOT), str(ROOT / "experiments")) if p not in sys.path]  # no PYTHONPATH

from _harness import begin, parser

SUITE = "tests/reliability"

#: What each file of the suite checks (shown in the table; a file missing here shows its name).
AREAS = {
    "test_secrets.py": "API keys and secrets in URLs (artifact endpoints, redaction)",
    "test_run_folder.py": "run folder: lock, concurrent runs, clobbering, ~ and cache paths",
    "test_resume.py": "resume after damage: output hashes, truncation, kill -9, non-finite weights",
    "test_bad_input.py": "bad config and input files: checked before any LLM call, file/line/field",
    "test_fuzz.py": "property-based fuzz (hypothesis) of the loaders and the config reader",
    "test_prompt_cache.py": "provider prompt caching on the wire: cached tokens read and priced, one routing key per text",
    "test_pairs_run_input.py": "bad pair input through `run` / `run --check`: exit 2 naming file, record and field",
    "test_pairs_fuzz.py": "property-based fuzz (hypothesis) of the pair readers (LLMBar, chosen/rejected, HH)",
    "test_compare_input.py": "bad pairs and a damaged Bradley-Terry head through `compare`: exit 2 naming file, line and field",
    "test_faults.py": "fault injection on a loopback OpenAI-shaped server: retries, waits, counts",
    "test_scoring_linear.py": "scoring and evaluation linear in the number of examples",
    "test_hostile_folder.py": "received run folders: marker/artifact/batch paths stay inside, no write through links",
    "test_key_echo.py": "a server echoing the API key: redacted from run folders, batch results and output",
    "test_batch_inputs.py": "batch-run, ingest, plan prices, cache merge: bad input is exit 2, no hang, no partial store",
    "test_batch_fuzz.py": "property-based fuzz (hypothesis) of ingest, plan prices, batch-run and cache merge inputs",
    "test_export_injection.py": "exports: no code injection, exact round trips, escaped templates, extra_body",
    "test_markdown_escape.py": "report / evaluation / feedback Markdown: HTML, links, table pipes and newlines escaped",
    "test_view_damaged.py": "`view` on damaged or hostile run folders: notes or exit 2, nothing read from outside",
    "test_damaged_artifacts.py": "damaged scorer artifacts and score inputs: file/field errors, fuzz, no traceback",
    "test_config_types.py": "numbers and booleans quoted as strings in a config name their field",
    "test_json_input.py": "lone surrogates, 5,000-digit integers, YAML alias bombs: exit 2 naming file, line, field",
    "test_guarantee_input.py": "guarantees of human agreement read back from damaged artifacts; odd calibration data",
    "test_packed_replies.py": "hostile probe replies (packed and independent): failed records, nothing cached, ingest lists them",
}


def run_suite(xml_path: Path, extra: list[str]) -> tuple[int, float]:
    cmd = [sys.executable, "-m", "pytest", SUITE, "-m", "", "-q", "-p", "no:cacheprovider",
           f"--junitxml={xml_path}", *extra]
    t0 = time.perf_counter()
    rc = subprocess.call(cmd, cwd=ROOT)
    return rc, time.perf_counter() - t0


def tally(xml_path: Path) -> dict[str, dict[str, int]]:
    """Per test file: tried / held / failed / skipped, from the JUnit XML."""
    counts: dict[str, dict[str, int]] = defaultdict(lambda: {"tried": 0, "held": 0, "failed": 0, "skipped": 0})
    for case in ET.parse(xml_path).getroot().iter("testcase"):
        module = case.get("classname", "").split(".")
        # classname is "tests.reliability.test_x" or "tests.reliability.test_x.TestClass"
        name = next((m for m in module if m.startswith("test_")), module[-1]) + ".py"
        row = counts[name]
        if case.find("skipped") is not None:
            row["skipped"] += 1
            continue
        row["tried"] += 1
        if case.find("failure") is not None or case.find("error") is not None:
            row["failed"] += 1
        else:
            row["held"] += 1
    return dict(counts)


def main(argv: list[str] | None = None) -> int:
    ap = parser("reliability_table", __doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "reliability_table")
    ap.add_argument("pytest_args", nargs="*", help="extra pytest arguments (after --)")
    exp, args = begin(ap, argv)
    args.out.mkdir(parents=True, exist_ok=True)
    xml_path = args.out / "junit.xml"
    rc, seconds = run_suite(xml_path, args.pytest_args)
    if not xml_path.exists():
        print(f"pytest wrote no report (exit {rc})", file=sys.stderr)
        return exp.close(exit_code=1)
    counts = tally(xml_path)
    lines = ["| area | cases tried | held | failed | skipped | command |", "|---|---:|---:|---:|---:|---|"]
    total = {"tried": 0, "held": 0, "failed": 0, "skipped": 0}
    for name in sorted(counts, key=lambda n: (list(AREAS).index(n) if n in AREAS else len(AREAS), n)):
        row = counts[name]
        for k in total:
            total[k] += row[k]
        lines.append(f"| {AREAS.get(name, name)} | {row['tried']} | {row['held']} | {row['failed']} | "
                     f"{row['skipped']} | `pytest {SUITE}/{name} -m \"\"` |")
    lines.append(f"| **all** | **{total['tried']}** | **{total['held']}** | **{total['failed']}** | "
                 f"**{total['skipped']}** | `python experiments/bench/reliability_table.py` |")
    table = "\n".join(lines)
    print(table)
    print(f"\n{seconds:.0f} s; pytest exit status {rc}")
    (args.out / "table.md").write_text(table + "\n", encoding="utf-8")
    return exp.close(exit_code=0 if total["failed"] == 0 and rc in (0, 5) else 1)


if __name__ == "__main__":
    sys.exit(main())

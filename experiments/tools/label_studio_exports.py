"""Real Label Studio exports of rubric-induce's hand-off, for the reader's tests (not run by the suite).

Two steps, two Python environments (the Label Studio server pins numpy below what rubric-induce needs):

``handoff`` (rubric-induce's environment) writes the two hand-offs the server gets: ``OUT/run/``,
``rubric-induce suggest RUN --label-studio`` on a calibrated run, and ``OUT/hostile/``, a config from
:func:`~rubric_induce.handoff.label_studio.labelling_config` with two text fields and hostile
rubric strings (markup, ``$field`` references, control characters) and two tasks::

    .venv/bin/python experiments/tools/label_studio_exports.py handoff --run RUN --pool POOL --out HANDOFF

``annotate`` (any Python 3.10+, standard library only) talks to a running Label Studio server
through its REST API as two users: per hand-off folder it creates a project with the folder's
``config.xml``, imports ``tasks.json``, annotates by :data:`PLAN` (``POST /api/tasks/{id}/annotations/``,
what the editor's Submit and Skip buttons call), adds one model prediction, then downloads every
export format the server offers for the project (``GET /api/projects/{id}/export?exportType=...``,
what the Export dialog calls) among JSON, JSON_MIN, CSV and TSV, each once with only the finished
tasks (the dialog's default) and once with every task (``download_all_tasks=true``). The files are written verbatim, with ``plan.json`` (what each user
did to which text)::

    python experiments/tools/label_studio_exports.py annotate --url http://127.0.0.1:8089 \\
        --token-a TOKEN_A --token-b TOKEN_B --handoff HANDOFF --out tests/handoff/label_studio_exports

The server setup this was run with is in ``tests/handoff/label_studio_exports/README.md``.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

#: Per task index: what annotator "a" and "b" do. A value is an index into the config's scale;
#: ``skip`` is the Skip button (``was_cancelled``), ``empty`` a submission with an empty result,
#: ``comment`` a reason without a choice; (value, reason) adds a reason. Tasks past the plan are
#: left alone; the prediction goes on task :data:`PREDICTED`.
PLAN: dict[str, list[dict[str, Any]]] = {
    "run": [
        {"a": 0, "b": 0},
        {"a": (2, "clear success: booked and confirmed"), "b": (1, 'too long, "but" fine;\nsecond line \u2713')},
        {"a": 1},
        {"a": "skip", "b": 2},
        {},
        {"b": 2},
        {"a": "empty"},
        {"a": ("comment", "not sure which")},
        {"a": "skip"},
        {},
    ],
    "hostile": [
        {"a": (1, "a $reason with <markup> & \"quotes\"")},
        {"b": 0, "a": 1},
    ],
}
PREDICTED = 4
#: The export formats kept (the ones that carry the annotations; Label Studio 1.23.2 also offers
#: DOCLANG for these tasks, a document-layout zip, which came back as an empty 22-byte zip).
READ = ("JSON", "JSON_MIN", "CSV", "TSV")

_HOSTILE_RUBRICS = [
    'Says "</Header><Choices name="x"/>" & <script>alert(1)</script>',
    "Uses $prompt and ${data} literally",
    "control\x00chars\x1b[31m gone; newline\nkept",
]


def handoff(run: Path, pool: Path, out: Path) -> None:
    """The two hand-off folders (rubric-induce's environment)."""
    import subprocess

    from rubric_induce.handoff.label_studio import write_handoff

    out.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "rubric_induce.cli", "suggest", str(run), "--input", str(pool), "-n", "5",
                    "--for", "estimate,calibration", "--embedder", "hash", "--out", str(out / "run.csv"),
                    "--label-studio", str(out / "run")], check=True)
    rows = [{"id": "h1", "prompt": "Book a table for $2 at <Luigi's>?", "response": 'Done: "Luigi\'s" & co, 7pm.',
             "purpose": "calibration"},
            {"id": "h2", "prompt": "Cancel it.", "response": "Cancelled \u2713 (ref #42)", "purpose": "calibration"}]
    write_handoff(out / "hostile", rows, [0, 1], fields=["prompt", "response"], question="Was the user <satisfied>?",
                  rubrics=_HOSTILE_RUBRICS, scale_names=["no", "yes"])


class Client:
    """The server's REST API as one user (legacy API token)."""

    def __init__(self, url: str, token: str) -> None:
        self.url, self.token = url.rstrip("/"), token

    def call(self, method: str, path: str, body: Any = None) -> tuple[bytes, dict[str, str]]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Authorization": f"Token {self.token}",
                                              "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=120) as resp:
                return resp.read(), dict(resp.headers)
        except urllib.error.HTTPError as exc:
            raise SystemExit(f"{method} {path}: HTTP {exc.code}: {exc.read().decode(errors='replace')[:2000]}") from None

    def json(self, method: str, path: str, body: Any = None) -> Any:
        raw, _ = self.call(method, path, body)
        return json.loads(raw) if raw else None


def _result(config: ET.Element, action: Any) -> tuple[list[dict[str, Any]], bool, str | None]:
    """The annotation's result items, whether it was skipped, and its reason, for one PLAN action."""
    choices = config.find(".//Choices")
    scale = [c.get("value") for c in choices.findall("Choice")]
    to_name = choices.get("toName")
    value, reason = action if isinstance(action, tuple) else (action, None)
    if value == "skip":
        return [], True, None
    items = []
    if isinstance(value, int):
        items.append({"id": f"c{value}", "from_name": choices.get("name"), "to_name": to_name, "type": "choices",
                      "origin": "manual", "value": {"choices": [scale[value]]}})
    if reason is not None:
        area = config.find(".//TextArea")
        items.append({"id": "r1", "from_name": area.get("name"), "to_name": area.get("toName"), "type": "textarea",
                      "origin": "manual", "value": {"text": [reason]}})
    return items, False, reason


def annotate(users: dict[str, Client], name: str, folder: Path, out: Path) -> dict[str, Any]:
    """One project: create, import, annotate by PLAN[name], predict, export every format."""
    admin = users["a"]
    config_text = (folder / "config.xml").read_text(encoding="utf-8")
    config = ET.fromstring(config_text)
    project = admin.json("POST", "/api/projects/", {"title": f"rubric-induce {name}", "label_config": config_text})
    pid = project["id"]
    tasks = json.loads((folder / "tasks.json").read_text(encoding="utf-8"))
    admin.json("POST", f"/api/projects/{pid}/import", tasks)
    listed = admin.json("GET", f"/api/tasks/?project={pid}&page_size=1000")
    listed = sorted(listed["tasks"] if isinstance(listed, dict) else listed, key=lambda t: t["id"])
    who = {k: c.json("GET", "/api/current-user/whoami") for k, c in users.items()}
    done: list[dict[str, Any]] = []
    for index, step in enumerate(PLAN[name]):
        task = listed[index]
        for user, action in step.items():
            result, cancelled, reason = _result(config, action)
            ann = users[user].json("POST", f"/api/tasks/{task['id']}/annotations/",
                                   {"result": result, "was_cancelled": cancelled, "lead_time": 12.5})
            choice = next((r["value"]["choices"][0] for r in result if r["type"] == "choices"), None)
            done.append({"task": index, "rubric_induce_id": task["data"]["rubric_induce_id"], "user": user,
                         "user_id": who[user]["id"], "email": who[user]["email"], "annotation_id": ann["id"],
                         "was_cancelled": cancelled, "choice": choice, "reason": reason})
    if name == "run":
        task = listed[PREDICTED]
        items, _, _ = _result(config, 0)
        admin.json("POST", "/api/predictions/", {"task": task["id"], "result": items, "score": 0.9,
                                                 "model_version": "fixture-model"})
    files = _export(admin, pid, out / name)
    return {"project": pid, "annotations": done, "predicted_task": PREDICTED if name == "run" else None,
            "files": files}


def _export(client: Client, pid: int, out: Path) -> list[str]:
    """Every offered export format we read, finished tasks only (the dialog's default) and every task."""
    out.mkdir(parents=True, exist_ok=True)
    formats = client.json("GET", f"/api/projects/{pid}/export/formats")
    names = [f["name"] for f in formats if not f.get("disabled") and f["name"] in READ]
    written = [f"not kept: {f['name']} (offered; not a labels format)" for f in formats
               if not f.get("disabled") and f["name"] not in READ]
    for fmt, everything in [(f, e) for f in names for e in (False, True)]:
        query = f"exportType={fmt}" + ("&download_all_tasks=true" if everything else "")
        raw, headers = client.call("GET", f"/api/projects/{pid}/export?{query}")
        served = re.search(r'filename="?([^";]+)', headers.get("Content-Disposition", ""))
        suffix = Path(served.group(1)).suffix if served else ".out"
        path = out / f"{fmt.lower()}{'-all-tasks' if everything else ''}{suffix}"
        path.write_bytes(raw)
        written.append(f"{path.name} (served as {served.group(1) if served else '?'})")
    (out / "formats.json").write_text(json.dumps(formats, indent=1) + "\n", encoding="utf-8")
    return written


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="step", required=True)
    h = sub.add_parser("handoff")
    h.add_argument("--run", type=Path, required=True)
    h.add_argument("--pool", type=Path, required=True)
    h.add_argument("--out", type=Path, required=True)
    a = sub.add_parser("annotate")
    a.add_argument("--url", default="http://127.0.0.1:8089")
    a.add_argument("--token-a", required=True)
    a.add_argument("--token-b", required=True)
    a.add_argument("--handoff", type=Path, required=True)
    a.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    if args.step == "handoff":
        handoff(args.run, args.pool, args.out)
        return
    users = {"a": Client(args.url, args.token_a), "b": Client(args.url, args.token_b)}
    version = users["a"].json("GET", "/api/version")
    plan = {"label_studio": version.get("release"), "projects": {}}
    for name in PLAN:
        plan["projects"][name] = annotate(users, name, args.handoff / name, args.out)
        for f in ("tasks.json", "config.xml"):
            (args.out / name / f"imported-{f}").write_bytes((args.handoff / name / f).read_bytes())
    (args.out / "plan.json").write_text(json.dumps(plan, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

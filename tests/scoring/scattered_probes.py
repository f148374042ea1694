"""A large probe table made from a fake run's probes, for the streaming tests of ``score --probes``
(JSONL and Parquet). Imported as ``from scattered_probes import scattered_probes`` (pytest puts this
folder on ``sys.path``)."""
from __future__ import annotations

import json
import random
from pathlib import Path

from rubric_induce.data.probes import ProbeTable


def scattered_probes(fake_run: Path, path: Path, n: int, *, seed: int = 0, fail_rate: float = 0.002,
                     random_ids: bool = False, rubrics: set[str] | None = None) -> list[str]:
    """A probe table of ``n`` texts at ``path``: the run's probes repeated under new ids, every line in a
    shuffled order (a text's probes scattered over the file), a share ``fail_rate`` of them failed;
    ``random_ids``: ids whose order is not the texts' order; ``rubrics``: only these rubrics' probes
    (default: every rubric of the run's pool). Returns the ids."""
    by_text: dict[str, list] = {}
    for rec in ProbeTable.load(fake_run / "probes.jsonl").records:
        if rubrics is None or rec.rubric_id in rubrics:
            by_text.setdefault(rec.example_id, []).append(rec.to_dict())
    base = list(by_text.values())
    rng = random.Random(seed)
    ids, lines = [], []
    for i in range(n):
        ex_id = f"t{rng.randrange(10**6):06d}-{i}" if random_ids else f"t{i:06d}"
        ids.append(ex_id)
        for row in base[i % len(base)]:
            row = {**row, "example_id": ex_id}
            if rng.random() < fail_rate:
                row = {**row, "error": "synthetic failure", "raw": [0.0] * len(row["raw"])}
            lines.append(json.dumps(row) + "\n")
    rng.shuffle(lines)
    path.write_text("".join(lines), encoding="utf-8")
    return ids

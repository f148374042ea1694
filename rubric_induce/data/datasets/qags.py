"""QAGS factual-consistency annotations (Wang et al. 2020), CNN/DM (235) and XSum (239).

Reads ``qags/mturk_<subset>.jsonl``: one summary per line, ``{article, summary_sentences:
[{sentence, responses: [{worker_id, response: "yes"|"no"}] x 3}]}``.

Label ``consistency`` (continuous 0-1) = the proportion of summary sentences that a majority of
their workers judged consistent (``yes``). This is exactly the aggregated score in UniEval's
``unieval_qags_<subset>.json`` (checked: 235/235 and 239/239 equal, same order), which the
papers correlate against; XSum summaries are one sentence, so there it is 0 or 1.

Judgments: worker ids differ from sentence to sentence, so each worker's judgment is the
proportion of *their* judged sentences of this summary that they marked ``yes`` (for XSum, their
single yes=1/no=0). ``meta["sentence_votes"]`` keeps ``[yes, total]`` per sentence.
"""
from __future__ import annotations

import os

from rubric_induce.core.errors import DataError
from rubric_induce.data.datasets._common import check_scale, dataset_file, get_field, get_text
from rubric_induce.data.jsonl import read_jsonl
from rubric_induce.data.model import Example, Judgment, LabelScale, content_id

__all__ = ["load_qags", "QAGS_SCALES"]

QAGS_SCALES = {"consistency": LabelScale("continuous", 0, 1)}
SUBSETS = ("cnndm", "xsum")


def load_qags(root: str | os.PathLike[str] | None = None, subset: str = "cnndm") -> list[Example]:
    """Load QAGS ``subset`` (``"cnndm"`` or ``"xsum"``).

    ``fields``: ``source`` (article) and ``text`` (the summary sentences joined by spaces).
    ``labels``: ``consistency`` as described in the module docstring. Ids are
    ``qags-<subset>/<i>`` with ``i`` the 0-based line index (UniEval's ``doc_id``); the group is
    a hash of the article text.
    """
    if subset not in SUBSETS:
        raise DataError(f"unknown QAGS subset {subset!r}; choose from {SUBSETS}", field="subset")
    path = dataset_file(root, "qags", f"mturk_{subset}.jsonl")
    out: list[Example] = []
    for index, (line_no, row) in enumerate(read_jsonl(path)):
        article = get_text(row, "article", path=path, line=line_no)
        sentences = get_field(row, "summary_sentences", path=path, line=line_no)
        if not isinstance(sentences, list) or not sentences:
            raise DataError("expected a non-empty list", path=path, line=line_no,
                            field="summary_sentences")
        texts: list[str] = []
        votes: list[list[int]] = []
        per_worker: dict[str, list[int]] = {}
        for si, sent in enumerate(sentences):
            base = f"summary_sentences[{si}]"
            texts.append(get_text(sent, "sentence", path=path, line=line_no,
                                  field=f"{base}.sentence").strip())
            responses = get_field(sent, "responses", path=path, line=line_no, field=f"{base}.responses")
            if not isinstance(responses, list) or not responses:
                raise DataError("expected a non-empty list", path=path, line=line_no,
                                field=f"{base}.responses")
            yes = 0
            for ri, resp in enumerate(responses):
                f = f"{base}.responses[{ri}]"
                answer = get_field(resp, "response", path=path, line=line_no, field=f"{f}.response")
                if not isinstance(answer, str) or answer.strip().lower() not in ("yes", "no"):
                    raise DataError(f"expected 'yes' or 'no', got {answer!r}", path=path,
                                    line=line_no, field=f"{f}.response")
                is_yes = int(answer.strip().lower() == "yes")
                yes += is_yes
                worker = str(get_field(resp, "worker_id", path=path, line=line_no,
                                       field=f"{f}.worker_id"))
                per_worker.setdefault(worker, []).append(is_yes)
            votes.append([yes, len(responses)])
        majority = [1.0 if 2 * y > n else 0.0 for y, n in votes]
        labels = {"consistency": sum(majority) / len(majority)}
        check_scale(labels, QAGS_SCALES, path=path, line=line_no)
        judgments = [Judgment(judge=f"worker{w}", labels={"consistency": sum(v) / len(v)})
                     for w, v in per_worker.items()]
        out.append(Example.create(
            {"source": article, "text": " ".join(texts)}, labels,
            id=f"qags-{subset}/{index}", judgments=judgments,
            group=content_id({"article": article}, "art-"),
            meta={"dataset": f"qags-{subset}", "n_sentences": len(texts), "sentence_votes": votes},
        ))
    if not out:
        raise DataError("no rows in file", path=path)
    return out

"""Save and load a fitted :class:`Calibrator` without pickle.

A directory holds ``calibrator.json`` (parameters, judge vocabulary, question names and answer
scales, input names and shape, library versions) and the weights of every ensemble member in
``weights.safetensors`` (or ``weights.npz`` when safetensors is not installed), keyed
``"{member}.{parameter}"``. Loading rebuilds the networks and checks every tensor's shape.
"""
from __future__ import annotations

import json
import math
import platform
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.calibration._torch import require_torch
from rubric_induce.calibration.calibrator import Calibrator, check_fitted
from rubric_induce.core.errors import DataError, RubricInduceError
from rubric_induce.core.safepaths import inside_folder
from rubric_induce.data.jsonl import jsonable

__all__ = ["save_calibrator", "load_calibrator", "non_finite_tensors", "write_weights", "read_config", "CONFIG_NAME",
           "FORMAT_VERSION", "check_network_config", "weights_path", "damaged", "REBUILD_ERRORS", "load_heads"]

CONFIG_NAME = "calibrator.json"
FORMAT_VERSION = 1


def package_versions() -> dict[str, str]:
    torch = require_torch()
    try:
        from rubric_induce import __version__ as ours  # the package's own __init__: read when asked
    except ImportError:  # pragma: no cover
        ours = "unknown"
    return {"rubric_induce": str(ours), "torch": torch.__version__, "numpy": np.__version__,
            "python": platform.python_version()}


def non_finite_tensors(tensors: dict[str, Any]) -> list[str]:
    """Names of the tensors holding NaN or infinite values (a diverged fit, a damaged file)."""
    return sorted(k for k, v in tensors.items()
                  if np.issubdtype(np.asarray(v).dtype, np.floating) and not np.isfinite(v).all())


def write_weights(tensors: dict[str, np.ndarray], directory: Path, stem: str, fmt: str = "auto") -> str:
    """Write ``tensors`` as ``STEM.safetensors`` (or ``STEM.npz``; ``auto``: safetensors when installed),
    never pickle; returns the file name written inside ``directory``."""
    if fmt == "auto":
        try:
            import safetensors  # noqa: F401
            fmt = "safetensors"
        except ImportError:
            fmt = "npz"
    if fmt not in ("safetensors", "npz"):
        raise ValueError(f"fmt must be 'safetensors', 'npz' or 'auto', got {fmt!r}")
    directory.mkdir(parents=True, exist_ok=True)
    name = f"{stem}.{fmt}"
    if fmt == "safetensors":
        from safetensors.numpy import save_file

        save_file(tensors, str(directory / name))
    else:
        np.savez(directory / name, **tensors)
    return name


def save_calibrator(cal: Calibrator, directory: str | Path, *, extra: dict[str, Any] | None = None,
                    fmt: str = "auto") -> Path:
    """Write ``cal`` to ``directory``; ``fmt``: ``"safetensors"``, ``"npz"`` or ``"auto"``.

    Non-finite weights (NaN, inf: a diverged fit) are refused: they would only score NaN."""
    check_fitted(cal)
    directory = Path(directory)
    tensors = {f"{m}.{name}": t.detach().cpu().contiguous().numpy()
               for m, net in enumerate(cal.networks_) for name, t in net.state_dict().items()
               if name != "answer_mask"}
    bad = non_finite_tensors(tensors)
    if bad:
        raise RubricInduceError(f"the calibrator's weights are not finite (NaN or inf in {', '.join(bad[:5])}): "
                                "the fit diverged; lower calibrate.options.learning_rate or check the probes")
    weights = write_weights(tensors, directory, "weights", fmt)
    params = cal.get_params()
    config = {
        "format": "rubric-induce-calibrator",
        "format_version": FORMAT_VERSION,
        "params": jsonable({**params, "hidden": list(params["hidden"]),
                             "not_applicable": list(params["not_applicable"])}),
        "question_names": list(cal.question_names_),
        "scales": [list(s) for s in cal.scales_],
        "main_question_index": int(cal.main_question_index_),
        "judges": list(cal.judges_),
        "judge_counts": dict(cal.judge_counts_),
        "input_names": cal.input_names_,
        "input_shape": list(cal.n_features_in_shape_),
        "n_members": len(cal.networks_),
        "weights": weights,
        "versions": package_versions(),
        "extra": jsonable(extra or {}),
    }
    (directory / CONFIG_NAME).write_text(json.dumps(config, indent=2), encoding="utf-8")
    return directory


def read_weights(wpath: Path) -> dict[str, np.ndarray]:
    """The tensors of a weights file; a truncated or damaged one is a DataError naming it."""
    import zipfile

    try:
        if wpath.suffix == ".safetensors":
            from safetensors.numpy import load_file

            return load_file(str(wpath))
        with np.load(wpath, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
        raise DataError(f"the weights file is damaged or truncated ({exc}); save the calibrator again "
                        "(rerun the calibrate stage)", path=wpath) from None
    except Exception as exc:  # safetensors' SafetensorError derives from Exception only
        if type(exc).__name__ != "SafetensorError":
            raise
        raise DataError(f"the weights file is damaged or truncated ({exc}); save the calibrator again "
                        "(rerun the calibrate stage)", path=wpath) from None


#: Keys a saved calibrator config must have (a damaged one is a DataError, not a KeyError).
_REQUIRED_KEYS = ("weights", "params", "question_names", "scales", "main_question_index", "judges", "input_shape",
                  "n_members")


def read_config(path: Path, fmt: str, what: str, *, absent: str, version: int = FORMAT_VERSION) -> dict[str, Any]:
    """The JSON config of a saved model at ``path``, checked for its ``format`` name and a
    ``format_version`` this library reads; every failure is a DataError naming the file and field."""
    if not path.exists():
        raise DataError(absent, path=path.parent)
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise DataError(f"invalid JSON: {exc}", path=path) from None
    if not isinstance(config, dict) or config.get("format") != fmt:
        raise DataError(f"not a rubric-induce {what} config", path=path, field="format")
    fv = config.get("format_version", 0)
    if isinstance(fv, bool) or not isinstance(fv, int):
        raise DataError(f"must be an integer, got {fv!r}", path=path, field="format_version")
    if fv > version:
        raise DataError(f"format version {config['format_version']} is newer than this library's "
                        f"{version}; upgrade rubric-induce", path=path, field="format_version")
    return config


def weights_path(directory: Path, config: Mapping[str, Any], path: Path) -> Path:
    """The weights file a config names: a plain file name in ``directory`` (``.safetensors`` or
    ``.npz``), never a path that leads elsewhere."""
    name = config.get("weights")
    if (not isinstance(name, str) or not name or "\x00" in name or len(name) > 255 or name != Path(name).name
            or name in (".", "..") or Path(name).suffix not in (".safetensors", ".npz")):
        raise DataError(f"must name a .safetensors or .npz file in this folder, got {name!r}", path=path,
                        field="weights")
    return inside_folder(directory, name, path=path, field="weights")  # a linked file leads nowhere else


def _bad(path: Path, field: str, what: str, value: Any) -> DataError:
    shown = repr(value)
    return DataError(f"must be {what}, got {shown[:60]}{'...' if len(shown) > 60 else ''}", path=path, field=field)


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_network_config(config: Mapping[str, Any], path: Path, tensors: Mapping[str, np.ndarray], *,
                         n_inputs: int | None, hidden_keys: Sequence[str] = ("hidden",)) -> None:
    """Every field a saved network's config is rebuilt from, checked for its type and range before
    anything is built: a damaged file (a string where a list goes, NaN in a scale, an index out of
    range, a network far larger than its weights) is a DataError naming the file and the field.

    ``n_inputs``: the first layer's width the config implies (None: from ``input_shape``)."""
    q = config.get("question_names")
    if not isinstance(q, list) or not q or not all(isinstance(x, str) for x in q):
        raise _bad(path, "question_names", "a non-empty list of names", q)
    scales = config.get("scales")
    if (not isinstance(scales, list) or len(scales) != len(q)
            or not all(isinstance(s, list) and len(s) >= 2 and all(_finite(v) for v in s) for s in scales)):
        raise _bad(path, "scales", f"{len(q)} list(s) of at least 2 finite numbers (one per question)", scales)
    mq = config.get("main_question_index")
    if not _int(mq) or not 0 <= mq < len(q):
        raise _bad(path, "main_question_index", f"an index into question_names (0 to {len(q) - 1})", mq)
    judges = config.get("judges")
    if not isinstance(judges, list) or not all(isinstance(j, str) for j in judges):
        raise _bad(path, "judges", "a list of judge names", judges)
    counts = config.get("judge_counts", {})
    if not isinstance(counts, Mapping) or not all(_int(v) and v >= 0 for v in counts.values()):
        raise _bad(path, "judge_counts", "an object of judge -> count", counts)
    total = sum(int(np.asarray(t).size) for t in tensors.values())
    shape = config.get("input_shape")
    if (not isinstance(shape, list) or not 1 <= len(shape) <= 3 or not all(_int(v) and v >= 1 for v in shape)
            or int(np.prod([float(v) for v in shape])) > total):
        raise _bad(path, "input_shape", "a list of 1 to 3 positive integers that fit the weights file", shape)
    if "n_members" in config and (not _int(config["n_members"]) or not 1 <= config["n_members"] <= 1000):
        raise _bad(path, "n_members", "an integer from 1 to 1000", config["n_members"])
    params = config.get("params")
    if not isinstance(params, Mapping):
        raise _bad(path, "params", "an object of the model's parameters", params)
    # A network is never larger than the weights it was saved with: bound every layer by them, so a
    # damaged width cannot make the loader allocate gigabytes before the shape check.
    width = int(np.prod(shape)) if n_inputs is None else n_inputs
    for key in hidden_keys:
        h = params.get(key)
        if (not isinstance(h, list) or len(h) != 2 or not all(_int(v) and v >= 1 for v in h)
                or width * h[0] > total or h[0] * h[1] > total):
            raise _bad(path, f"params.{key}", "two positive layer widths that fit the weights file", h)
    if len(judges) > total:
        raise _bad(path, "judges", "no more judges than the weights file holds values", f"{len(judges)} judges")


def _finite(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def damaged(path: Path, what: str, exc: Exception) -> DataError:
    """The error for a config that passed the field checks but still could not be rebuilt."""
    return DataError(f"the {what} config is damaged ({type(exc).__name__}: {exc}); rerun the calibrate stage",
                     path=path)


#: What rebuilding a network from a damaged config can raise (each turned into a DataError).
REBUILD_ERRORS = (KeyError, TypeError, ValueError, IndexError, OverflowError, RuntimeError, AttributeError)


def load_network_state(net: Any, tensors: dict[str, np.ndarray], prefix: str, wpath: Path) -> Any:
    """Fill ``net``'s weights from ``tensors[prefix + name]`` (every name checked for presence and
    shape, a DataError naming the file otherwise); returns ``net`` in eval mode."""
    torch = require_torch()
    state = net.state_dict()
    for name, cur in state.items():
        if name == "answer_mask":  # a buffer rebuilt from the scales, not saved
            continue
        key = f"{prefix}{name}"
        if key not in tensors:
            raise DataError(f"weights file lacks tensor {key!r}", path=wpath)
        arr = tensors[key]
        if tuple(arr.shape) != tuple(cur.shape):
            raise DataError(f"tensor {key!r} has shape {arr.shape}, expected {tuple(cur.shape)}", path=wpath)
        state[name] = torch.from_numpy(np.array(arr, dtype=np.float32))
    net.load_state_dict(state)
    return net.eval()


def load_calibrator(directory: str | Path) -> Calibrator:
    """Rebuild a calibrator saved by :func:`save_calibrator` (no pickle involved)."""
    require_torch()  # a clear MissingDependencyError before the network import
    from rubric_induce.calibration.network import CalibrationNetwork

    directory = Path(directory)
    path = directory / CONFIG_NAME
    config = read_config(path, "rubric-induce-calibrator", "calibrator",
                         absent=f"no {CONFIG_NAME} here; is this a calibrator artifact directory?")
    missing = [k for k in _REQUIRED_KEYS if k not in config]
    if missing:
        raise DataError(f"the calibrator config lacks {', '.join(missing)}: it is damaged; refit the calibrator",
                        path=path, field=missing[0])
    wpath = weights_path(directory, config, path)
    if not wpath.exists():
        raise DataError("weights file is missing", path=wpath)
    tensors = read_weights(wpath)
    bad = non_finite_tensors(tensors)
    if bad:
        raise DataError(f"tensor {bad[0]!r} holds NaN or infinite values"
                        f"{f' (and {len(bad) - 1} more)' if len(bad) > 1 else ''}: the weights are damaged; "
                        "refit the calibrator", path=wpath)
    check_network_config(config, path, tensors, n_inputs=None)
    names = config.get("input_names")
    if names is not None and (not isinstance(names, list) or not all(isinstance(n, str) for n in names)):
        raise _bad(path, "input_names", "a list of rubric ids or null", names)
    try:
        params = dict(config["params"])
        params["hidden"] = tuple(params["hidden"])
        params["not_applicable"] = tuple(params["not_applicable"])
        cal = Calibrator(**params)
        cal.question_names_ = list(config["question_names"])
        cal.scales_ = [tuple(float(v) for v in s) for s in config["scales"]]
        cal.main_question_index_ = int(config["main_question_index"])
        cal.judges_ = [str(j) for j in config["judges"]]
        cal.judge_counts_ = {str(k): int(v) for k, v in config.get("judge_counts", {}).items()}
        cal.input_names_ = config.get("input_names")
        cal.n_features_in_shape_ = tuple(int(v) for v in config["input_shape"])
        n_members = int(config["n_members"])
    except REBUILD_ERRORS as exc:
        raise damaged(path, "calibrator", exc) from None
    cal.unanswered_questions_ = []
    cal.n_rows_ignored_ = 0
    cal.history_ = []
    cal.artifact_extra_ = config.get("extra", {})
    n_in = int(np.prod(cal.n_features_in_shape_))
    nets = []
    for m in range(n_members):
        try:
            net = CalibrationNetwork(n_in, len(cal.judges_), [len(s) for s in cal.scales_], cal.hidden,
                                     personalized=cal.personalized, head=cal.head)
        except REBUILD_ERRORS as exc:
            raise damaged(path, "calibrator", exc) from None
        nets.append(load_network_state(net, tensors, f"{m}.", wpath))
    cal.networks_ = nets
    return cal


def load_heads(directory: str | Path, main: Calibrator | None = None) -> dict[str, Calibrator]:
    """Every aspect's calibrator saved in ``directory``, ``{question: calibrator}``, the main one
    first: the one in ``directory`` itself, then those its config lists under ``extra.aspects``
    (``[{"question": name, "folder": "aspects/1-name"}, ...]``, written when a run calibrates
    several questions). A folder saved before aspects existed holds the main one alone.
    ``main``: the calibrator already loaded from ``directory`` (read again when None)."""
    directory = Path(directory)
    main = load_calibrator(directory) if main is None else main
    path = directory / CONFIG_NAME
    out = {main.question_names_[main.main_question_index_]: main}
    extra = getattr(main, "artifact_extra_", None)
    entries = extra.get("aspects", []) if isinstance(extra, Mapping) else []
    if not isinstance(entries, list):
        raise _bad(path, "extra.aspects", "a list of {question, folder} objects", entries)
    for k, entry in enumerate(entries):
        where = f"extra.aspects[{k}]"
        if (not isinstance(entry, Mapping) or not isinstance(entry.get("question"), str)
                or not isinstance(entry.get("folder"), str) or not entry["folder"].strip()):
            raise _bad(path, where, "an object with a question name and a folder", entry)
        name = entry["question"]
        if name in out:
            raise DataError(f"names question {name!r} twice", path=path, field=f"{where}.question")
        folder = inside_folder(directory, entry["folder"], path=path, field=f"{where}.folder")
        head = load_calibrator(folder)
        if head.question_names_[head.main_question_index_] != name:
            raise DataError(f"the head in {entry['folder']} predicts "
                            f"{head.question_names_[head.main_question_index_]!r}, not {name!r}", path=path,
                            field=f"{where}.question")
        if head.input_names_ != main.input_names_ or head.n_features_in_shape_ != main.n_features_in_shape_:
            raise DataError(f"the head of {name!r} reads other inputs than the main calibrator: rerun the "
                            "calibrate stage", path=path, field=f"{where}.folder")
        out[name] = head
    return out

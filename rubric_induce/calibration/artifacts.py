"""Save and load a fitted :class:`Calibrator` without pickle.

A directory holds ``calibrator.json`` (parameters, judge vocabulary, question names and answer
scales, input names and shape, library versions) and the weights of every ensemble member in
``weights.safetensors`` (or ``weights.npz`` when safetensors is not installed), keyed
``"{member}.{parameter}"``. Loading rebuilds the networks and checks every tensor's shape.
"""
from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Any

import numpy as np

from rubric_induce.data.jsonl import jsonable
from rubric_induce.core.errors import DataError, RubricInduceError
from rubric_induce.calibration._torch import require_torch
from rubric_induce.calibration.calibrator import Calibrator, check_fitted

__all__ = ["save_calibrator", "load_calibrator", "non_finite_tensors", "write_weights", "read_config", "CONFIG_NAME", "FORMAT_VERSION"]

CONFIG_NAME = "calibrator.json"
FORMAT_VERSION = 1


def package_versions() -> dict[str, str]:
    torch = require_torch()
    try:
        from rubric_induce import __version__ as ours
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
    if int(config.get("format_version", 0)) > version:
        raise DataError(f"format version {config['format_version']} is newer than this library's "
                        f"{version}; upgrade rubric-induce", path=path, field="format_version")
    return config


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
    from rubric_induce.core.safepaths import inside_folder

    wpath = inside_folder(directory, config["weights"], path=path, field="weights")
    if not wpath.exists():
        raise DataError("weights file is missing", path=wpath)
    tensors = read_weights(wpath)
    bad = non_finite_tensors(tensors)
    if bad:
        raise DataError(f"tensor {bad[0]!r} holds NaN or infinite values"
                        f"{f' (and {len(bad) - 1} more)' if len(bad) > 1 else ''}: the weights are damaged; "
                        "refit the calibrator", path=wpath)
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
    except (KeyError, TypeError, ValueError) as exc:
        raise DataError(f"the calibrator config is damaged ({type(exc).__name__}: {exc}); refit the calibrator",
                        path=path) from None
    cal.unanswered_questions_ = []
    cal.n_rows_ignored_ = 0
    cal.history_ = []
    cal.artifact_extra_ = config.get("extra", {})
    n_in = int(np.prod(cal.n_features_in_shape_))
    nets = []
    for m in range(n_members):
        net = CalibrationNetwork(n_in, len(cal.judges_), [len(s) for s in cal.scales_], cal.hidden,
                                 personalized=cal.personalized, head=cal.head)
        nets.append(load_network_state(net, tensors, f"{m}.", wpath))
    cal.networks_ = nets
    return cal

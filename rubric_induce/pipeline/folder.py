"""The run folder: who may write it (an exclusive lock), whether it may be used (a run's folder or an
empty one), where its call cache lies, and the hashes of the files each stage wrote.

* **Lock**: ``<run>/.lock`` is held with ``flock`` for the whole run; a second run on the same folder
  fails at once with :class:`RunFolderBusyError`, naming the holder (pid, host, start, command,
  written into the lock file). The operating system drops the lock when the holder dies, even by
  ``kill -9``, so a crashed run never leaves a stale lock behind.
* **Refusal**: a folder that holds files but no run manifest (``manifest.json`` of format
  ``rubric-induce-run``) is not a run folder: the run refuses it before writing anything.
* **Cache**: ``[backend] cache`` lies inside the run folder unless ``[run] external_cache = true``.
* **Outputs**: a finished stage's marker records ``{path: sha256}`` of every file it wrote; a rerun
  trusts the stage only while every one of them is unchanged.
* **Received folders**: a marker's output names must stay inside the folder, and a symbolic link in
  it may not lead outside (:mod:`rubric_induce.core.safepaths`): a folder from someone else can make a run
  neither delete nor write files elsewhere. The lock file is opened without following a link.
"""
from __future__ import annotations

import hashlib
import json
import os
import socket
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rubric_induce.backends.redact import redact_text
from rubric_induce.core.errors import DataError, RubricInduceError
from rubric_induce.core.safepaths import check_links, inside_folder, open_no_follow

__all__ = ["RunFolderBusyError", "RunLock", "LOCK_NAME", "MANIFEST_NAME", "check_run_folder", "cache_path_for",
           "check_cache_location", "file_sha256", "snapshot", "changed_files", "hash_outputs", "damaged_outputs",
           "check_markers"]

LOCK_NAME = ".lock"
MANIFEST_NAME = "manifest.json"
RUN_FORMAT = "rubric-induce-run"
_CHUNK = 1 << 20


class RunFolderBusyError(RubricInduceError, RuntimeError):
    """Another process holds the run folder's lock (exit code 1: retry when it has finished)."""


# -- lock ------------------------------------------------------------------------------------------
class RunLock:
    """An exclusive, non-blocking lock on ``<folder>/.lock`` for the life of one run.

    ``acquire`` raises :class:`RunFolderBusyError` at once when another process holds it. The lock
    file stays in place (deleting it would let a third process lock a different file); its content,
    the holder's description, is cleared on release.
    """

    def __init__(self, folder: str | Path, command: str | None = None) -> None:
        self.folder = Path(folder)
        self.path = self.folder / LOCK_NAME

        # the holder note is readable by anyone who can list the folder: no URL credentials in it
        self.command = redact_text(command if command is not None else " ".join(sys.argv))
        self._fd: int | None = None

    @property
    def held(self) -> bool:
        return self._fd is not None

    def acquire(self) -> RunLock:
        fd = open_no_follow(self.path, os.O_RDWR | os.O_CREAT, 0o644)  # a planted link is not truncated
        try:
            _lock_fd(fd)
        except BlockingIOError:
            os.close(fd)
            raise _busy(self.folder) from None
        except OSError as exc:  # e.g. a file system without locks (ENOLCK)
            os.close(fd)
            raise RubricInduceError(f"cannot lock the run folder {self.folder}: {exc.strerror or exc}; use a "
                                    "run directory on a local file system") from None
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd
        info = {"pid": os.getpid(), "host": socket.gethostname(),
                "started": datetime.now(UTC).isoformat(timespec="seconds"), "command": self.command}
        os.ftruncate(fd, 0)
        os.lseek(fd, 0, os.SEEK_SET)
        os.write(fd, (json.dumps(info) + "\n").encode("utf-8"))
        return self

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)  # closing the descriptor drops the flock

    def __enter__(self) -> RunLock:
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()


def _lock_fd(fd: int) -> None:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        import msvcrt

        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            raise BlockingIOError from None
        return
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


def describe_holder(path: Path) -> str:
    """"pid N on HOST (started T: COMMAND)" from a lock file (read a few times: the holder may be
    writing it just now)."""
    info: dict[str, Any] = {}
    for _ in range(20):
        try:
            info = json.loads(path.read_text(encoding="utf-8") or "{}")
        except (OSError, ValueError):
            info = {}
        if info.get("pid"):
            break
        time.sleep(0.05)
    if not info.get("pid"):
        return "another process (its pid is not recorded)"
    host = f" on {info['host']}" if info.get("host") and info["host"] != socket.gethostname() else ""
    cmd = f": {info['command']}" if info.get("command") else ""
    return f"pid {info['pid']}{host} (started {info.get('started', '?')}{cmd})"


# -- which folders a run may use -----------------------------------------------------------------
def _is_run_manifest(path: Path) -> bool:
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(doc, dict) and doc.get("format") == RUN_FORMAT


def check_run_folder(folder: str | Path, *, field: str | None = None) -> None:
    """Refuse a path that is a file, or a non-empty folder without a run manifest (nothing is written).

    An absent or empty folder (or one holding only the lock file) is fine; so is an earlier run's folder,
    unless a symbolic link in it leads outside or a stage marker names a file outside it.
    """
    folder = Path(folder)
    if folder.exists() and not folder.is_dir():
        raise DataError("the run directory is a file, not a folder; choose another --out", path=folder, field=field)
    if not folder.is_dir():
        return
    check_links(folder)
    if _is_run_manifest(folder / MANIFEST_NAME):
        check_markers(folder)
        return
    others = sorted(p.name for p in folder.iterdir() if p.name != LOCK_NAME)
    if others:
        _fail_if_busy(folder)  # a run that has just started here has not written its manifest yet
        shown = ", ".join(others[:5]) + (", ..." if len(others) > 5 else "")
        raise DataError(f"the run directory is not empty ({shown}) and is not a rubric-induce run folder (no "
                        f"{MANIFEST_NAME} of a run): a run would overwrite its files; choose an empty or new "
                        "folder (--out or [run] out)", path=folder, field=field)


def _fail_if_busy(folder: Path) -> None:
    """Raise :class:`RunFolderBusyError` when a run holds the folder's lock (the lock file stays as it is)."""
    try:
        fd = os.open(folder / LOCK_NAME, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return
    try:
        _lock_fd(fd)
    except BlockingIOError:
        raise _busy(folder) from None
    except OSError:
        return
    finally:
        os.close(fd)


def _busy(folder: Path) -> RunFolderBusyError:
    return RunFolderBusyError(f"run folder {folder} is in use by {describe_holder(folder / LOCK_NAME)}; "
                              "wait for it to finish (or stop it), or choose another --out")


def cache_path_for(cache: str, run_dir: Path) -> Path:
    """The call cache file of a run: ``[backend] cache`` (``~`` expanded), relative to the run folder.

    A name inside the run folder must not lead outside it through a symbolic link planted there."""
    path = Path(cache).expanduser()
    path = path if path.is_absolute() else run_dir / path
    if _inside(path, run_dir):
        inside_folder(run_dir, os.path.relpath(os.path.abspath(path), os.path.abspath(run_dir)), path=path,
                      field="backend.cache")
    return path


def _inside(path: Path, folder: Path) -> bool:
    try:
        Path(os.path.abspath(path)).relative_to(os.path.abspath(folder))
        return True
    except ValueError:
        return False


def check_cache_location(cache: str, run_dir: Path, *, external_ok: bool, source: str | None = None) -> Path:
    """The cache path, after checking that it lies inside the run folder (or that the config says it may not)."""
    path = cache_path_for(cache, run_dir)
    if not external_ok and not _inside(path, run_dir):
        raise DataError(f"the call cache {os.path.abspath(path)} lies outside the run directory "
                        f"{os.path.abspath(run_dir)}; to share a cache between runs set [run] external_cache = true, "
                        "else give a path inside the run directory (default llm_calls.sqlite)",
                        path=source, field="backend.cache")
    return path


# -- output hashes -------------------------------------------------------------------------------
def file_sha256(path: str | Path) -> str:
    """sha256 of a file, read in 1 MiB chunks (fast on large probe tables, constant memory)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        while chunk := fh.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def snapshot(run_dir: Path, skip: set[str] = frozenset()) -> dict[str, tuple[int, int, int]]:
    """``{relative posix path: (size, mtime_ns, inode)}`` of the files under ``run_dir``, except the
    run's own bookkeeping (lock, manifest, config copy, stage markers), temporary files and ``skip``."""
    out: dict[str, tuple[int, int, int]] = {}
    stack = [run_dir]
    while stack:
        folder = stack.pop()
        try:
            entries = list(os.scandir(folder))
        except FileNotFoundError:
            continue
        for entry in entries:
            rel = Path(entry.path).relative_to(run_dir).as_posix()
            if rel in skip or rel in (LOCK_NAME, MANIFEST_NAME, "config.json", "stages"):
                continue
            if entry.is_dir(follow_symlinks=False):
                stack.append(Path(entry.path))
            elif entry.is_file(follow_symlinks=False):
                if entry.name.startswith(".") and entry.name.endswith(".tmp"):
                    continue  # an atomic write in progress
                st = entry.stat(follow_symlinks=False)
                out[rel] = (st.st_size, st.st_mtime_ns, st.st_ino)
    return out


def changed_files(before: dict[str, tuple[int, int, int]], after: dict[str, tuple[int, int, int]]) -> list[str]:
    """Files new or rewritten between two snapshots."""
    return sorted(rel for rel, sig in after.items() if before.get(rel) != sig)


def hash_outputs(run_dir: Path, names: list[str] | tuple[str, ...]) -> dict[str, str]:
    """``{name: sha256}`` of those files that exist (a folder name stands for every file inside it)."""
    out: dict[str, str] = {}
    for name in names:
        path = run_dir / name
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.is_file())
            for p in files:
                out[p.relative_to(run_dir).as_posix()] = file_sha256(p)
        elif path.is_file():
            out[Path(name).as_posix()] = file_sha256(path)
    return dict(sorted(out.items()))


def check_markers(run_dir: Path) -> None:
    """Refuse stage markers (``stages/*.json``) whose ``outputs`` name files outside the run folder: a
    rerun hashes those files and removes the ones it no longer writes. Unreadable markers are left to
    the runner (the stage reruns)."""
    stages = run_dir / "stages"
    if not stages.is_dir():
        return
    for marker in sorted(stages.glob("*.json")):
        try:
            doc = json.loads(marker.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(doc, dict) or doc.get("outputs") is None:
            continue
        outputs = doc["outputs"]
        if not isinstance(outputs, dict):
            raise DataError(f"expected an object of file name -> sha256, got {type(outputs).__name__}: the marker is "
                            "damaged; delete it (the stage reruns)", path=marker, field="outputs")
        for name in outputs:
            inside_folder(run_dir, name, path=marker, field="outputs")


def damaged_outputs(run_dir: Path, recorded: dict[str, str], *, source: Path | None = None) -> list[str]:
    """The recorded outputs that are missing now or whose content changed (``source``: the marker
    they were read from; a name outside the run folder is a DataError naming it)."""
    bad = []
    for name, digest in recorded.items():
        path = inside_folder(run_dir, name, path=source, field="outputs")
        try:
            if file_sha256(path) != digest:
                bad.append(name)
        except OSError:
            bad.append(name)
    return bad

"""Headless Chromium around the viewer page: dump the DOM after the scripts ran, take a screenshot.

Used by the browser tests, the benchmark and the README screenshot; nothing in the library needs
it. The flags keep Chromium off the network and quiet (no sync, no component updates, no QUIC).
"""
from __future__ import annotations

import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

__all__ = ["find_chromium", "dump_dom", "screenshot", "BrowserResult", "CHROMIUM_FLAGS"]

CHROMIUM_FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--hide-scrollbars", "--mute-audio")


@dataclass
class BrowserResult:
    stdout: str
    stderr: str
    returncode: int


def find_chromium() -> str | None:
    """The Chromium binary on PATH (Debian's ``chromium``), or None."""
    return shutil.which("chromium") or shutil.which("chromium-browser")


def _run(chromium: str, args: list[str], url: str, timeout: float) -> BrowserResult:
    with tempfile.TemporaryDirectory(prefix="rubric-induce-chromium-") as profile:
        cmd = [chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--enable-logging=stderr", "--v=0",
               *args, url]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return BrowserResult(res.stdout, res.stderr, res.returncode)


def page_url(path: str | Path, fragment: str = "") -> str:
    uri = Path(path).resolve().as_uri()
    return f"{uri}#{fragment}" if fragment else uri


def dump_dom(chromium: str, path: str | Path, fragment: str = "", *, budget_ms: int = 5000,
             window: str = "1280,800", timeout: float = 120) -> BrowserResult:
    """The page's DOM after its scripts ran (``--dump-dom``), with Chromium's console log in stderr."""
    return _run(chromium, [f"--virtual-time-budget={budget_ms}", f"--window-size={window}", "--dump-dom"],
                page_url(path, fragment), timeout)


def screenshot(chromium: str, path: str | Path, png: str | Path, fragment: str = "", *, window: str = "1280,800",
               budget_ms: int = 5000, timeout: float = 120) -> BrowserResult:
    """A PNG of the page at ``window`` (width,height) pixels."""
    return _run(chromium, [f"--virtual-time-budget={budget_ms}", f"--window-size={window}",
                           f"--screenshot={Path(png).resolve()}"], page_url(path, fragment), timeout)

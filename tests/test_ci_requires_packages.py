"""Under CI an optional package is required, never skipped: ``pytest.importorskip`` of an absent
package fails there (tests/conftest.py), while other skips stay skips."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent

CASES = '''
import pytest
missing = pytest.importorskip("no_such_package_{tag}")
def test_module_level(): pass
'''
INSIDE = '''
import pytest
def test_inside():
    pytest.importorskip("no_such_package_{tag}")
def test_other_skip():
    pytest.skip("a reason that is not a missing package")
'''


def _run(folder: Path, ci: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "CI": ci}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", "-m", "", "-rA", str(folder)],
                          cwd=HERE.parent, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_importorskip_fails_only_under_ci():
    tag = uuid.uuid4().hex[:8]
    folder = HERE / f"_ci_check_{tag}"  # under tests/, so tests/conftest.py applies
    folder.mkdir()
    try:
        (folder / f"test_module_{tag}.py").write_text(CASES.format(tag=tag))
        (folder / f"test_inside_{tag}.py").write_text(INSIDE.format(tag=tag))
        local = _run(folder, "")
        assert local.returncode == 0, local.stdout
        assert "3 skipped" in local.stdout
        ci = _run(folder, "true")
        assert ci.returncode == 1, ci.stdout
        assert "1 failed" in ci.stdout and "1 skipped" in ci.stdout and "1 error" in ci.stdout, ci.stdout
    finally:
        shutil.rmtree(folder, ignore_errors=True)

"""The one registry pattern (a dict plus a decorator) behind backends, generators and hand-off formats."""
from __future__ import annotations

import sys

import pytest

from rubric_induce.core.errors import RubricInduceError
from rubric_induce.core.registry import Registry, UnknownNameError


def test_register_by_decorator_and_directly():
    reg: Registry = Registry("widget")

    @reg.register("a")
    def make_a():
        return "A"

    reg.register("b", len)
    assert reg.get("a") is make_a and reg.get("b") is len
    assert reg.names() == ("a", "b") and "a" in reg and len(reg) == 2 and list(reg) == ["a", "b"]


def test_a_declared_module_is_imported_only_when_its_name_is_asked(tmp_path, monkeypatch):
    (tmp_path / "lazy_widget_mod.py").write_text(
        "from test_registry_shared import REG\nREG.register('lazy', 'from the module')\n")
    reg: Registry = Registry("widget")
    shared = type(sys)("test_registry_shared")
    shared.REG = reg
    monkeypatch.setitem(sys.modules, "test_registry_shared", shared)
    monkeypatch.syspath_prepend(str(tmp_path))
    reg.declare("lazy", "lazy_widget_mod")
    assert "lazy" in reg and reg.names() == ("lazy",)
    assert "lazy_widget_mod" not in sys.modules
    assert reg.get("lazy") == "from the module"
    assert "lazy_widget_mod" in sys.modules
    monkeypatch.delitem(sys.modules, "lazy_widget_mod")


def test_unknown_names_are_named_with_a_suggestion():
    reg: Registry = Registry("hand-off format")
    reg.register("promptfoo", object())
    with pytest.raises(UnknownNameError, match=r"unknown hand-off format 'promptfo' \(did you mean 'promptfoo'\?\)"):
        reg.get("promptfo")


def test_a_name_cannot_be_registered_twice_with_different_entries():
    reg: Registry = Registry("widget")
    reg.register("x", len)
    reg.register("x", len)  # the same entry again (a module imported twice) is fine
    with pytest.raises(RubricInduceError, match="registered twice"):
        reg.register("x", abs)


def test_backends_come_from_the_registry():
    from rubric_induce.backends import BACKEND_KINDS, BACKENDS, get_backend
    from rubric_induce.backends.fake import FakeBackend

    assert BACKEND_KINDS == ("fake", "local", "openai", "openai-compatible") == BACKENDS.names()
    assert isinstance(get_backend("fake/x"), FakeBackend) and get_backend("fake/x").model == "x"

"""Parameters defined once: frozen dataclasses whose fields carry their default, help and checks.

Every stage owns one :class:`Params` subclass. The same class is a section of the ``run`` config
(:meth:`Params.from_mapping` checks types and unknown keys, naming file and field), the source of
the CLI options (:func:`click_options` takes defaults and help from the fields) and the validator
of the experiments' ``--set`` overrides (:func:`params_class` builds one from a dict of defaults).
So a default, a range or a help text exists in exactly one place.
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import types
import typing
from collections.abc import Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from rubric_induce.core.errors import DataError
from rubric_induce.core.textfiles import read_text

__all__ = ["Params", "param", "suggest", "click_options", "params_class", "options_from", "read_at_file",
           "quoted_value_error", "resolve_params", "option_values"]

_META = "rubric_induce"
P = TypeVar("P", bound="Params")


def param(  # noqa: PLR0913 (a field declaration like dataclasses.field: each check is one keyword)
        default: Any = MISSING, *, help: str, choices: Sequence[Any] | None = None,
        ge: float | None = None, gt: float | None = None, le: float | None = None,
        lt: float | None = None, cli: str | None = None, cli_help: str | None = None,
        factory: Any = None, hidden: bool = False) -> Any:
    """A parameter field: its default, a one-line help, and the checks :class:`Params` applies.

    ``cli`` renames the option (``"--keep"``) or, as ``"--ds/--no-ds"``, gives a flag pair;
    ``hidden`` keeps a field out of the generated CLI options (config and API only).
    """
    meta = {"help": help, "choices": tuple(choices) if choices is not None else None, "ge": ge, "gt": gt,
            "le": le, "lt": lt, "cli": cli, "cli_help": cli_help, "hidden": hidden}
    if factory is not None:
        return field(default_factory=factory, metadata={_META: meta})
    return field(default=default, metadata={_META: meta})


def suggest(name: str, choices: Sequence[str] | Mapping[str, Any]) -> str:
    """`` (did you mean 'x'?)`` for the closest known name, else an empty string."""
    close = difflib.get_close_matches(str(name), [str(c) for c in choices], n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def read_at_file(value: str | None, resolve: Any = None, *, field: str, what: str,
                 source: str | None = None) -> str | None:
    """A config value given as text, or as ``@path`` whose file is read (``resolve`` turns the name
    into a path, e.g. against the config's folder); an unreadable file is a :class:`DataError`
    naming it and ``field``."""
    if not (value and value.startswith("@")):
        return value

    path = Path((resolve or Path)(value[1:]))
    if not path.exists():
        raise DataError(f"{what} file not found: {path}", path=source, field=field)
    try:
        return read_text(path)  # UTF-8, with or without a byte-order mark; bad bytes name their line
    except DataError as exc:
        raise DataError(f"{what} file {path}: {exc.message}" + (f" (line {exc.line})" if exc.line else ""),
                        path=source, field=field) from None
    except FileNotFoundError:
        raise DataError(f"{what} file not found: {path}", path=source, field=field) from None
    except OSError as exc:
        raise DataError(f"cannot read the {what} file {path}: {exc.strerror}", path=source, field=field) from None


def _meta(f: dataclasses.Field) -> dict[str, Any]:
    return f.metadata.get(_META, {})


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _is_optional(tp: Any) -> tuple[bool, Any]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        if len(args) < len(typing.get_args(tp)):
            return True, (args[0] if len(args) == 1 else typing.Union[tuple(args)])  # noqa: UP007 (built at run time)
    return False, tp


def _type_name(tp: Any) -> str:
    return getattr(tp, "__name__", None) or str(tp).replace("typing.", "")


def _coerce(value: Any, tp: Any, where: str, text_ok: bool = False) -> Any:
    """``value`` as type ``tp``: lists become tuples, ints floats; anything else is an error.

    A number written as a string (``n_sat = "2"``) is refused: a config says ``2``. Only the items
    of a comma-separated string (``--hidden 4,4`` from a command line, ``text_ok``) are parsed."""
    optional, base = _is_optional(tp)
    if value is None:
        if optional or base is Any:
            return None
        raise DataError("must be given (it has no empty value)", field=where)
    if base is Any:
        return value
    origin = typing.get_origin(base)
    if origin is tuple:
        return _coerce_tuple(value, base, where, text_ok)
    if origin in (dict, Mapping) or base is dict:
        if not isinstance(value, Mapping):
            raise DataError(f"expected a table of options, got {value!r}", field=where)
        return dict(value)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(base):
            try:
                return _coerce(value, arg, where, text_ok)
            except DataError:
                continue
        raise DataError(f"expected {_type_name(base)}, got {value!r}", field=where)
    if base in (bool, int, float, str):
        return _coerce_scalar(value, base, where, text_ok)
    if isinstance(base, type) and not isinstance(value, base):
        raise DataError(f"expected {_type_name(base)}, got {value!r}", field=where)
    return value


def _coerce_tuple(value: Any, base: Any, where: str, text_ok: bool) -> tuple:
    """A list (or a comma-separated string) as a tuple of ``base``'s item types."""
    args = typing.get_args(base)
    if isinstance(value, str):  # "a,b" from a command line (or one name in a config)
        value, text_ok = [v.strip() for v in value.split(",") if v.strip()], True
    if not isinstance(value, (list, tuple)):
        raise DataError(f"expected a list, got {value!r}", field=where)
    if args and args[-1] is Ellipsis:
        return tuple(_coerce(v, args[0], f"{where}[{i}]", text_ok) for i, v in enumerate(value))
    if args and len(args) != len(value):
        raise DataError(f"expected {len(args)} values, got {list(value)!r}", field=where)
    return tuple(_coerce(v, a, f"{where}[{i}]", text_ok) for i, (v, a) in enumerate(zip(value, args)))


def _coerce_scalar(value: Any, base: type, where: str, text_ok: bool) -> Any:
    """``value`` as a bool, int, float or str (``base``); a number from text only when ``text_ok``."""
    if base is bool:
        if isinstance(value, bool):
            return value
        raise DataError(f"expected true or false, got {_shown(value, _bool_text)}", field=where)
    if base is str:
        if isinstance(value, str):
            return value
        raise DataError(f"expected a string, got {value!r}", field=where)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and (base is float or isinstance(value, int)):
        if base is int:
            return value
        try:
            return float(value)
        except OverflowError:  # an integer beyond any float (10**400 in a JSON file)
            raise DataError(f"must be a finite number, got an integer of {len(str(value))} digits",
                            field=where) from None
    if isinstance(value, str) and text_ok:
        try:
            return base(value)
        except ValueError:
            pass
    what = "an integer" if base is int else "a number"
    raise DataError(f"expected {what}, got {_shown(value, base)}", field=where)


def _shown(value: Any, parse: Any) -> str:
    """``value`` for an error; a string that ``parse`` reads says to drop its quotes (write 2, not "2")."""
    if isinstance(value, str):
        try:
            parsed = parse(value.strip())
        except ValueError:
            return repr(value)
        text = str(parsed).lower() if isinstance(parsed, bool) else repr(parsed)
        return f"the string {value!r} (write {text} without quotes)"
    return repr(value)


def quoted_value_error(value: str, tp: type) -> str | None:
    """The error for a number or boolean of type ``tp`` written as the string ``value`` (None when
    the string does not read as one: other checks say what is wrong with it)."""
    shown = _shown(value, _bool_text if tp is bool else tp)
    if not shown.startswith("the string"):
        return None
    return f"expected {'true or false' if tp is bool else 'a number' if tp is float else 'an integer'}, got {shown}"


def _bool_text(text: str) -> bool:
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    raise ValueError(text)


def _check_range(value: Any, meta: Mapping[str, Any], where: str) -> None:
    if value is None:
        return
    if meta.get("choices") is not None and value not in meta["choices"]:
        raise DataError(f"unknown value {value!r}{suggest(str(value), [str(c) for c in meta['choices']])}; "
                        f"choose from {', '.join(map(str, meta['choices']))}", field=where)
    items = value if isinstance(value, tuple) else (value,)
    for v in items:
        if not isinstance(v, (int, float)) or isinstance(v, bool):
            continue
        if not math.isfinite(v):  # NaN passes no range; inf is never a sensible setting
            raise DataError(f"must be a finite number, got {v!r}", field=where)
        for key, ok, word in (("ge", lambda a, b: a >= b, "at least"), ("gt", lambda a, b: a > b, "greater than"),
                              ("le", lambda a, b: a <= b, "at most"), ("lt", lambda a, b: a < b, "less than")):
            bound = meta.get(key)
            if bound is not None and not ok(v, bound):
                raise DataError(f"must be {word} {bound:g}, got {v!r}", field=where)


@dataclass(frozen=True)
class Params:
    """Base of the per-stage parameter classes (frozen dataclasses; subclasses add fields).

    Values are checked on construction (type, choices, ranges, then :meth:`check` for rules
    that involve several fields), so an instance is always valid.
    """

    section: ClassVar[str] = ""

    def __post_init__(self) -> None:
        hints = _hints(type(self))
        for f in fields(self):
            where = f"{self.section}.{f.name}" if self.section else f.name
            value = _coerce(getattr(self, f.name), hints[f.name], where)
            _check_range(value, _meta(f), where)
            object.__setattr__(self, f.name, value)
        self.check()

    def check(self) -> None:
        """Rules across fields; raise :class:`DataError` with ``field`` set."""

    def where(self, name: str) -> str:
        return f"{self.section}.{name}" if self.section else name

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, Any] | None, *, source: str | None = None) -> Params:
        """Build from a config table; unknown keys and bad values name the file and field."""
        mapping = dict(mapping or {})
        known = cls.field_names()
        for key in mapping:
            if key not in known:
                where = f"{cls.section}.{key}" if cls.section else key
                raise DataError(f"unknown key{suggest(key, known)}; {('[' + cls.section + '] ') if cls.section else ''}"
                                f"takes {', '.join(known)}", path=source, field=where)
        try:
            return cls(**mapping)
        except DataError as exc:
            raise DataError(exc.message, path=source, field=exc.field) from None

    @classmethod
    def from_kwargs(cls, kwargs: Mapping[str, Any], *, prefix: str = "", **overrides: Any) -> Params:
        """Pick this class's fields out of ``kwargs`` (e.g. a click command's, named ``prefix`` +
        field name), skipping ``None`` for fields whose default is not ``None`` (an option the
        user did not give); ``overrides`` win."""
        values = {}
        for f in fields(cls):
            key = prefix + f.name
            if f.name in overrides:
                values[f.name] = overrides[f.name]
            elif key in kwargs and (kwargs[key] is not None or f.default is None):
                values[f.name] = kwargs[key]
        return cls(**values)

    def replace(self, **changes: Any) -> Params:
        return dataclasses.replace(self, **changes)

    def with_overrides(self, **overrides: Any) -> Params:
        """A copy with ``overrides`` applied and checked; an unknown name is a :class:`TypeError`
        naming the closest field (the keyword overrides every stage entry point takes)."""
        if not overrides:
            return self
        known = self.field_names()
        for key in overrides:
            if key not in known:
                raise TypeError(f"{type(self).__name__} has no field {key!r}{suggest(key, known)}; "
                                f"it takes {', '.join(known)}")
        return dataclasses.replace(self, **overrides)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able values (tuples as lists), e.g. for fingerprints and manifests."""
        def plain(v: Any) -> Any:
            if isinstance(v, Params):
                return v.to_dict()
            if isinstance(v, tuple):
                return [plain(x) for x in v]
            if isinstance(v, dict):
                return {k: plain(x) for k, x in v.items()}
            return v

        return {f.name: plain(getattr(self, f.name)) for f in fields(self)}


def resolve_params(cls: type[P], params: P | None, overrides: Mapping[str, Any]) -> P:
    """The params a stage entry point runs with: ``params`` (default: ``cls()``) with the keyword
    ``overrides`` applied through :meth:`Params.with_overrides` (checked like a config; an unknown
    name is a :class:`TypeError`)."""
    if params is None:
        params = cls()
    elif not isinstance(params, cls):
        raise TypeError(f"params must be a {cls.__name__}, got {type(params).__name__}")
    return params.with_overrides(**overrides)  # type: ignore[return-value]


def option_values(cls: type, options: Any, overrides: Mapping[str, Any]) -> tuple[Any, ...]:
    """The field values, in field order, of the options dataclass ``cls`` that a function takes as
    one value: ``options`` (default: ``cls(**overrides)``) with the keyword ``overrides`` applied.
    An unknown or missing name is a :class:`TypeError`, as for a keyword argument."""
    if options is None:
        options = cls(**overrides)
    elif not isinstance(options, cls):
        raise TypeError(f"options must be a {cls.__name__}, got {type(options).__name__}")
    elif overrides:
        options = dataclasses.replace(options, **overrides)
    return tuple(getattr(options, f.name) for f in fields(options))


def options_from(cls: type[Params], options: Mapping[str, Any], *, where: str, source: str | None = None,
                 reserved: Sequence[str] = ()) -> Params:
    """Validate an ``options`` table against a params class (unknown keys name the closest one)."""
    known = [n for n in cls.field_names() if n not in reserved]
    for key in options:
        if key in reserved:
            raise DataError(f"{key!r} is set elsewhere in the config, not in options", path=source,
                            field=f"{where}.{key}")
        if key not in known:
            raise DataError(f"unknown option{suggest(key, known)}; allowed: {', '.join(sorted(known))}",
                            path=source, field=f"{where}.{key}")
    try:
        return cls(**options)
    except DataError as exc:
        name = (exc.field or "").split(".")[-1]
        raise DataError(exc.message, path=source, field=f"{where}.{name}" if name else where) from None


def params_class(name: str, defaults: Mapping[str, Any], *, section: str = "") -> type[Params]:
    """A :class:`Params` subclass whose fields are typed by ``defaults`` (for experiments' configs)."""
    specs = []
    for key, value in defaults.items():
        if isinstance(value, bool):
            tp: Any = bool
        elif isinstance(value, int):
            tp = int
        elif isinstance(value, float):
            tp = float
        elif isinstance(value, str):
            tp = str
        elif isinstance(value, (list, tuple)):
            tp = Any
        elif isinstance(value, dict):
            tp = dict
        else:
            tp = Any
        if value is None:
            tp = Any
        else:
            tp = typing.Optional[tp]  # noqa: UP045 (built at run time from a default)
        default = field(default_factory=lambda v=value: type(v)(v)) if isinstance(value, (list, dict)) else value
        specs.append((key, tp, default))
    cls = dataclasses.make_dataclass(name, specs, bases=(Params,), frozen=True)
    cls.section = section
    return cls


# --------------------------------------------------------------------------------------------
# click options from a params class
# --------------------------------------------------------------------------------------------
def _option_name(f: dataclasses.Field) -> str:
    return _meta(f).get("cli") or "--" + f.name.replace("_", "-")


def click_options(cls: type[Params], *, exclude: Sequence[str] = (), only: Sequence[str] | None = None,
                  defaults: Mapping[str, Any] | None = None, prefix: str = ""):
    """A decorator adding one click option per field of ``cls`` (default and help from the field).

    Values are passed under ``prefix`` + the field names; build the params with
    :meth:`Params.from_kwargs`, which validates them (so a bad value exits 2 with the field named,
    like a bad config). ``defaults`` replaces shown defaults (e.g. None: "the method's default").
    """
    import click

    hints = _hints(cls)
    chosen = [f for f in fields(cls) if f.name not in exclude and not _meta(f).get("hidden")
              and (only is None or f.name in only)]
    if only is not None:
        chosen.sort(key=lambda f: list(only).index(f.name))
    defaults = dict(defaults or {})

    def decorate(fn):
        for f in reversed(chosen):
            meta = _meta(f)
            optional, base = _is_optional(hints[f.name])
            default = defaults.get(f.name, f.default if f.default is not MISSING else
                                   (f.default_factory() if f.default_factory is not MISSING else None))
            help_text = meta.get("cli_help") or meta.get("help", "")
            name = _option_name(f)
            dest = prefix + f.name
            kwargs: dict[str, Any] = {"help": help_text}
            if base is bool:
                decl = name if "/" in name else f"{name}/--no-{name[2:]}"
                fn = click.option(decl, dest, default=default, show_default=default is not None, **kwargs)(fn)
                continue
            if typing.get_origin(base) is tuple:
                shown = ",".join(map(str, default)) if isinstance(default, tuple) else default
                fn = click.option(name, dest, default=shown, show_default=shown is not None,
                                  metavar="A,B,...", **kwargs)(fn)
                continue
            if typing.get_origin(base) in (dict, Mapping) or base is dict:
                continue  # tables of options live in config files and the API
            if meta.get("choices") is not None:
                kwargs["type"] = click.Choice([str(c) for c in meta["choices"]])
                if base in (int, float):  # "4" on a command line is the number 4 (a config must say 4)
                    kwargs["callback"] = lambda ctx, p, v, _t=base: v if v is None else _t(v)
            elif base is int:
                kwargs["type"] = int
            elif base is float:
                kwargs["type"] = float
            fn = click.option(name, dest, default=default, show_default=default is not None, **kwargs)(fn)
        return fn

    return decorate

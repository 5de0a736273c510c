"""JSON Schema from Python type hints, for @Runtime.tool."""
import enum
import inspect
import types
import typing

_NONE = type(None)
_SCALARS = {str: "string", int: "integer", float: "number", bool: "boolean"}


def schema_for_type(t):
    """The JSON Schema of a type hint: str/int/float/bool, Optional/Union, Literal, list[...], tuple[...], set[...]
    (unique items), dict[str, V] (V for every member), Enum subclasses, Annotated[T, "description"]; Any (or no
    hint) is {}. TypeError for a hint JSON cannot carry (a class, bytes, dict[int, ...])."""
    if t is typing.Any or t is inspect.Parameter.empty:
        return {}
    origin, args = typing.get_origin(t), typing.get_args(t)
    if origin is typing.Annotated:
        s = dict(schema_for_type(args[0]))
        for meta in args[1:]:
            if isinstance(meta, str):
                s["description"] = meta
        return s
    if t in _SCALARS:
        return {"type": _SCALARS[t]}
    if t is _NONE or t is None:
        return {"type": "null"}
    if origin is typing.Union or (hasattr(types, "UnionType") and origin is getattr(types, "UnionType")):
        members = [schema_for_type(a) for a in args]
        return {"anyOf": members}
    if origin is typing.Literal:
        s = {"enum": list(args)}
        kinds = {type(a) for a in args}
        if len(kinds) == 1 and next(iter(kinds)) in _SCALARS:
            s["type"] = _SCALARS[next(iter(kinds))]
        return s
    if t in (list, tuple, set, frozenset) or origin in (list, tuple, set, frozenset):
        s = {"type": "array"}
        if origin is tuple:
            # tuple[X, ...] is a list of X; a fixed tuple (tuple[int, str]) an array of that many items.
            if len(args) == 2 and args[1] is Ellipsis:
                s["items"] = schema_for_type(args[0])
            elif args and args != ((),):
                s["minItems"] = s["maxItems"] = len(args)
                members = [schema_for_type(a) for a in args]
                if all(m == members[0] for m in members):
                    s["items"] = members[0]
        elif args:
            s["items"] = schema_for_type(args[0])
        if t in (set, frozenset) or origin in (set, frozenset):
            s["uniqueItems"] = True
        return s
    if t is dict or origin is dict:
        s = {"type": "object"}
        if args:
            if args[0] is not str:
                raise TypeError(f"agentrt: no JSON Schema for the type hint {t!r}: a JSON object's keys are strings")
            s["additionalProperties"] = schema_for_type(args[1])
        return s
    if isinstance(t, type) and issubclass(t, enum.Enum):
        return {"enum": [m.value for m in t]}
    raise TypeError(f"agentrt: no JSON Schema for the type hint {t!r}")


def schema_for_function(fn, skip_types=()):
    """{type:"object", properties, required, additionalProperties:false} from fn's parameters. Parameters whose
    hint is one of `skip_types` (the call context) are left out; parameters with a default are optional."""
    sig = inspect.signature(fn)
    hints = typing.get_type_hints(fn, include_extras=True)
    props, required = {}, []
    for name, p in sig.parameters.items():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            raise TypeError(f"agentrt: tool {fn.__name__}: *args/**kwargs cannot be described as JSON Schema")
        hint = hints.get(name, inspect.Parameter.empty)
        if hint in skip_types:
            continue
        s = schema_for_type(hint)
        if p.default is p.empty:
            required.append(name)
        elif p.default is None or isinstance(p.default, (str, int, float, bool)):
            s["default"] = p.default
        props[name] = s
    out = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        out["required"] = required
    return out


def description_of(fn):
    """The docstring's first paragraph, on one line."""
    doc = inspect.getdoc(fn) or ""
    return " ".join(doc.split("\n\n")[0].split())

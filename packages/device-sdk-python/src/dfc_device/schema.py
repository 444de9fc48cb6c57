"""The arguments check a device makes against its own manifest before calling a handler.

The service validates every request against the same JSON Schema before it is queued; this is
the device's own check, for the keywords manifests use: type, properties, required,
additionalProperties, enum, const, minimum, maximum, exclusiveMinimum, exclusiveMaximum,
multipleOf, minLength, maxLength, items, minItems, maxItems. Other keywords are left to the
service.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "null": (type(None),),
    "number": (int, float),
    "integer": (int, float),
}


def _is_type(value: Any, name: str) -> bool:
    if name in ("number", "integer") and isinstance(value, bool):
        return False
    if not isinstance(value, _TYPES.get(name, (object,))):
        return False
    return name != "integer" or float(value).is_integer()


def _bounds(value: float, schema: dict[str, Any], path: str) -> list[str]:
    checks: list[tuple[str, Callable[[float], bool], str]] = [
        ("minimum", lambda b: value >= b, ">="),
        ("maximum", lambda b: value <= b, "<="),
        ("exclusiveMinimum", lambda b: value > b, ">"),
        ("exclusiveMaximum", lambda b: value < b, "<"),
    ]
    problems = [f"{path}: must be {sign} {schema[key]}" for key, ok, sign in checks if key in schema and not ok(schema[key])]
    step = schema.get("multipleOf")
    if step and not math.isclose(value / step, round(value / step), abs_tol=1e-9):
        problems.append(f"{path}: must be a multiple of {step}")
    return problems


def validate(value: Any, schema: dict[str, Any], path: str = "args") -> list[str]:
    """The problems with ``value`` under ``schema`` (empty when it conforms)."""
    expected = schema.get("type")
    names = expected if isinstance(expected, list) else [expected] if expected else []
    if names and not any(_is_type(value, n) for n in names):
        return [f"{path}: must be {' or '.join(names)}"]
    problems: list[str] = []
    if "enum" in schema and value not in schema["enum"]:
        problems.append(f"{path}: must be one of {schema['enum']}")
    if "const" in schema and value != schema["const"]:
        problems.append(f"{path}: must be {schema['const']!r}")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        problems += _bounds(value, schema, path)
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0) or len(value) > schema.get("maxLength", math.inf):
            problems.append(f"{path}: length out of range")
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0) or len(value) > schema.get("maxItems", math.inf):
            problems.append(f"{path}: item count out of range")
        if isinstance(schema.get("items"), dict):
            for index, item in enumerate(value):
                problems += validate(item, schema["items"], f"{path}[{index}]")
    if isinstance(value, dict):
        problems += _object(value, schema, path)
    return problems


def _object(value: dict[str, Any], schema: dict[str, Any], path: str) -> list[str]:
    properties: dict[str, Any] = schema.get("properties", {})
    problems = [f"{path}.{name}: required" for name in schema.get("required", []) if name not in value]
    for name, item in value.items():
        if name in properties:
            problems += validate(item, properties[name], f"{path}.{name}")
        elif schema.get("additionalProperties") is False:
            problems.append(f"{path}.{name}: not allowed")
        elif isinstance(schema.get("additionalProperties"), dict):
            problems += validate(item, schema["additionalProperties"], f"{path}.{name}")
    return problems

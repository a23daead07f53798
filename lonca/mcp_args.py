"""Checking a tool's arguments against its input schema.

The schemas are Lonca's own, small and closed (type, enum, properties, required,
additionalProperties false, items, minimum), so this checks exactly that subset: jsonschema is a
test dependency, not one every agent host must install. Unknown top-level arguments are reported
apart from errors, since the tools treat them differently (seed 001, "MCP tools")."""

_TYPES = {
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "null": lambda v: v is None,
}


def _errors(schema: dict, value, where: str) -> list[str]:
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else types
        if not any(_TYPES[t](value) for t in names):
            return [f"{where} must be {' or '.join(names)}"]
    if "enum" in schema and value not in schema["enum"]:
        return [f"{where} must be one of {', '.join(map(str, schema['enum']))}"]
    if "minimum" in schema and isinstance(value, int) and value < schema["minimum"]:
        return [f"{where} must be at least {schema['minimum']}"]
    out: list[str] = []
    if isinstance(value, dict) and "properties" in schema:
        out += _object_errors(schema, value, where, strict=True)[1]
    if isinstance(value, list) and "items" in schema:
        for i, item in enumerate(value):
            out += _errors(schema["items"], item, f"{where}[{i}]")
    return out


def _object_errors(schema: dict, value: dict, where: str, strict: bool) -> tuple[list[str], list[str]]:
    props = schema.get("properties", {})
    unknown = sorted(k for k in value if k not in props)
    out = [f"{where}.{k} is not a field it takes" for k in unknown] if strict else []
    out += [f"{where}.{k} is required" for k in schema.get("required", []) if k not in value]
    for k, v in value.items():
        if k in props:
            out += _errors(props[k], v, f"{where}.{k}")
    return unknown, out


def check(schema: dict, args) -> tuple[list[str], list[str]]:
    """(unknown top-level argument names, errors) of `args` against a tool's input schema."""
    if not isinstance(args, dict):
        return [], ["the arguments must be an object"]
    return _object_errors(schema, args, "arguments", strict=False)

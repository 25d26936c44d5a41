"""The JSON schema of torchlint's settings, for editors that complete and check `[tool.torchlint]`,
`torchlint.toml` and `.torchlint.toml` (as ruff ships `ruff.schema.json`). Built from the same tables that
validate a configuration (`KEY_DOCS` for the words, the rules' declared options passed in), so that the two
cannot disagree; the copy in the repository (`torchlint.schema.json`) is checked against it by a test.
"""

from __future__ import annotations

from typing import Any

from torchlint.workspace.settings import DEVICES, KEY_DOCS

_CODE = {"type": "string", "pattern": "^(ALL|TL[0-9]{0,3})$"}
_CODES = {"type": "array", "items": _CODE}
_PATTERNS = {"type": "array", "items": {"type": "string"}}
_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string"}


def settings_schema(rule_options: dict[str, dict[str, tuple[type, object]]]) -> dict[str, Any]:
    """`rule_options`: each rule's declared options, `{code: {name: (type, default)}}`."""
    shapes: dict[str, dict[str, Any]] = {
        "select": _CODES,
        "extend-select": _CODES,
        "ignore": _CODES,
        "fixable": _CODES,
        "extend-fixable": _CODES,
        "unfixable": _CODES,
        "per-file-ignores": {"type": "object", "additionalProperties": _CODES},
        "exclude": _PATTERNS,
        "extend-exclude": _PATTERNS,
        "include": _PATTERNS,
        "extend-include": _PATTERNS,
        "respect-gitignore": {"type": "boolean"},
        "device": {"enum": list(DEVICES)},
        "torch-version": {"type": "string", "pattern": r"^\d+\.\d+(\.\d+)?$"},
        "unsafe-fixes": {"type": "boolean"},
        "exit-non-zero-on-info": {"type": "boolean"},
        "rule-options": {
            "type": "object",
            "properties": {
                code: {
                    "type": "object",
                    "properties": {
                        name: {"type": _JSON_TYPES[kind], "default": default}
                        for name, (kind, default) in sorted(options.items())
                    },
                    "additionalProperties": False,
                }
                for code, options in sorted(rule_options.items())
                if options
            },
            "additionalProperties": False,
        },
        "extend": {"type": "string"},
    }
    assert set(shapes) == set(KEY_DOCS), "every setting has a shape in the schema"
    return {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "title": "torchlint settings",
        "description": "[tool.torchlint] in pyproject.toml, or the top level of (.)torchlint.toml",
        "type": "object",
        "properties": {key: {**shapes[key], "description": KEY_DOCS[key][1]} for key in KEY_DOCS},
        "additionalProperties": False,
    }

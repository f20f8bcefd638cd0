"""JSON layouts: compact, dumps (json.dumps' separators exactly) and flexible, on both engines."""
import json

import pytest

import structgen as sg
from tests.helpers import load_vocab

SCHEMA = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "integer"}},
        "meta": {"type": "object"},
        "child": {"$ref": "#"},
    },
    "required": ["name"],
}
VALUE = {"name": "Ada", "tags": [1, 2, 3], "meta": {"a": [True, None], "b": {"c": 1.5}},
         "child": {"name": "Bo", "tags": []}}


def accepts(g, text):
    vocab = load_vocab("llama3")
    m = sg.compile(g, vocab).matcher()
    ids = vocab.encode(text)
    return m.advance_many(ids) == len(ids) and m.is_accepting()


@pytest.mark.parametrize("engine", ["cfg", "dfa"])
def test_layouts(engine):
    schema = SCHEMA if engine == "cfg" else {**SCHEMA, "properties": {k: v for k, v in SCHEMA["properties"].items()
                                                                      if k != "child"}}
    value = VALUE if engine == "cfg" else {k: v for k, v in VALUE.items() if k != "child"}
    dumps, compact = json.dumps(value), json.dumps(value, separators=(",", ":"))
    pretty = json.dumps(value, indent=2)
    g = {w: sg.Grammar.from_json_schema(schema, whitespace=w, engine=engine) for w in ("compact", "dumps", "flexible")}
    assert accepts(g["compact"], compact) and not accepts(g["compact"], dumps)
    assert accepts(g["dumps"], dumps) and not accepts(g["dumps"], compact) and not accepts(g["dumps"], pretty)
    assert all(accepts(g["flexible"], t) for t in (compact, dumps, pretty))


def test_dumps_forces_the_separator_space():
    vocab = load_vocab("llama3")
    g = sg.Grammar.from_json_schema({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
                                    whitespace="dumps")
    m = sg.compile(g, vocab).matcher()
    forced = vocab.decode(m.forced_tokens())
    assert forced and b'{"n": '.startswith(forced)

"""``formats="annotate"``: ``format`` constrains nothing anywhere in the schema, while data that
happens to be spelled ``format`` (a property name, a ``const`` value) is kept."""
import pytest

import structgen as sg
from structgen.frontends.json_schema.reader import without_keywords


def accepts(g, text: str) -> bool:
    m = sg.compile(g, sg.Vocabulary.from_bytes([bytes([c]) for c in range(256)] + [b""], eos_ids=[256])).matcher()
    return m.advance_bytes(text.encode()) and m.is_accepting()


SCHEMA = {"type": "object", "properties": {
    "format": {"const": {"format": "ipv4"}},
    "when": {"anyOf": [{"format": "date"}, {"type": "integer"}]},
    "host": {"items": {"format": "ipv4"}}}, "required": ["format"]}


def test_annotate_drops_format_keywords_only():
    out = without_keywords(SCHEMA, ("format",))
    assert out["properties"]["format"] == {"const": {"format": "ipv4"}}
    assert out["properties"]["when"] == {"anyOf": [{}, {"type": "integer"}]}
    assert out["properties"]["host"] == {"items": {}}
    assert SCHEMA["properties"]["when"]["anyOf"][0] == {"format": "date"}   # the input is not changed
    plain = {"type": "string"}
    assert without_keywords(plain, ("format",)) is plain


def test_annotate_and_assert_languages():
    text = '{"format":{"format":"ipv4"},"when":"yesterday","host":["x"]}'
    assert accepts(sg.Grammar.from_json_schema(SCHEMA, formats="annotate"), text)
    assert not accepts(sg.Grammar.from_json_schema(SCHEMA), text)
    ok = '{"format":{"format":"ipv4"},"when":"2020-01-31","host":["10.0.0.1"]}'
    assert accepts(sg.Grammar.from_json_schema(SCHEMA), ok)
    assert not accepts(sg.Grammar.from_json_schema(SCHEMA, formats="annotate"), '{"format":{"format":"x"}}')
    # format "regex" asserts ECMA-262 syntax, and is an annotation otherwise
    assert not accepts(sg.Grammar.from_json_schema({"type": "string", "format": "regex"}), '"(("')
    assert accepts(sg.Grammar.from_json_schema({"type": "string", "format": "regex"}, formats="annotate"), '"(("')


def test_bad_formats_value():
    with pytest.raises(sg.OptionError, match="formats"):
        sg.Grammar.from_json_schema({"type": "string"}, formats="ignore")

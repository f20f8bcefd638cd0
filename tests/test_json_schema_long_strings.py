"""Strings with a ``maxLength`` past ``max_string_length`` on the grammar engine: counted in
chunks by rules (exact), not capped.  Oracle: ``jsonschema`` on every length around the chunk
boundaries, with escapes and multi-byte code points in the text."""
import json
import random

import jsonschema
import numpy as np
import pytest

import structgen as sg
from tests.helpers import load_vocab


@pytest.fixture(scope="module")
def llama3():
    return load_vocab("llama3")


def accepts(cg, vocab, text: str) -> bool:
    m = cg.matcher()
    return all(m.advance(int(t)) for t in vocab.encode(text)) and m.is_accepting()


ALPHABET = ["a", "b", " ", "\n", '"', "\\", "é", "中", "😀", "/"]


@pytest.mark.parametrize("whitespace", ["compact", "flexible"])
@pytest.mark.parametrize("lo,hi", [(0, 23), (3, 12), (7, 10), (12, 17), (0, 5)])
def test_lengths_around_chunk_boundaries(llama3, whitespace, lo, hi):
    schema = {"type": "object", "properties": {"s": {"type": "string", "minLength": lo, "maxLength": hi}},
              "required": ["s"]}
    g = sg.Grammar.from_json_schema(schema, engine="cfg", whitespace=whitespace, max_string_length=5)
    assert g.report.exact and not g.report.truncated
    cg = sg.compile(g, llama3)
    rng = random.Random(lo * 100 + hi)
    seen = set()
    for n in range(0, hi + 7):
        for _ in range(2):
            value = {"s": "".join(rng.choice(ALPHABET) for _ in range(n))}
            text = json.dumps(value, separators=(",", ":")) if whitespace == "compact" else json.dumps(value)
            want = jsonschema.Draft202012Validator(schema).is_valid(value)
            assert accepts(cg, llama3, text) == want, (n, text)
            seen.add(want)
    assert seen == {True, False}


def test_long_max_length_is_exact_and_samples_validate(llama3):
    schema = {"type": "string", "minLength": 2, "maxLength": 40}
    g = sg.Grammar.from_json_schema(schema, engine="cfg", whitespace="compact", max_string_length=8)
    cg = sg.compile(g, llama3)
    assert accepts(cg, llama3, json.dumps("x" * 40)) and not accepts(cg, llama3, json.dumps("x" * 41))
    rng = np.random.default_rng(3)
    for _ in range(6):
        m = cg.matcher()
        out = []
        for _ in range(200):
            allowed = m.allowed_tokens()
            assert allowed.size
            t = int(rng.choice(allowed))
            assert m.advance(t)
            if m.is_terminated():
                break
            out.append(t)
        else:
            continue
        value = json.loads(llama3.decode(out))
        assert jsonschema.Draft202012Validator(schema).is_valid(value), value


def test_default_cap_no_longer_truncates(llama3):
    schema = {"type": "object", "properties": {"pem": {"type": "string", "maxLength": 32767, "minLength": 50}}}
    g = sg.Grammar.from_json_schema(schema, engine="cfg", whitespace="flexible")
    assert not g.report.truncated
    cg = sg.compile(g, llama3)
    pem = "-----BEGIN CERTIFICATE-----\n" + "MIIE" * 300 + "\n-----END CERTIFICATE-----\n"
    assert accepts(cg, llama3, json.dumps({"pem": pem}))
    assert not accepts(cg, llama3, json.dumps({"pem": "short"}))

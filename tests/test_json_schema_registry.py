"""Remote references through a registry (structgen.frontends.json_schema.registry): a
``referencing.Registry`` or a mapping, relative references inside remote resources, URN bases,
a clear error naming a missing URI, and never a retrieval; random remote resources checked
against jsonschema with the same registry, the mask against brute force at prefixes."""
from __future__ import annotations

import json
import random

import jsonschema
import pytest
import referencing
from referencing.jsonschema import DRAFT202012

import structgen as sg
from structgen.vocab import Vocabulary
from tests.test_json_schema_combine import _PIECES, accepts, rand_schema, rand_value


@pytest.fixture(scope="module")
def tiny_vocab():
    return Vocabulary.from_bytes(_PIECES + [b""], eos_ids=[len(_PIECES)])


def registry_of(resources: dict, retrieve=None):
    reg = referencing.Registry(retrieve=retrieve) if retrieve is not None else referencing.Registry()
    return reg.with_resources((uri, DRAFT202012.create_resource(s)) for uri, s in resources.items())


def check(schema, resources, values, vocab, brute=False, as_mapping=False):
    reg = registry_of(resources)
    g = sg.Grammar.from_json_schema(schema, registry=dict(resources) if as_mapping else reg,
                                    property_order="any")
    cg = sg.compile(g, vocab, cache=False)
    val = jsonschema.Draft202012Validator(schema, registry=reg)
    outcomes = []
    for v in values:
        ok = val.is_valid(v)
        outcomes.append(ok)
        assert accepts(cg, vocab, json.dumps(v, separators=(",", ":")), brute=brute) == ok, (schema, v)
    return outcomes


def test_remote_resources_with_relative_refs(tiny_vocab):
    resources = {
        "http://ex.test/a.json": {"type": "integer", "minimum": 0},
        "http://ex.test/dir/b.json": {"$defs": {"x": {"type": "object", "properties": {"a": {"$ref": "../a.json"}},
                                                      "required": ["a"]}}},
        "urn:uuid:feed": {"$defs": {"s": {"type": "string", "maxLength": 1}},
                          "anyOf": [{"$ref": "#/$defs/s"}, {"type": "null"}]},
    }
    schema = {"type": "object", "properties": {"b": {"$ref": "http://ex.test/dir/b.json#/$defs/x"},
                                               "c": {"$ref": "urn:uuid:feed"}}}
    values = [{"b": {"a": 1}}, {"b": {"a": -1}}, {"b": {}}, {"c": "x"}, {"c": "xy"}, {"c": None}, {"b": {"a": "s"}}]
    for as_mapping in (False, True):
        got = check(schema, resources, values, tiny_vocab, brute=True, as_mapping=as_mapping)
        assert set(got) == {True, False}


def test_base_uri_of_the_document_resolves_relative_remote_refs(tiny_vocab):
    resources = {"http://ex.test/lib/int.json": {"type": "integer"}}
    schema = {"$id": "http://ex.test/lib/main.json", "items": {"$ref": "int.json"}}
    assert check(schema, resources, [[1, 2], [1, "s"], []], tiny_vocab) == [True, False, True]


def test_missing_uri_is_named_and_nothing_is_fetched():
    calls = []

    def retrieve(uri):
        calls.append(uri)
        raise referencing.exceptions.NoSuchResource(ref=uri)

    schema = {"properties": {"a": {"$ref": "http://ex.test/missing.json"}}}
    for reg in (None, {}, registry_of({}, retrieve=retrieve)):
        with pytest.raises(sg.StructgenError) as e:
            sg.Grammar.from_json_schema(schema, registry=reg)
        assert "http://ex.test/missing.json" in str(e.value) and "/properties/a" in str(e.value)
    assert calls == []


def test_random_remote_resources_match_jsonschema(tiny_vocab):
    r = random.Random(424242)
    used = checked = 0
    for trial in range(60):
        resources = {"http://ex.test/r0.json": rand_schema(r, r.randrange(1, 3)),
                     "http://ex.test/sub/r1.json": {"$defs": {"d": rand_schema(r, 1)},
                                                    "anyOf": [{"$ref": "../r0.json"}, {"$ref": "#/$defs/d"}]}}
        schema = {"type": "object", "properties": {"a": {"$ref": "http://ex.test/r0.json"},
                                                   "b": {"$ref": "http://ex.test/sub/r1.json"}}}
        reg = registry_of(resources)
        try:
            g = sg.Grammar.from_json_schema(schema, registry=reg, property_order="any")
            cg = sg.compile(g, tiny_vocab, cache=False)
        except (sg.Unsupported, sg.LimitExceeded):
            continue
        val = jsonschema.Draft202012Validator(schema, registry=reg)
        for _ in range(20):
            v = {k: rand_value(r, 2) for k in r.sample(["a", "b", "c"], r.randrange(0, 3))}
            text = json.dumps(v, separators=(",", ":"))
            assert accepts(cg, tiny_vocab, text, r, brute=checked % 60 == 0) == val.is_valid(v), (resources, text)
            checked += 1
        used += 1
    assert used > 40 and checked > 800


def test_suite_remotes_compile():
    from structgen.bench.testsuite import run_suite

    res = run_suite(files=["draft2020-12/refRemote.json", "draft7/refRemote.json"])
    for f, r in res.items():
        assert r["compiled"] == r["cases"] and r["passed"] == r["tests"] and not r["invalid_accepted"], (f, r)

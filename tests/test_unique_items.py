"""uniqueItems over open item sets (structgen.runtime.unique_guard, frontends/json_schema/unique_items).

Oracles: ``jsonschema`` on every complete instance (duplicates spelled differently: ``1`` / ``1.0`` /
``10e-1``, escaped strings, reordered keys), ``advance`` on every token of a tiny vocabulary at every
prefix (the mask equals what advance takes), and sampling under the mask, every sample validated and
no dead end met.  Schemas are drawn by hypothesis: unique arrays at the root, inside properties,
inside items, through ``$ref`` and ``allOf``, over strings, numbers, objects, arrays and any value.
"""
from __future__ import annotations

import json
import random

import jsonschema
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import structgen as sg
from structgen.errors import Unsupported
from structgen.frontends.json_schema.reader import without_keywords
from structgen.runtime.unique_guard import UniqueItemsMatcher
from structgen.vocab import Vocabulary
from tests.helpers import brute_mask_check, cyclic_garbage, sample

_MULTI = [b'[1,1', b'1,1', b'"a"', b'true', b'},{', b'],[', b'1.0', b'e0', b'"a","a"', b'null,', b'{"a":1}',
          b',"b"', b'0]', b'[]', b'[[', b'"}', b'\\u0061', b'[1,1,', b'[true,true', b'ab', b'"ab', b',"ab',
          b'75', b',75', b'cd']


@pytest.fixture(scope="module")
def tiny():
    toks = [bytes([i]) for i in range(128)] + _MULTI
    return Vocabulary.from_bytes(toks + [b"</s>"], eos_ids=[len(toks)], special_ids=[len(toks)])


def _compile(schema, vocab, **opts):
    return sg.compile(sg.Grammar.from_json_schema(schema, **opts), vocab, cache=False)


def _ids(vocab, text: bytes):
    """``text`` as single-byte tokens of the tiny vocabulary."""
    return list(text)


def _accepts(cg, vocab, text: bytes) -> bool:
    m = cg.matcher()
    return m.advance_many(_ids(vocab, text)) == len(text) and m.is_accepting()


# ----------------------------------------------------------------------------- spellings
def _spell(v, rng) -> str:
    """A random JSON spelling of value ``v`` (numbers in several forms, strings with escapes,
    objects in a random key order)."""
    if v is None or isinstance(v, bool):
        return json.dumps(v)
    if isinstance(v, int) and v == 0:
        return rng.choice(["0", "0.0", "-0", "0e5", "-0.00E-2"])
    if isinstance(v, int):
        return rng.choice([str(v), f"{v}.0", f"{v}0e-1", f"{v}E0", f"{v}.00e+0"])
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, str):
        return '"' + "".join(f"\\u{ord(c):04x}" if rng.random() < 0.3 else
                             json.dumps(c)[1:-1] for c in v) + '"'
    if isinstance(v, list):
        return "[" + ",".join(_spell(x, rng) for x in v) + "]"
    keys = list(v)
    rng.shuffle(keys)
    return "{" + ",".join(json.dumps(k) + ":" + _spell(v[k], rng) for k in keys) + "}"


_leaf = st.one_of(st.none(), st.booleans(), st.integers(-3, 12), st.text("ab", max_size=2))
_value = st.recursive(_leaf, lambda c: st.one_of(st.lists(c, max_size=3),
                                                 st.dictionaries(st.sampled_from("ab"), c, max_size=2)),
                      max_leaves=5)


def test_canonical_equality_of_spellings(tiny):
    """Duplicates in other spellings are caught; distinct values that look alike are not."""
    cg = _compile({"type": "array", "uniqueItems": True}, tiny)
    assert isinstance(cg.matcher(), UniqueItemsMatcher)
    cases = {b'[1,1.0]': False, b'[1,10e-1]': False, b'[0,-0.0]': False, b'[0.05,5e-2]': False,
             b'[105,1.05e2]': False, b'[105,1.5e2]': True, b'[100,1e2]': False, b'[1,10]': True,
             b'[0.1,1]': True, b'["a","\\u0061"]': False, b'["\\ud83d\\ude00","\xf0\x9f\x98\x80"]': False,
             b'[{"a":1,"b":[2]},{"b":[2.0],"a":1}]': False, b'[{"a":1},{"a":1,"b":1}]': True,
             b'[[1,2],[2,1]]': True, b'[true,1]': True, b'[false,0]': True, b'[null,false]': True,
             b'[true,true]': False, b'[[],{}]': True, b'[[],[]]': False, b'[{},{}]': False, b'["",""]': False,
             b'[1e400,1e400]': False, b'[1e400,1e401]': True}
    for text, valid in cases.items():
        assert _accepts(cg, tiny, text) == valid, text
        if not text.startswith(b'[1e4'):  # Python's json reads both as inf
            assert jsonschema.Draft202012Validator({"uniqueItems": True}).is_valid(json.loads(text)) == valid, text


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(_value, min_size=1, max_size=4), st.integers(0, 2 ** 31), st.booleans())
def test_random_arrays_against_jsonschema(tiny_vocab, values, seed, dup):
    rng = random.Random(seed)
    if dup:
        values = values + [rng.choice(values)]
        rng.shuffle(values)
    text = ("[" + ",".join(_spell(v, rng) for v in values) + "]").encode()
    want = jsonschema.Draft202012Validator({"uniqueItems": True}).is_valid(json.loads(text))
    assert _accepts(tiny_vocab["any"], tiny_vocab["vocab"], text) == want, text


@pytest.fixture(scope="module")
def tiny_vocab(tiny):
    return {"vocab": tiny, "any": _compile({"type": "array", "uniqueItems": True}, tiny)}


# ----------------------------------------------------------------------------- schemas
_items = st.sampled_from([
    {"type": "string"}, {"type": "integer"}, {"type": "number"}, {},
    {"type": "object", "properties": {"a": {"type": "integer"}}, "additionalProperties": False},
    {"type": "array", "items": {"type": "integer"}},
    {"enum": [1, 2, 3, 4, 5, 6, 7, "a"]},
    {"type": "string", "maxLength": 1}, {"type": "integer", "minimum": 0, "maximum": 40},
])


@st.composite
def _schemas(draw):
    items = draw(_items)
    unique = {"type": "array", "items": items, "uniqueItems": True}
    if draw(st.booleans()):
        unique["maxItems"] = draw(st.integers(1, 4))
    shape = draw(st.sampled_from(["root", "property", "nested", "ref", "allOf", "prefix"]))
    if shape == "root":
        return unique
    if shape == "property":
        return {"type": "object", "properties": {"u": unique, "v": {"type": "array", "items": items}},
                "required": ["u"]}
    if shape == "nested":  # arrays of objects holding unique arrays, themselves not unique
        return {"type": "array", "items": {"type": "object", "properties": {"u": unique}, "required": ["u"]}}
    if shape == "ref":
        return {"$defs": {"u": unique}, "type": "object", "properties": {"x": {"$ref": "#/$defs/u"}},
                "additionalProperties": {"type": "array", "items": items}}
    if shape == "allOf":
        return {"allOf": [{"type": "array", "items": items}, {"uniqueItems": True}]}
    return {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "integer"}], "uniqueItems": True}


def _instances(schema, rng, n=12):
    """Candidate instances of ``schema``'s shape, valid or not (duplicates in other spellings)."""
    def leaf(items):
        t = items.get("type")
        if "enum" in items:
            return rng.choice(items["enum"])
        if t == "string":
            return rng.choice(["", "a", "b"] + ([] if "maxLength" in items else ["ab"]))
        if t in ("integer", "number"):
            return rng.choice([0, 1, 2, 10, 4, 40])
        if t == "object":
            return rng.choice([{}, {"a": 1}, {"a": 2}])
        if t == "array":
            return rng.choice([[], [1], [1, 2], [2, 1]])
        return rng.choice([None, True, 1, "a", [1], {"a": 1}])

    def arr(items, k):
        vals = [leaf(items) for _ in range(k)]
        return vals

    out = []
    for _ in range(n):
        k = rng.randint(0, 4)
        if "prefixItems" in schema:
            v = [rng.choice([0, 1, 2]) for _ in range(k)]
        elif "allOf" in schema:
            v = arr(schema["allOf"][0]["items"], k)
        elif schema.get("type") == "array" and "uniqueItems" in schema:
            v = arr(schema["items"], k)
        elif schema.get("type") == "array":
            items = schema["items"]["properties"]["u"]["items"]
            v = [{"u": arr(items, rng.randint(0, 3))} for _ in range(rng.randint(0, 2))]
        elif "$defs" in schema:
            items = schema["$defs"]["u"]["items"]
            v = {"x": arr(items, k), "y": arr(items, rng.randint(0, 3))}
        else:
            items = schema["properties"]["u"]["items"]
            v = {"u": arr(items, k), "v": arr(items, rng.randint(0, 3))}
        out.append(v)
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=list(HealthCheck))
@given(_schemas(), st.integers(0, 2 ** 31))
def test_schemas_against_jsonschema_and_masks_against_advance(tiny, schema, seed):
    """Every candidate instance is accepted exactly when jsonschema says it is valid; along every
    accepted prefix of the first few, the mask equals what advance takes (brute force over the
    tiny vocabulary)."""
    rng = random.Random(seed)
    cg = _compile(schema, tiny, property_order="any")  # instances spell members in any order
    # the grammar without uniqueItems: what the guard adds is judged on the texts it accepts
    # (the exact integer language has no exponent forms: ``20e-1`` is not taken for 2)
    base = _compile(without_keywords(schema, ("uniqueItems",)), tiny, property_order="any")
    assert base.grammar.report.unique_items is None
    validator = jsonschema.Draft202012Validator(schema)
    checked = 0
    for value in _instances(schema, rng):
        text = _spell(value, rng).encode()
        want = _accepts(base, tiny, text) and validator.is_valid(json.loads(text))
        assert _accepts(cg, tiny, text) == want, (schema, text)
        if checked < 2:
            checked += 1
            m = cg.matcher()
            for t in _ids(tiny, text):
                brute_mask_check(m, tiny)
                if not m.advance(t):
                    break


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(_schemas(), st.integers(0, 2 ** 31))
def test_sampling_is_valid_and_never_dead_ends(tiny, schema, seed):
    """Random-logit sampling under the mask: every finished sample validates, no mask is empty
    (open item sets)."""
    if "enum" in json.dumps(schema):
        return  # a finite item set past unique_items_limit can run out of distinct values (stated)
    rng = np.random.default_rng(seed)
    cg = _compile(schema, tiny)
    validator = jsonschema.Draft202012Validator(schema)
    bias = np.zeros(tiny.logits_width)
    for b in b']}",':
        bias[b] = 2.5
    bias[ord("\\")] = -4
    bias[tiny.eos_ids[0]] = 6
    for _ in range(3):
        m = cg.matcher()
        out = []
        for _ in range(400):
            allowed = m.allowed_tokens()
            assert allowed.size, f"dead end after {bytes(tiny.decode(out))!r} for {schema}"
            logits = rng.standard_normal(allowed.size) + bias[allowed]
            p = np.exp(logits - logits.max())
            t = int(rng.choice(allowed, p=p / p.sum()))
            assert m.advance(t)
            if m.is_terminated():
                text = tiny.decode(out)
                assert validator.is_valid(json.loads(text)), (schema, text)
                break
            out.append(t)


def test_multi_item_tokens_are_masked_exactly(tiny):
    """Tokens that complete several items at once (``1,1``, ``"a","a"``, ``[1,1`` opening a unique
    array the plan has not placed yet) are cleared exactly when advance refuses them."""
    schema = {"type": "object", "properties": {"u": {"type": "array", "uniqueItems": True}},
              "additionalProperties": {"type": "array"}}
    cg = _compile(schema, tiny)
    tok = {bytes(tiny.decode([i])): i for i in range(tiny.size) if tiny.is_normal[i]}
    for prefix, token, ok in [(b'{"u":', b'[1,1,', False), (b'{"w":', b'[1,1,', True), (b'{"u":', b'[1,1', True),
                              (b'{"u":', b'[true,true', False), (b'{"w":', b'[true,true', True),
                              (b'{"u":[', b'1,1', True), (b'{"u":[1,', b'1,1', False),
                              (b'{"u":["b",', b'"a","a"', False), (b'{"u":[', b'"a","a"', False),
                              (b'{"v":[', b'"a","a"', True), (b'{"u":["a",', b'"a"', False),
                              (b'{"u":[[2],[0', b'],[', True), (b'{"u":[[0],[0', b'],[', False),
                              (b'{"u":[null,', b'null,', False), (b'{"u":["\\u0061",', b'"a"', False)]:
        m = cg.matcher()
        assert m.advance_many(list(prefix)) == len(prefix), prefix
        t = tok[token]
        allowed = set(m.allowed_tokens().tolist())
        assert (t in allowed) == ok, (prefix, token)
        brute_mask_check(m, tiny)


def test_rollback_fork_restore_are_exact(tiny):
    cg = _compile({"type": "array", "items": {"type": "string"}, "uniqueItems": True}, tiny)
    m = cg.matcher()
    assert m.advance_bytes(b'["a",') and m.advance_bytes(b'"b",')
    snap = m.snapshot()
    f = m.fork()
    assert not m.advance_bytes(b'"a"') and m.advance_bytes(b'"c"')
    m.rollback(1)
    assert not m.advance_bytes(b'"a"') and m.advance_bytes(b'"d",')
    assert not f.advance_bytes(b'"a"') and f.advance_bytes(b'"d"]')
    m.rollback(2)  # below the snapshot: back at '["a",'
    assert not m.advance_bytes(b'"a"') and m.advance_bytes(b'"b",')
    m.restore(snap)  # on another branch: the item pool is replayed
    g = cg.matcher()
    assert g.advance_bytes(b'["a","b",')
    assert set(m.allowed_tokens().tolist()) == set(g.allowed_tokens().tolist())
    assert not m.advance_bytes(b'"b"') and m.advance_bytes(b'"e"]') and m.is_accepting()
    m.reset()
    assert m.advance_bytes(b'["a","a"') is False


def test_items_doomed_to_repeat_are_not_started(tiny):
    """Bounded item languages: a started item whose every completion is an earlier item is refused
    (a depth-first search under the inner masks proves it), in the mask and in advance alike."""
    ints = _compile({"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99}, "uniqueItems": True},
                    tiny, hygiene=True)
    m = ints.matcher()
    assert m.advance_many(list(b"[75,0,7")) == 7
    allowed = set(m.allowed_tokens().tolist())
    assert ord("5") not in allowed and ord("6") in allowed and ord(",") in allowed  # 75 is taken, 76 is not
    brute_mask_check(m, tiny)
    assert not m.advance(ord("5"))
    m.rollback(1)  # back to '[75,0,'
    assert ord("-") not in set(m.allowed_tokens().tolist())  # '-0' can only be 0 again
    brute_mask_check(m, tiny)
    one = _compile({"type": "array", "items": {"type": "string", "maxLength": 1}, "uniqueItems": True}, tiny)
    m = one.matcher()
    assert m.advance_many(list(b'["a","')) == 6
    allowed = set(m.allowed_tokens().tolist())
    assert ord("a") not in allowed and ord("b") in allowed and ord("\\") in allowed  # \\u0062 is fine
    brute_mask_check(m, tiny)
    # tokens of several bytes: inside the string, after it, and one that also starts the item
    two = _compile({"type": "array", "items": {"type": "string", "maxLength": 2}, "uniqueItems": True}, tiny)
    m = two.matcher()
    assert m.advance_many(list(b'["ab"')) == 5
    ids = {t: 128 + _MULTI.index(t) for t in (b'ab', b'"ab', b',"ab', b'cd', b',75')}
    assert ids[b',"ab'] not in set(m.allowed_tokens().tolist())  # would start '"ab', which can only end as "ab"
    brute_mask_check(m, tiny)
    assert m.advance(ord(",")) and m.advance(ord('"'))
    allowed = set(m.allowed_tokens().tolist())
    assert ids[b'ab'] not in allowed and ids[b'cd'] in allowed and ord("a") in allowed
    brute_mask_check(m, tiny)
    m = ints.matcher()
    assert m.advance_many(list(b"[75")) == 3
    assert ids[b',75'] not in set(m.allowed_tokens().tolist())  # 75 again, and 750 is over the maximum
    brute_mask_check(m, tiny)
    # an item spelled otherwise than the earlier one ('"\\u0061' after '"a"') is not searched: stated limit
    # open item sets need no search: their frames do not run it
    free = _compile({"type": "array", "items": {"type": "integer"}, "uniqueItems": True}, tiny)
    m = free.matcher()
    assert m.advance_many(list(b"[75,75")) == 6 and ord("0") in set(m.allowed_tokens().tolist())


def test_liveness_budget_is_not_spent_on_bytes_no_token_starts(tiny):
    """The tiny vocabulary has no one-byte tokens for bytes over 0x7f: the search must not pay a
    unit for each of them per candidate (it ran out after 3 earlier items, found by hypothesis:
    a dead end after '["{","b","}","r","}')."""
    one = _compile({"type": "array", "items": {"type": "string", "maxLength": 1}, "uniqueItems": True}, tiny)
    for items in ("{b}r", "abc}", "abcdefghijklmnopqrstuvwxyz0123456789!#$%"):
        text = ("[" + ",".join(json.dumps(c) for c in items) + ',"').encode()
        m = one.matcher()
        assert m.advance_many(list(text)) == len(text)
        allowed = set(m.allowed_tokens().tolist())
        assert not [c for c in items if ord(c) in allowed], items
        assert ord("Z") in allowed


def test_liveness_search_stops_in_a_string_that_grows_without_end(tiny, monkeypatch):
    """Closed objects are bounded items, so a key that spells an earlier item's is searched; the
    search stops, live, once it stands in a string value whose text can grow without end (its
    automaton state reaches a cycle): that item has infinitely many distinct completions.  Where
    the value is a bounded string the search goes on and the doomed key is refused (checked:
    taking every string value as endless lets it through)."""
    from structgen.runtime import unique_guard

    calls = []
    real = unique_guard.UniqueItemsMatcher._endless_string

    def spy(self, budget):
        calls.append(real(self, budget))
        return calls[-1]

    monkeypatch.setattr(unique_guard.UniqueItemsMatcher, "_endless_string", spy)
    for value, live in (({"type": "string"}, True), ({"enum": ["q"]}, False)):
        schema = {"type": "array", "uniqueItems": True, "items": {
            "type": "object", "properties": {"ab": value, "ac": {"type": "string"}}, "maxProperties": 1,
            "additionalProperties": False}}
        cg = _compile(schema, tiny)
        m = cg.matcher()
        text = b'[{"ab":"q"},{"a'
        assert m.advance_many(list(text)) == len(text)
        calls.clear()
        allowed = set(m.allowed_tokens().tolist())
        assert (ord("b") in allowed) == live and ord("c") in allowed, value
        assert any(c is True for c in calls) == live, value   # it ended in an endless string, or never met one
        brute_mask_check(m, tiny)


def test_the_plan_refuses_branch_dependent_uniqueness(tiny):
    """Under anyOf the arrays that must be unique depend on the branch: the compilers' error stays --
    unless the branches declare disjoint types (the value's type picks the branch)."""
    with pytest.raises(Unsupported, match="uniqueItems"):
        sg.Grammar.from_json_schema({"anyOf": [{"type": "array", "uniqueItems": True},
                                               {"type": "array", "maxItems": 1}]})
    via_ref = {"$defs": {"u": {"type": "array", "uniqueItems": True}},
               "anyOf": [{"$ref": "#/$defs/u"}, {"type": "array", "maxItems": 1}]}
    with pytest.raises(Unsupported, match="uniqueItems"):
        sg.Grammar.from_json_schema(via_ref)
    g = sg.Grammar.from_json_schema({"type": "array", "items": {"enum": [1, 2]}, "uniqueItems": True})
    assert g.report.unique_items is None  # a small finite item set: compiled exactly, no guard
    either = {"type": "object", "properties": {"tags": {"oneOf": [
        {"type": "string"}, {"$ref": "#/$defs/list"}, {"type": "object", "properties": {
            "more": {"type": "array", "uniqueItems": True}}}]}},
        "$defs": {"list": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}}
    cg = _compile(either, tiny)
    validator = jsonschema.Draft202012Validator(either)
    for text in [b'{"tags":"a"}', b'{"tags":["a","b"]}', b'{"tags":["a","a"]}', b'{"tags":{"more":[1,1]}}',
                 b'{"tags":{"more":[1,2]}}', b'{"tags":{"x":[1,1]}}']:
        assert _accepts(cg, tiny, text) == validator.is_valid(json.loads(text)), text
    # properties named like applicators ("dependencies", "not") are names, not conditionals
    named = {"type": "object", "properties": {
        "dependencies": {"type": "object", "properties": {"config": {"type": "array", "uniqueItems": True}}},
        "not": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}},
        "$defs": {"if": {"type": "array", "uniqueItems": True}}}
    cg = _compile(named, tiny)
    assert cg.grammar.report.unique_items is not None
    validator = jsonschema.Draft202012Validator(named)
    for text in [b'{"dependencies":{"config":[1,1]}}', b'{"dependencies":{"config":[1,[1]]}}',
                 b'{"not":["a","b","a"]}', b'{"not":["a","b"]}']:
        assert _accepts(cg, tiny, text) == validator.is_valid(json.loads(text)), text
    # an anyOf / oneOf of one branch always holds (jscsrc's {"type": [...], "oneOf": [{"$ref": ...}]})
    single = {"type": ["array", "null"], "oneOf": [{"$ref": "#/$defs/l"}],
              "$defs": {"l": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}}
    cg = _compile(single, tiny)
    validator = jsonschema.Draft202012Validator(single)
    for text in [b'["a","b","a"]', b'["a","b"]', b'null', b'[]']:
        assert _accepts(cg, tiny, text) == validator.is_valid(json.loads(text)), text
    # branches whose scalar types overlap: only one takes arrays, so it holds for every array
    overlap = {"oneOf": [{"type": ["array", "null"], "items": {"enum": list("abcdefghij")}, "uniqueItems": True},
                         {"type": "null"}, {"type": ["boolean", "string"]}]}
    cg = _compile(overlap, tiny)
    assert cg.grammar.report.unique_items is not None
    validator = jsonschema.Draft202012Validator(overlap)
    for text in [b'["a","b","a"]', b'["a","b"]', b'null', b'true', b'"x"']:
        assert _accepts(cg, tiny, text) == validator.is_valid(json.loads(text)), text
    two = {"anyOf": [{"type": "array", "uniqueItems": True}, {"type": ["array", "null"], "maxItems": 1}]}
    with pytest.raises(Unsupported, match="uniqueItems"):
        sg.Grammar.from_json_schema(two)  # two branches take arrays: still the compilers' error


def test_llama3_samples_validate():
    from tests.helpers import load_vocab

    vocab = load_vocab("llama3")
    schema = {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string", "maxLength": 3},
                                                        "minItems": 3, "maxItems": 6, "uniqueItems": True},
                                               "ids": {"type": "array",
                                                       "items": {"type": "integer", "minimum": 0, "maximum": 99},
                                                       "uniqueItems": True, "minItems": 2}},
              "required": ["tags", "ids"], "additionalProperties": False}
    cg = _compile(schema, vocab, hygiene=True)  # as generate() compiles it
    rng = np.random.default_rng(1)
    bias = np.zeros(vocab.logits_width)
    for t in range(vocab.size):
        b = bytes(vocab.decode([t]))
        if b.startswith((b'"', b",")) or b[:1].isdigit():
            bias[t] = 3
    bias[vocab.eos_ids] = 8
    validator = jsonschema.Draft202012Validator(schema)
    texts = [sample(cg, vocab, rng, bias, max_steps=200) for _ in range(8)]  # an empty mask fails there
    done = [t for t in texts if t is not None]
    for text in done:
        assert validator.is_valid(json.loads(text)), text
    assert len(done) >= 4


def test_low_bit_index_of_every_power_of_two():
    """The duplicate check's bit index (de Bruijn lookup) for each of the 32 bits."""
    import numpy as np

    from structgen.runtime.unique_guard import _low_bit

    assert [int(_low_bit(np.uint32(1) << np.uint32(i))) for i in range(32)] == list(range(32))


def test_the_liveness_search_leaves_no_reference_cycle(tiny):
    """A mask that runs the liveness search (a recursive search over bytes) leaves nothing for the
    garbage collector: the search was a closure holding the matcher, and each run left the matcher
    and its history in a cycle until a full collection -- which then paused a later mask."""
    one = _compile({"type": "array", "items": {"type": "string", "maxLength": 1}, "uniqueItems": True}, tiny)
    text = b'["a","b","'
    m = one.matcher()
    assert m.advance_many(list(text)) == len(text)
    m.allowed_tokens()  # first use

    def masks():
        for _ in range(3):
            m = one.matcher()
            assert m.advance_many(list(text)) == len(text)
            allowed = set(m.allowed_tokens().tolist())
            assert ord("a") not in allowed and ord("c") in allowed

    left = [type(o).__qualname__ for o in cyclic_garbage(masks)]
    assert not left, sorted(set(left))


def test_a_long_bounded_string_costs_the_endless_string_search_its_budget(tiny):
    """The endless-string question explores the string's automaton until it meets a cycle; on a
    long bounded string (an acyclic region of thousands of states) it is cut when the budget
    runs out -- answering None, which the liveness search takes as cut (allowed) -- and spends the
    budget; with room it answers "bounded" (False), and the memo keeps what it explored."""
    from structgen.runtime import unique_guard
    from structgen.runtime.dead_keys import cycle_memo

    schema = {"type": "array", "uniqueItems": True, "items": {"type": "string", "maxLength": 3000}}
    cg = _compile(schema, tiny)
    m = cg.matcher()
    assert m.advance_many(list(b'["a","a')) == 7
    trans = m.inner.byte_automaton()[0]
    cycle_memo(trans)[0][:] = -1     # forget what the masks on the way found
    budget = [4]
    assert m._endless_string(budget) is None and budget[0] <= 0
    budget = [10 ** 6]
    assert m._endless_string(budget) is False and budget[0] < 10 ** 6
    again = [5]
    assert m._endless_string(again) is False and again[0] == 5   # answered from the memo
    assert unique_guard.CYCLE_STATES * 4 < 3000
    brute_mask_check(m, tiny)

"""property_order="any": object members in any order, each key at most once, on both engines.

Oracles: ``jsonschema`` (draft 2020-12) plus a duplicate-key check (``json.loads`` with an
``object_pairs_hook``) for acceptance; per-token ``advance`` + ``rollback`` for every mask bit
(brute force over a tiny vocabulary whose tokens straddle keys, quotes and separators -- one token
even completes two keys); ``json.loads`` + ``jsonschema`` for outputs sampled under the mask.
"""
import itertools
import json
import random

import jsonschema
import numpy as np
import pytest
import torch

import structgen as sg
from structgen.vocab import Vocabulary
from tests.helpers import brute_mask_check, load_tokenizer, load_vocab, sample, structure_bias

ENGINES = ["dfa", "cfg"]
INT = {"type": "integer"}
SHORT = {"type": "string", "maxLength": 3}
BOOL = {"type": "boolean"}

# name -> (schema, valid instances); every permutation (or a sample) of every instance is valid
CASES = {
    "closed": ({"type": "object", "properties": {"a": INT, "b": SHORT, "c": BOOL, "d": {"enum": ["x", "y"]}},
                "required": ["a", "c"], "additionalProperties": False},
               [{"a": 1, "b": "hi", "c": True, "d": "x"}, {"c": False, "a": -3}]),
    "open": ({"type": "object", "properties": {"a": INT, "b": SHORT, "c": BOOL}, "required": ["a", "c"]},
             [{"a": 1, "c": False, "zz": [1, {"q": None}], "b": "é"}, {"c": True, "a": 0, "é": 1}]),
    "addl_schema": ({"type": "object", "properties": {"a": SHORT, "b": BOOL}, "required": ["b"],
                     "additionalProperties": INT},
                    [{"a": "s", "b": True, "x": 1, "y": 2}, {"b": False}]),
    "pattern": ({"type": "object", "properties": {"name": SHORT}, "patternProperties": {"^x_": INT},
                 "additionalProperties": False, "required": ["name"]},
                [{"name": "n", "x_1": 1, "x_2": 2}]),
    "minmax": ({"type": "object", "properties": {"a": INT, "b": INT, "c": INT}, "additionalProperties": BOOL,
                "minProperties": 2, "maxProperties": 3},
               [{"a": 1, "z": True}, {"c": 1, "a": 2, "b": 3}]),
    "nested": ({"type": "object", "required": ["inner"], "properties": {
                   "inner": {"type": "object", "properties": {"a": INT, "b": INT}, "required": ["a"],
                             "additionalProperties": False},
                   "a": INT,
                   "list": {"type": "array", "items": {"type": "object", "properties": {"k": INT, "v": INT},
                                                         "required": ["k", "v"]}}}},
               [{"a": 1, "inner": {"b": 2, "a": 1}, "list": [{"v": 1, "k": 2}, {"k": 3, "v": 4}]}]),
    "wide": ({"type": "object", "properties": {f"p{i:02d}": INT for i in range(32)}},
             [{f"p{i:02d}": i for i in range(32)}, {"p31": 1, "p00": 2, "other": "x"}]),
    "deps": ({"type": "object", "properties": {"a": INT, "b": INT, "c": INT}, "dependentRequired": {"a": ["b"]},
              "additionalProperties": False},
             [{"b": 1, "a": 2}, {"c": 1, "b": 2}]),
    # complements of object languages (declared order made these inexact: Unsupported)
    "not": ({"not": {"type": "object", "properties": {"a": INT, "b": INT}, "required": ["a", "b"]}},
            [{"a": "x", "b": 1}, {"b": 1, "c": 2}]),
    "oneOf": ({"oneOf": [{"type": "object", "properties": {"a": INT, "c": BOOL}, "required": ["a"]},
                         {"type": "object", "properties": {"b": INT, "c": BOOL}, "required": ["b"]}]},
              [{"c": True, "a": 1}, {"b": 2, "c": False, "z": None}]),
}


def _no_dups(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise ValueError(f"duplicate keys {keys}")
    return dict(pairs)


def oracle(schema, text) -> bool:
    """Valid JSON without duplicate keys that validates under ``schema``."""
    try:
        value = json.loads(text, object_pairs_hook=_no_dups)
    except ValueError:
        return False
    return jsonschema.Draft202012Validator(schema).is_valid(value)


def shuffled(value, rng):
    """``value`` with the keys of every object in a random order."""
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {k: shuffled(v, rng) for k, v in items}
    if isinstance(value, list):
        return [shuffled(x, rng) for x in value]
    return value


def texts(value):
    return [json.dumps(value), json.dumps(value, separators=(",", ":")),
            json.dumps(value, ensure_ascii=False)]


def orders(obj, rng, n=24):
    """All key orders of ``obj`` (at most 4 keys), else ``n`` random ones; nested objects shuffled."""
    items = list(obj.items())
    if len(items) <= 4:
        perms = list(itertools.permutations(items))
    else:
        perms = [tuple(items), tuple(reversed(items))] + [tuple(rng.sample(items, len(items))) for _ in range(n)]
    return [shuffled(dict(p), rng) if i else dict(p) for i, p in enumerate(perms)]


def invalid_variants(obj, schema):
    """Texts built from a valid instance that must be rejected: a member twice (also with the
    key escaped differently), a required key missing."""
    items = [(json.dumps(k), json.dumps(v)) for k, v in obj.items()]
    out = []
    if items:
        k0, v0 = items[0]
        out.append("{" + ", ".join(f"{k}: {v}" for k, v in items + [(k0, v0)]) + "}")
        out.append("{" + ", ".join(f"{k}: {v}" for k, v in [(k0, v0)] + items) + "}")
        key = next(iter(obj))
        if any(ord(c) > 127 for c in key):  # the same key, raw and \\u-escaped
            out.append("{" + ", ".join(f"{k}: {v}" for k, v in items) + f", {json.dumps(key)}: {v0}" + "}")
            out.append("{" + f"{json.dumps(key, ensure_ascii=False)}: {v0}, "
                       + ", ".join(f"{k}: {v}" for k, v in items) + "}")
    for r in schema.get("required", []):
        if r in obj:
            out.append(json.dumps({k: v for k, v in obj.items() if k != r}))
    return out


@pytest.fixture(scope="module")
def llama3():
    return load_vocab("llama3")


_COMPILED = {}


FREE = {"type": "object", "properties": {"v": {}}}


def compiled(name, engine, vocab):
    key = (name, engine, vocab.fingerprint)
    if key not in _COMPILED:
        schema = FREE if name == "free" else CASES[name][0]
        g = sg.Grammar.from_json_schema(schema, engine=engine, whitespace="flexible", property_order="any")
        _COMPILED[key] = sg.compile(g, vocab)
    return _COMPILED[key]


def force(cg, vocab, tokens) -> bool:
    """Feed ``tokens``; every mask bit of a fed token must agree with ``advance``.  Accepted
    when every token advances and EOS is then allowed and accepted."""
    m = cg.matcher()
    eos = int(vocab.eos_ids[0])
    for t in list(tokens) + [eos]:
        words = m.mask_words()
        in_mask = bool(words[t >> 5] >> np.uint32(t & 31) & 1)
        ok = m.advance(int(t))
        assert in_mask == ok, (vocab.decode(list(tokens)), t)
        if not ok:
            return False
    return m.is_terminated()


# ----------------------------------------------------------------------------- acceptance
@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("name", list(CASES))
def test_permutations_accepted_invalid_rejected(name, engine, llama3):
    schema, instances = CASES[name]
    cg = compiled(name, engine, llama3)
    assert cg.grammar.report.unique_keys
    rng = random.Random(hash((name, engine)) & 0xFFFF)
    checked = 0
    for inst in instances:
        for value in orders(inst, rng, n=6 if engine == "dfa" and name == "wide" else 12):
            for text in texts(value):
                assert oracle(schema, text), text
                assert force(cg, llama3, llama3.encode(text)), (name, engine, text)
                checked += 1
        for text in invalid_variants(inst, schema):
            expect = oracle(schema, text)
            assert not expect or "\\u" in text, text
            assert force(cg, llama3, llama3.encode(text)) == expect, (name, engine, text)
    assert checked >= 6


@pytest.mark.parametrize("engine", ENGINES)
def test_random_objects_against_jsonschema(engine, llama3):
    """Random objects over the declared keys (subsets, repeats, extra keys, wrong types) of two
    schemas: acceptance == the oracle."""
    rng = random.Random(7)
    for name in ("closed", "minmax", "deps", "pattern", "not", "oneOf"):
        schema = CASES[name][0]
        cg = compiled(name, engine, llama3)
        keys = sorted(set(schema.get("properties", {})) | {"a", "b", "c", "x_1", "zz"})
        vals = [1, "ab", True, None, "x"]
        agree = 0
        for _ in range(40):
            pairs = [(rng.choice(keys), rng.choice(vals)) for _ in range(rng.randint(0, 4))]
            text = "{" + ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in pairs) + "}"
            assert force(cg, llama3, llama3.encode(text)) == oracle(schema, text), (name, engine, text)
            agree += 1
        assert agree == 40


def test_declared_order_unchanged_by_default(llama3):
    schema = CASES["closed"][0]
    g = sg.Grammar.from_json_schema(schema, engine="cfg", whitespace="flexible")
    assert not g.report.unique_keys
    cg = sg.compile(g, llama3)
    assert type(cg.matcher()).__name__ != "KeyGuardMatcher"
    assert force(cg, llama3, llama3.encode('{"a": 1, "c": true}'))
    assert not force(cg, llama3, llama3.encode('{"c": true, "a": 1}'))


@pytest.mark.parametrize("engine", ENGINES)
def test_free_form_values_have_no_duplicate_keys(engine, llama3):
    cg = compiled("free", engine, llama3)
    assert force(cg, llama3, llama3.encode('{"v": {"a": {"a": 1}, "b": [{"a": 1, "b": 2}]}}'))
    assert not force(cg, llama3, llama3.encode('{"v": {"a": 1, "b": 2, "a": 3}}'))
    assert not force(cg, llama3, llama3.encode('{"v": [{"k": 1, "k": 1}]}'))
    assert not force(cg, llama3, llama3.encode('{"v": {"é": 1, "\\u00e9": 2}}'))


@pytest.mark.parametrize("engine", ENGINES)
def test_large_closed_object_takes_any_order_with_live_keys(engine, llama3):
    """Past the subset limit a closed object repeats its members; the guard checks liveness."""
    schema = {"type": "object", "properties": {f"k{i:02d}": INT for i in range(14)}, "additionalProperties": False,
              "required": ["k03"]}
    g = sg.Grammar.from_json_schema(schema, engine=engine, property_order="any", any_order_limit=1024,
                                    whitespace="dumps")
    assert g.report.live_keys and not g.report.notes
    cg = sg.compile(g, llama3)
    rng = random.Random(4)
    full = {f"k{i:02d}": i for i in range(14)}
    for value in [{"k03": 1, "k05": 2}, {"k05": 2, "k03": 1}, full, dict(rng.sample(list(full.items()), 14))]:
        assert force(cg, llama3, llama3.encode(json.dumps(value))), value
    assert not force(cg, llama3, llama3.encode('{"k05": 2, "k03": 1, "k05": 3}'))
    assert not force(cg, llama3, llama3.encode('{"k05": 2}'))  # k03 is required
    assert not force(cg, llama3, llama3.encode('{"k03": 2, "k99": 1}'))
    m = cg.matcher()  # every key used: no comma, only the end of the object
    assert m.advance_many(llama3.encode(json.dumps(full)[:-1])) > 0
    assert all(b"," not in llama3.token_bytes(t) for t in m.allowed_tokens().tolist() if llama3.is_normal[t])
    small = {"type": "object", "properties": {f"k{i:02d}": INT for i in range(5)}, "additionalProperties": False}
    g = sg.Grammar.from_json_schema(small, engine=engine, property_order="any", whitespace="dumps")
    assert not g.report.notes and not g.report.live_keys
    assert force(sg.compile(g, llama3), llama3, llama3.encode(json.dumps({"k04": 2, "k00": 1, "k02": 3})))


# ----------------------------------------------------------------------------- a tiny vocabulary
_PIECES = [bytes([b]) for b in range(256)] + [
    b'{"', b'"}', b'", "', b'": ', b'":', b'","', b'"a"', b'"a":1,"a"', b'a":1,"a"', b'":1,"', b', "', b'1,"',
    b'"b', b'"c":', b'true', b'false', b'\\u00', b'\\u0061', b'"x_', b'p0', b'"p', b'\\"', b'}, {"', b'"}]',
    b'{"a":1}', b'"a":1', b'"a": 1, "a', b'", "c": ', b'e9', b'\xc3\xa9', b'"\xc3\xa9"', b'"\\u00e9":', b'k":',
    b' "', b'"]', b'", "b": "', b'"v": {"', b'"na', b'na', b'me', b'"nap"', b'", "n', b'"ver', b'1, "n', b'"name":']


@pytest.fixture(scope="module")
def tiny():
    return Vocabulary.from_bytes(_PIECES + [b""], eos_ids=[len(_PIECES)])


def tokenize_randomly(vocab, text: str, rng) -> list:
    """A random segmentation of ``text`` into tokens of ``vocab`` (every byte is a token)."""
    data = text.encode("utf-8")
    by_first: dict = {}
    for i, p in enumerate(_PIECES):
        by_first.setdefault(p[0], []).append((p, i))
    out, pos = [], 0
    while pos < len(data):
        fits = [(p, i) for p, i in by_first[data[pos]] if data.startswith(p, pos)]
        p, i = rng.choice(fits) if rng.random() < 0.7 else min(fits, key=lambda x: len(x[0]))
        out.append(i)
        pos += len(p)
    return out


@pytest.mark.parametrize("engine", ENGINES)
def test_mask_equals_advance_brute_force(engine, tiny):
    rng = random.Random(3)
    cases = [("open", '{"c": true, "a": 1, "\\u00e9": 2}'), ("closed", '{"c": false, "b": "x", "a": 1}'),
             ("nested", '{"inner": {"b": 2, "a": 1}, "a": 1}'),
             ("free", '{"v": {"a": 1, "é": {"a": 2}, "b": 3}}')]
    for name, text in cases:
        cg = compiled(name, engine, tiny)
        toks = tokenize_randomly(tiny, text, rng)
        m = cg.matcher()
        for t in toks:
            brute_mask_check(m, tiny)
            assert m.advance(t), (name, text, _PIECES[t])
        brute_mask_check(m, tiny)
        assert m.is_accepting()
        # a duplicate within one token: '"a":1,"a"' after '{' completes "a" twice
        if name == "open":
            m = cg.matcher()
            assert m.advance(_PIECES.index(b"{"))
            dup = _PIECES.index(b'"a":1,"a"')
            assert not m.advance(dup)
            assert dup not in set(m.allowed_tokens().tolist())


@pytest.mark.parametrize("engine", ENGINES)
def test_no_dead_end_after_used_keys(engine, tiny):
    """After some keys are used, every allowed token leaves a non-empty mask (the grammar never
    offers a closed object's used key; open objects always have a fresh key to finish with)."""
    rng = random.Random(9)
    for name, prefix in (("closed", '{"a": 1, "c": true, "d": "x", '), ("open", '{"a": 1, "c": true, '),
                         ("pattern", '{"x_1": 1, "name": "n", '), ("deps", '{"b": 1, ')):
        cg = compiled(name, engine, tiny)
        m = cg.matcher()
        assert m.advance_many(tokenize_randomly(tiny, prefix, rng)) > 0
        m = cg.matcher()
        toks = tokenize_randomly(tiny, prefix, rng)
        assert m.advance_many(toks) == len(toks)
        frontier = [m]
        for depth in range(3):
            nxt = []
            for mm in frontier:
                allowed = mm.allowed_tokens().tolist()
                assert allowed, (name, engine, depth)
                for t in rng.sample(allowed, min(12, len(allowed))):
                    f = mm.fork()
                    assert f.advance(t)
                    if not f.is_terminated():
                        assert f.allowed_tokens().size, (name, engine, tiny.decode(toks + [t]))
                        nxt.append(f)
            frontier = rng.sample(nxt, min(6, len(nxt)))


NAMES = ({"type": "object", "properties": {"name": INT, "nap": INT, "version": INT, "a": {"type": "object",
          "properties": {"name": INT, "nb": INT}, "additionalProperties": False}}, "additionalProperties": False},
          [{"nap": 1, "version": 2, "name": 3, "a": {"nb": 1, "name": 2}}, {"name": 1, "a": {"name": 1}, "nap": 2}])
LIVE_CASES = {"names": NAMES, **{k: CASES[k] for k in ("closed", "pattern", "deps", "nested")}}


@pytest.mark.parametrize("engine", ENGINES)
def test_live_keys_masks_equal_the_subset_grammars(engine, tiny, monkeypatch):
    """A closed object forced past the subset limit (``any_order_limit=1``: repeated members,
    ``live_keys``) has, at every prefix, exactly the mask of the subset grammar, whose own
    states never offer a used key -- and each bit agrees with ``advance``.  Without the liveness
    check the masks differ (the test can fail)."""
    rng = random.Random(21)
    differ = 0
    for name, (schema, instances) in LIVE_CASES.items():
        grammars = {}
        for limit in (1024, 1):
            g = sg.Grammar.from_json_schema(schema, engine=engine, whitespace="flexible", property_order="any",
                                            any_order_limit=limit)
            grammars[limit] = sg.compile(g, tiny)
        assert grammars[1].grammar.report.live_keys and not grammars[1024].grammar.report.live_keys, name
        for inst in instances:
            for value in orders(inst, rng, n=3)[:4]:
                toks = tokenize_randomly(tiny, json.dumps(value), rng)
                ref, live = grammars[1024].matcher(), grammars[1].matcher()
                blind = grammars[1].matcher()
                blind.live_keys = False
                for i, t in enumerate(toks):
                    want = set(ref.allowed_tokens().tolist())
                    assert set(live.allowed_tokens().tolist()) == want, (name, engine, tiny.decode(toks[:i]))
                    differ += set(blind.allowed_tokens().tolist()) != want
                    brute_mask_check(live, tiny)
                    assert ref.advance(t) and live.advance(t) and blind.advance(t)
                assert live.is_accepting()
    assert differ > 0


@pytest.mark.parametrize("engine", ENGINES)
def test_live_keys_rollback_and_fork_are_exact(engine, tiny):
    """The liveness memo survives rollback and fork: masks after rolling back (and in a fork)
    equal the masks first computed at those positions, and those of a fresh matcher replaying
    the same tokens."""
    schema = NAMES[0]
    g = sg.Grammar.from_json_schema(schema, engine=engine, whitespace="flexible", property_order="any",
                                    any_order_limit=1)
    cg = sg.compile(g, tiny)
    rng = random.Random(8)
    text = json.dumps({"nap": 1, "version": 2, "a": {"nb": 1, "name": 2}, "name": 3})
    toks = tokenize_randomly(tiny, text, rng)
    m = cg.matcher()
    masks = [m.mask_words().copy()]
    for t in toks:
        assert m.advance(t)
        masks.append(m.mask_words().copy())
    for k in range(len(toks), 0, -3):
        m.rollback(min(3, k))
        k2 = k - min(3, k)
        assert np.array_equal(m.mask_words(), masks[k2]), k2
        f = m.fork()
        assert f.advance_many(toks[k2:]) == len(toks) - k2
        assert np.array_equal(f.mask_words(), masks[-1])
        fresh = cg.matcher()
        assert fresh.advance_many(toks[:k2]) == k2
        assert np.array_equal(fresh.mask_words(), masks[k2])
        assert m.advance_many(toks[k2:k]) == k - k2  # back where the loop expects
        m.rollback(k - k2)
    # roll back into an object and go on differently: the key-pool slots are reused for other keys
    paths = ['{"nap": 1, "a": {"nb": 1, "name": 2}, "version": 2, "name": 3}',
             '{"nap": 1, "a": {"nb": 1}, "name": 2, "version": 3}',
             '{"nap": 1, "version": 2, "a": {"name": 1, "nb": 2}, "name": 3}']
    for a in paths:
        for c in paths:
            if a == c:
                continue
            common = 0
            while common < min(len(a), len(c)) and a[common] == c[common]:
                common += 1
            head = tokenize_randomly(tiny, a[:common], rng)
            m = cg.matcher()
            assert m.advance_many(head + tokenize_randomly(tiny, a[common:], rng)) > len(head)
            m.rollback(m.accepted_tokens() - len(head))
            fresh = cg.matcher()
            assert fresh.advance_many(head) == len(head)
            for t in tokenize_randomly(tiny, c[common:], rng):
                assert np.array_equal(m.mask_words(), fresh.mask_words()), (a, c)
                assert m.advance(t) and fresh.advance(t)
            assert np.array_equal(m.mask_words(), fresh.mask_words()), (a, c)


class _Forgetful(dict):
    """A memo that keeps nothing."""

    def __setitem__(self, key, value):
        pass


class _Counting(dict):
    """A memo that counts the lookups it answers."""

    hits = 0

    def get(self, key, default=None):
        hit = super().get(key, default)
        self.hits += hit is not default
        return hit


def test_live_keys_memos_change_no_mask(llama3):
    """The landing checks' verdicts (under the key-opening states, and under the leads' keys) and
    the grammar's key-opening probes are kept (they repeat after every token of a string value);
    masks with the memos equal masks recomputed each
    time, at every token of instances that use every key, also after rolling back into an
    object and going on with other keys.  Dropping the used keys from the verdicts' key makes
    this test fail."""
    props = {f"k{i:02d}_{w}": {"type": ["string", "null"], "maxLength": 40}
             for i, w in enumerate(("alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta", "iota", "kappa"))}
    schema = {"type": "object", "properties": props, "additionalProperties": False}
    g = sg.Grammar.from_json_schema(schema, whitespace="flexible", property_order="any", any_order_limit=1)
    assert g.report.live_keys
    cg = sg.compile(g, llama3, cache=False)
    names = list(props)
    rng = random.Random(5)
    docs = []
    for _ in range(3):
        keys = rng.sample(names, len(names))  # all of them: the last value ends the object
        docs.append(json.dumps({k: ("value of " + k + " " * rng.randrange(3)) * 2 for k in keys}))
    m, blind = cg.matcher(), cg.matcher()
    m._live._verdicts = verdicts = _Counting()
    m._live._lead_verdicts = by_leads = _Counting()
    m.inner._probes = probes = _Counting()
    blind._live._verdicts = _Forgetful()
    blind._live._lead_verdicts = _Forgetful()
    blind.inner._probes = _Forgetful()
    for doc, other in zip(docs, docs[1:] + docs[:1]):
        m.reset()
        blind.reset()
        toks = llama3.encode(doc)
        # then back into the object, going on with the keys and values of another instance
        cut = doc.index(",", len(doc) // 2) + 1
        head = llama3.encode(doc[:cut])
        for part in (toks, llama3.encode(other[other.index(",", len(other) // 3) + 1:])):
            for i, t in enumerate(part):
                assert np.array_equal(m.mask_words(), blind.mask_words()), (doc, i)
                if not m.advance(t):  # another instance's key already used here: its end differs
                    break
                assert blind.advance(t)
            m.rollback(m.accepted_tokens() - len(head))
            blind.rollback(blind.accepted_tokens() - len(head))
    # the memos were used (the leads' keys answer first where they can)
    assert verdicts.hits > 10 and probes.hits > 100 and by_leads.hits > 100, (verdicts.hits, probes.hits, by_leads.hits)


@pytest.mark.parametrize("engine", ENGINES)
def test_live_keys_sampling_never_dead_ends(engine, tiny, llama3):
    """Sampling under the mask of closed objects past the subset limit ends in valid JSON
    without duplicates, and never meets an empty mask (``sample`` asserts it)."""
    rng = np.random.default_rng(17)
    done = 0
    for vocab, strength in ((tiny, 2.0), (llama3, 3.0)):
        bias = structure_bias(vocab, strength)
        for name in ("names", "closed", "nested", "deps"):
            schema = LIVE_CASES[name][0]
            g = sg.Grammar.from_json_schema(schema, engine=engine, whitespace="flexible", property_order="any",
                                            any_order_limit=1)
            cg = sg.compile(g, vocab)
            for _ in range(4 if vocab is tiny else 2):
                text = sample(cg, vocab, rng, bias)
                if text is not None:
                    assert oracle(schema, text), (name, engine, text)
                    done += 1
    assert done >= 16


@pytest.mark.parametrize("engine", ENGINES)
def test_rollback_fork_reset_are_exact(engine, tiny):
    cg = compiled("open", engine, tiny)
    rng = random.Random(5)
    toks = tokenize_randomly(tiny, '{"a": 1, "b": "ab", "zz": {"a": [1, {"q": 2}]}, "c": true}', rng)
    m = cg.matcher()
    masks = [m.mask_words().copy()]
    for t in toks:
        assert m.advance(t)
        masks.append(m.mask_words().copy())
    assert m.advance(int(tiny.eos_ids[0])) and m.is_terminated()
    m.rollback(1)
    for k in range(len(toks), 0, -1):
        assert np.array_equal(m.mask_words(), masks[k])
        if k == len(toks) // 2:
            f = m.fork()
            assert f.advance_many(toks[k:]) == len(toks) - k and f.is_accepting()
            assert np.array_equal(m.mask_words(), masks[k])
        m.rollback(1)
    assert np.array_equal(m.mask_words(), masks[0])
    assert m.validate(toks) == len(toks)
    assert m.advance_many(toks) == len(toks)
    m.reset()
    assert np.array_equal(m.mask_words(), masks[0])
    with pytest.raises(ValueError):
        m.rollback(1)


@pytest.mark.parametrize("engine", ENGINES)
def test_sampling_yields_valid_json_without_duplicates(engine, tiny, llama3):
    rng = np.random.default_rng(11)
    done = 0
    for vocab, strength, names in ((tiny, 4.0, ["closed", "open", "pattern", "minmax", "deps", "nested"]),
                                   (llama3, 6.0, ["closed", "addl_schema", "wide"])):
        bias = structure_bias(vocab, strength)
        for name in names:
            schema = CASES[name][0]
            cg = compiled(name, engine, vocab)
            for _ in range(3 if vocab is tiny else 2):
                text = sample(cg, vocab, rng, bias)
                if text is None:
                    continue
                assert oracle(schema, text), (name, engine, text)
                done += 1
    assert done >= 12


# ----------------------------------------------------------------------------- the layers above
def test_pydantic_generate_and_logits_processor(llama3):
    from pydantic import BaseModel

    from structgen.integrations.transformers import StructgenLogitsProcessor
    from tests.test_api import tiny_llama

    class Item(BaseModel):
        name: str
        count: int
        flag: bool = False

    g = sg.Grammar.from_pydantic(Item, property_order="any", whitespace="dumps")
    assert g.report.unique_keys
    cg = sg.compile(g, llama3)
    assert force(cg, llama3, llama3.encode('{"count": 2, "name": "x"}'))
    assert not force(cg, llama3, llama3.encode('{"count": 2, "name": "x", "count": 3}'))

    # the transformers processor masks a duplicate key
    proc = StructgenLogitsProcessor(cg, prompt_length=1)
    prefix = llama3.encode('{"count": 2, ')
    ids = torch.tensor([[0] + prefix])
    scores = proc(ids, torch.zeros(1, llama3.logits_width))
    dup = llama3.encode('"count"')[0]
    again = cg.matcher()
    assert again.advance_many(prefix) == len(prefix)
    allowed = set(again.allowed_tokens().tolist())
    assert torch.isfinite(scores[0]).nonzero().flatten().tolist() == sorted(allowed)
    if llama3.token_bytes(dup) == b'"count"':
        assert dup not in allowed

    # generate() end to end with a random model; the option also as a Generator default and on @function
    tok = load_tokenizer("llama3")
    torch.manual_seed(0)
    model = tiny_llama(llama3.logits_width, layers=1)
    c = sg.Generator(model, tok, vocab=llama3, property_order="any").constraint(schema=Item)
    assert c.grammar.report.unique_keys
    assert not sg.Generator(model, tok, vocab=llama3).constraint(schema=Item).grammar.report.unique_keys

    @sg.function(model=model, tokenizer=tok, property_order="any")
    def make(text: str) -> Item:
        """Item from {text}"""

    assert make.constraint.grammar.report.unique_keys
    gen = sg.Generator(model, tok, vocab=llama3)
    r = gen.generate("Item:", schema=Item, property_order="any", max_new_tokens=60, temperature=1.0, seed=1)
    assert r.text.startswith("{")
    if r.complete:
        json.loads(r.text, object_pairs_hook=_no_dups)


def test_cli_compile_reports_any_order(tmp_path, capsys):
    from structgen.cli import main

    path = tmp_path / "s.json"
    path.write_text(json.dumps({"type": "object", "properties": {f"k{i}": INT for i in range(12)},
                                "additionalProperties": False}))
    assert main(["compile", "--schema", str(path), "--any-order", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["property_order"] == "any"
    assert report["live_keys"] and not report["notes"]  # 2^12 key subsets: repeated, with the liveness check


def test_combined_objects_check_key_liveness(llama3):
    """Property counts over declared members compile through the combiner, members in any order
    under the key guard: its liveness check must refuse a key prefix that only a used key
    completes.  (JSONSchemaBench's sp_315 reached ``{"id":"","id`` and then an empty mask.)"""
    schema = {"type": "object", "additionalProperties": False, "minProperties": 1,
              "properties": {"id": {"type": "string"}, "name": {"type": "string"}}}
    g = sg.Grammar.from_json_schema(schema, engine="cfg", whitespace="compact")
    assert g.report.unique_keys and g.report.live_keys
    cg = sg.compile(g, llama3)
    m = cg.matcher()
    assert m.advance_many(llama3.encode('{"id":"","')) > 0
    allowed = [llama3.token_bytes(t) for t in m.allowed_tokens().tolist() if llama3.is_normal[t]]
    assert allowed and all(b.startswith(b"n") for b in allowed), allowed[:10]
    assert force(cg, llama3, llama3.encode('{"name":"x","id":"y"}'))
    rng = random.Random(11)
    for _ in range(30):   # random walks under the mask never reach an empty mask
        w = cg.matcher()
        for _ in range(60):
            ids = w.allowed_tokens().tolist()
            assert ids, "dead end"
            t = rng.choice(ids)
            if t in llama3.eos_ids:
                break
            assert w.advance(t)


def test_declared_order_of_merged_parts_follows_the_schema_object():
    """``$ref`` / ``allOf`` merged with sibling ``properties`` (recursive, so merged by the grammar
    compiler): in declared order the parts come in the schema object's own key order."""
    vocab = Vocabulary.from_bytes([bytes([c]) for c in range(32, 127)] + [b""], eos_ids=[95])
    base = {"type": "object", "properties": {"bar": {"$ref": "#"}}}
    for schema, first in [({"properties": {"foo": {"type": "integer"}}, "$ref": "#/$defs/b", "$defs": {"b": base}}, "foo"),
                          ({"$ref": "#/$defs/b", "properties": {"foo": {"type": "integer"}}, "$defs": {"b": base}}, "bar"),
                          ({"properties": {"foo": {"type": "integer"}}, "allOf": [base]}, "foo"),
                          ({"allOf": [base], "properties": {"foo": {"type": "integer"}}}, "bar")]:
        cg = sg.compile(sg.Grammar.from_json_schema(schema, whitespace="compact"), vocab, cache=False)
        text = '{"foo":1,"bar":{}}' if first == "foo" else '{"bar":{},"foo":1}'
        m = cg.matcher()
        assert m.advance_bytes(text.encode()) and m.is_accepting(), (schema, text)
        assert jsonschema.Draft202012Validator(schema).is_valid(json.loads(text))



def test_live_keys_kernels_take_one_array_flavour(llama3):
    """The used keys reach the liveness kernels as a read-only array whether or not there are any
    (a writable empty one, before an object's first key, made Numba load a second specialisation
    of the kernels inside a mask: up to 120 ms the first time in a process, JSONSchemaBench
    Github_ultra/o65673)."""
    props = {f"k{i}_{w}": {"type": "integer"} for i, w in enumerate(("alpha", "beta", "gamma", "delta", "eps"))}
    schema = {"type": "object", "properties": props, "additionalProperties": False}
    g = sg.Grammar.from_json_schema(schema, whitespace="flexible", property_order="any", any_order_limit=1)
    assert g.report.live_keys
    live = sg.compile(g, llama3, cache=False).matcher()._live
    none, koff = live._keys(None, -1)  # no used key yet: nothing of the tracker is read
    assert none.shape == (0,) and koff.tolist() == [0]
    one, koff = live._keys(None, -1, b"k0_alpha")
    assert bytes(one) == b"k0_alpha" and koff.tolist() == [0, 8]
    assert none.dtype == one.dtype and none.flags.writeable == one.flags.writeable is False


def test_landing_groups_with_other_key_sets_are_judged_apart(llama3):
    """Tokens that end a value differently can open keys of different branches: after
    ``{"r": 1, "s": 2, "t": "x`` the token ``)",`` ends ``t`` as the second branch's value, whose
    keys are all used (refused), ``.",`` as the first branch's, which still has ``p`` (kept).  The
    landing check judges each group of tokens from its own key-opening states; sharing one
    verdict between groups with different states lets ``)",`` through."""
    def obj(value, extra):
        props = {"r": {"type": "integer"}, "s": {"type": "integer"}, "t": {"const": value}, **extra}
        return {"type": "object", "properties": props, "required": ["r", "t"], "additionalProperties": False}

    schema = {"anyOf": [obj("x.", {"p": {"type": "integer"}}), obj("x)", {})]}
    g = sg.Grammar.from_json_schema(schema, whitespace="flexible", property_order="any", any_order_limit=1)
    assert g.report.live_keys
    m = sg.compile(g, llama3, cache=False).matcher()
    assert m.advance_bytes(b'{"r": 1, "s": 2, "t": "x')
    words, inner = m.mask_words(), m.inner.mask_words()

    def bit(w, s):
        t = next(i for i in range(llama3.size) if llama3.token_bytes(i) == s)
        return int(w[t >> 5] >> (t & 31)) & 1

    assert bit(inner, b')",') == 1 and bit(words, b')",') == 0
    assert bit(inner, b'.",') == 1 and bit(words, b'.",') == 1
    assert bit(words, b')"') == 1   # the object may end there


def test_verdicts_under_lead_keys_end_at_a_rollback(llama3):
    """A landing verdict kept under the leads' keys names the grammar's history (the set where
    the string value began): after ``{"a": {"x1": 1, "s": "...`` (keys ``s``, ``x1``: ``", "x``
    opens only used keys) and a rollback to ``{"`` then ``b": {"x1": 1, "s": "...`` (keys ``s``,
    ``x1``, ``x2``), the string is the same terminal begun at the same set, so the leads' keys
    are equal while the verdicts differ.  Masks equal a fresh matcher's at every point; keeping
    those verdicts through the rollback makes 18 of them differ (checked)."""
    def obj(more):
        props = {"s": {"type": "string"}, **{k: {"type": "integer"} for k in more}}
        return {"type": "object", "properties": props, "required": ["s"], "additionalProperties": False}

    schema = {"type": "object", "properties": {"a": obj(("x1",)), "b": obj(("x1", "x2"))},
              "additionalProperties": False}
    g = sg.Grammar.from_json_schema(schema, whitespace="flexible", property_order="any", any_order_limit=1)
    assert g.report.live_keys
    cg = sg.compile(g, llama3, cache=False)
    m = cg.matcher()
    m._live._lead_verdicts = by_leads = _Counting()
    head = llama3.encode('{"')
    for t in head:
        assert m.advance(t)
    for key in ("a", "b", "a", "b"):
        text = b'{"'
        for t in llama3.encode(key + '": {"x1": 1, "s": "a string value of many tokens, with commas'):
            fresh = cg.matcher()
            assert fresh.advance_bytes(text)
            assert np.array_equal(m.mask_words(), fresh.mask_words()), (key, text)
            assert m.advance(t)
            text += llama3.token_bytes(t)
        m.rollback(m.accepted_tokens() - len(head))
    assert by_leads.hits > 10, by_leads.hits

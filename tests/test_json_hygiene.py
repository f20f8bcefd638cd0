"""Generation hygiene (``structgen.JsonHygiene``): the language is the exact language intersected
with the documented restrictions, on both engines; exact semantics stay what they were.

Mask oracle, on a tiny vocabulary whose tokens straddle numbers, keys and separators: every text
of at most ``N`` characters over the vocabulary's alphabet that the *exact* grammar accepts
(byte by byte), that ``jsonschema`` validates and that passes the restriction check written here
(a regex of the lexemes, the integer range in Python, whitespace runs, extra keys after declared
ones, string lengths in code points) is a member; the enumeration is pruned only by necessary
conditions (a live prefix of the exact grammar, a partial match of the lexeme regex).  At every
prefix of a member that is short enough to be completed within ``N``, the allowed tokens must be
exactly the tokens that extend it to a prefix of a member (EOS: it is one).
"""
from __future__ import annotations

import json
import re

import jsonschema
import pytest
import regex
from pydantic import BaseModel, Field

import structgen as sg
from structgen.errors import OptionError
from tests.helpers import load_tokenizer, load_vocab, tiny_llama

PIECES = [c.encode() for c in '{}[]:,"abx015.-e \n\\'] + [
    b"00", b".5", b"1.", b"e-", b'":', b',"', b"5e", b"-1", b'"x', b"0}", b"  ", b"\n ", b'a"', b"10", b"\\n",
    b'{"', b"]}", b", "]
EOS = len(PIECES)
ALPHABET = sorted({b for p in PIECES for b in p})
BYTES = sg.Vocabulary.from_bytes([bytes([b]) for b in range(256)] + [b""], eos_ids=[256])


def tiny():
    return sg.Vocabulary.from_bytes(PIECES + [b""], eos_ids=[EOS])


# ----------------------------------------------------------------------------- the restriction check
CHAR = r'(?:[^"\\\x00-\x1f]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4})'   # one code point of a JSON string body
LEXEME = regex.compile(f'[ \\t\\n\\r]|[{{}}\\[\\],:]|true|false|null|"{CHAR}*"|-?[0-9][0-9.eE+-]*')
LEXEMES = regex.compile(f'(?:[ \\t\\n\\r]|[{{}}\\[\\],:]|true|false|null|"{CHAR}*"|-?[0-9][0-9.eE+-]*)*')
INTLIT = re.compile(r"-?(0|[1-9][0-9]*)")
NO_TRAILING_ZERO = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]*[1-9])?([eE][+-]?[0-9]+)?")


def lexemes(text):
    """``(lexemes, rest)``: the JSON lexemes of ``text`` and the unlexed tail (an open string)."""
    pos, out = 0, []
    while pos < len(text):
        m = LEXEME.match(text, pos)
        if m is None:
            return out, text[pos:]
        out.append(m.group())
        pos = m.end()
    return out, ""


def make_check(schema, *, lo, hi, digits, exp_digits, ws, cap=None, declared=None):
    """``(prefix_ok, member_ok)`` for the documented restrictions with these settings:
    ``prefix_ok(text)`` a necessary condition for a prefix of a member (strings capped as values:
    the schemas' keys are shorter than ``cap``), ``member_ok(text)`` the whole check: JSON that
    ``jsonschema`` validates, integer literals in ``[lo, hi]``, other numbers without a trailing
    fraction zero, at most ``digits`` digits before the exponent and ``exp_digits`` in it, no
    whitespace run over ``ws``, string values of at most ``cap`` code points, and in every object
    no key of ``declared`` after one that is not."""
    int_digits = max(len(str(abs(lo))), len(str(hi)))
    validator = jsonschema.Draft202012Validator(schema)

    def split(tok):
        m = re.match(r"([^eE]*)(?:[eE][+-]?([0-9]*))?$", tok)
        if m is None:
            return 1 << 30, 1 << 30  # not the shape of a number: refused
        return sum(c.isdigit() for c in m.group(1)), len(m.group(2) or "")

    def number_ok(tok):
        if INTLIT.fullmatch(tok):
            return lo <= int(tok) <= hi
        n_mant, n_exp = split(tok)
        return bool(NO_TRAILING_ZERO.fullmatch(tok)) and n_mant <= digits and 1 <= n_exp <= exp_digits \
            if re.search("[eE]", tok) else bool(NO_TRAILING_ZERO.fullmatch(tok)) and n_mant <= digits

    def number_prefix_ok(tok):
        n_mant, n_exp = split(tok)
        return n_mant <= max(digits, int_digits) and n_exp <= exp_digits

    def runs_ok(toks):
        run = 0
        for t in toks:
            run = run + 1 if t in " \t\n\r" else 0
            if run > ws:
                return False
        return True

    def strings_ok(toks):
        for i, t in enumerate(toks):
            if cap is not None and t.startswith('"'):
                nxt = next((u for u in toks[i + 1:] if u not in " \t\n\r"), None)
                if nxt != ":" and len(json.loads(t)) > cap:
                    return False
        return True

    def order_ok(text):
        bad = []

        def hook(pairs):
            keys = [k for k, _ in pairs]
            first_extra = next((i for i, k in enumerate(keys) if k not in declared), None)
            if first_extra is not None and any(k in declared for k in keys[first_extra:]):
                bad.append(keys)
            return dict(pairs)

        json.loads(text, object_pairs_hook=hook)
        return not bad

    def prefix_ok(text):
        if LEXEMES.fullmatch(text, partial=True) is None:
            return False
        toks, rest = lexemes(text)
        if not runs_ok(toks):
            return False
        nums = [t for t in toks if t[0] in "-0123456789"]
        if nums and toks[-1][0] in "-0123456789" and not rest:
            if not number_prefix_ok(nums[-1]):
                return False
            nums = nums[:-1]  # may still grow
        if not all(number_ok(t) for t in nums):
            return False
        if rest and cap is not None:  # an open string: code points so far
            return len(regex.findall(CHAR, rest[1:])) <= cap
        return True

    def member_ok(text):
        try:
            value = json.loads(text)
        except ValueError:
            return False
        toks, rest = lexemes(text)
        if rest or not validator.is_valid(value):
            return False
        return runs_ok(toks) and strings_ok(toks) and (declared is None or order_ok(text)) and \
            all(number_ok(t) for t in toks if t[0] in "-0123456789")

    return prefix_ok, member_ok


# ----------------------------------------------------------------------------- enumeration
def members(schema, engine, layout, max_whitespace, prefix_ok, member_ok, n):
    """Every member of at most ``n`` characters (see the module docstring); the exact language
    is that of ``engine`` (the one-automaton engine writes numbers under ``not`` without an
    exponent, the grammar engine with one)."""
    exact = sg.compile(sg.Grammar.from_json_schema(schema, engine=engine, whitespace=layout,
                                                   max_whitespace=max_whitespace), BYTES)
    out, frontier = set(), [("", exact.matcher())]
    while frontier:
        nxt = []
        for text, m in frontier:
            if m.is_accepting() and member_ok(text):
                out.add(text)
            if len(text) >= n:
                continue
            for b in ALPHABET:
                t2 = text + chr(b)
                if not prefix_ok(t2):
                    continue
                m2 = m.fork()
                if m2.advance(b):
                    nxt.append((t2, m2))
        frontier = nxt
    return out


def check_masks(cg, found, n, slack):
    """The allowed tokens at every prefix of a member of at most ``n - slack`` characters."""
    prefixes = {t[:i] for t in found for i in range(len(t) + 1)}
    checked = 0
    for p in sorted(x for x in prefixes if len(x) <= n - slack):
        m = cg.matcher()
        assert m.advance_bytes(p.encode()), p
        want = {i for i, piece in enumerate(PIECES) if (p + piece.decode()) in prefixes}
        if p in found:
            want.add(EOS)
        got = set(m.allowed_tokens().tolist())
        assert got == want, (p, sorted(PIECES[i] for i in got - want if i < EOS),
                             sorted(PIECES[i] for i in want - got if i < EOS), EOS in got, EOS in want)
        checked += 1
    return checked


NUM = {"type": "number"}
INTEGER = {"type": "integer"}
SMALL = dict(integer_range=(-12, 12), number_digits=3, exponent_digits=1)
CASES = {
    # name: (schema, hygiene settings, layout, oracle settings, N, declared keys); prefixes up to
    # N - SLACK[name] characters are checked (every allowed token then has a completion within N)
    "integer": (INTEGER, SMALL, "compact", dict(lo=-12, hi=12, digits=3, exp_digits=1, ws=0), 8, None),
    "number": (NUM, SMALL, "compact", dict(lo=-12, hi=12, digits=3, exp_digits=1, ws=0), 9, None),
    "bounded": ({"type": "number", "minimum": -1, "exclusiveMaximum": 1.5}, SMALL, "compact",
                dict(lo=-12, hi=12, digits=3, exp_digits=1, ws=0), 8, None),
    # the schema's own lower bound widens the integer range: one digit more than 100
    "widened": ({"type": "integer", "minimum": 100}, SMALL, "compact",
                dict(lo=-9999, hi=9999, digits=3, exp_digits=1, ws=0), 7, None),
    # complements: integers are not numbers-but-not-integers, written as 1.0 or not
    "not_integer": ({"type": "number", "not": INTEGER}, SMALL, "compact",
                    dict(lo=-12, hi=12, digits=3, exp_digits=1, ws=0), 8, None),
    "one_of": ({"oneOf": [INTEGER, {"type": "number", "maximum": 1}]}, SMALL, "compact",
               dict(lo=-12, hi=12, digits=3, exp_digits=1, ws=0), 8, None),
    "array_ws": ({"type": "array", "items": {"enum": [1, 10]}, "maxItems": 1},
                 dict(SMALL, max_whitespace=2), "flexible", dict(lo=-12, hi=12, digits=3, exp_digits=1, ws=2),
                 9, None),
    "extras_last": ({"type": "object", "properties": {"a": {"const": 1}, "b": {"const": 0}}, "required": ["b"],
                     "patternProperties": {"^x[01]$": {"const": 0}}, "additionalProperties": False},
                    SMALL, "compact", dict(lo=-12, hi=12, digits=3, exp_digits=1, ws=0), 22, {"a", "b"}),
    # (the pattern keeps the enumeration small: a, b, and escaped line feeds, quotes, backslashes)
    "string_cap": ({"type": "object", "properties": {"a": {"type": "string", "pattern": '^[ab\n"\\\\]*$'},
                                                      "b": {"const": 0}},
                    "required": ["a"], "additionalProperties": False},
                   dict(SMALL, max_string_length=2), "compact",
                   dict(lo=-12, hi=12, digits=3, exp_digits=1, ws=0, cap=2), 16, {"a", "b"}),
}

SLACK = {"extras_last": 8, "string_cap": 8}


@pytest.fixture(scope="module")
def vocab():
    return tiny()


@pytest.mark.parametrize("engine", ["dfa", "cfg"])
@pytest.mark.parametrize("name", list(CASES))
def test_masks_equal_the_oracle(vocab, name, engine):
    schema, settings, layout, oracle, n, declared = CASES[name]
    h = sg.JsonHygiene(**settings)
    prefix_ok, member_ok = make_check(schema, declared=declared, **oracle)
    found = members(schema, engine, layout, h.max_whitespace, prefix_ok, member_ok, n)
    assert found
    g = sg.Grammar.from_json_schema(schema, engine=engine, whitespace=layout, hygiene=h)
    assert g.report.hygiene is not None and not g.report.notes
    cg = sg.compile(g, vocab)
    # every member is accepted and nothing longer than it was found (the sets agree on <= n)
    for t in found:
        m = cg.matcher()
        assert m.advance_bytes(t.encode()) and m.is_accepting(), t
    assert check_masks(cg, found, n, slack=SLACK.get(name, 4)) > 5


def test_member_sets_show_each_restriction():
    """The oracle sets really are narrower than the exact language (the checks can fail)."""
    _, member_ok = make_check(INTEGER, lo=-12, hi=12, digits=3, exp_digits=1, ws=0)
    assert member_ok("12") and not member_ok("13") and not member_ok("1.0")
    _, member_ok = make_check(NUM, lo=-12, hi=12, digits=3, exp_digits=1, ws=0)
    assert member_ok("1.55") and not member_ok("1.555") and not member_ok("1.50") and member_ok("5e-1")
    assert not member_ok("5e10")


# ----------------------------------------------------------------------------- defaults, exactness
def accepts(g, text, vocab=BYTES):
    m = sg.compile(g, vocab).matcher()
    return m.advance_bytes(text.encode()) and m.is_accepting()


QTY = {"type": "object", "properties": {"qty": {"type": "integer", "minimum": 1, "maximum": 99},
                                        "price": NUM, "ids": {"type": "array", "items": INTEGER}},
       "required": ["qty", "price"]}


@pytest.mark.parametrize("engine", ["dfa", "cfg"])
def test_defaults(engine):
    g = sg.Grammar.from_json_schema(QTY, engine=engine, hygiene=True)
    assert g.report.hygiene == sg.JsonHygiene().describe()
    for text, ok in [('{"qty":23,"price":1.5}', True), ('{"qty":23.0,"price":1.5}', False),
                     ('{"qty":23,"price":1.50}', False), ('{"qty":23,"price":2}', True),
                     ('{"qty":23,"price":0.12345678901234}', True), ('{"qty":23,"price":0.123456789012345}', False),
                     ('{"qty":23,"price":1.5e-7}', True), ('{"qty":23,"price":1e100}', False),
                     ('{"qty":1,"price":0,"ids":[9223372036854775807,-9223372036854775808]}', True),
                     ('{"qty":1,"price":0,"ids":[9223372036854775808]}', False),
                     ('{"qty":1,"price":0,"ids":[-9223372036854775809]}', False)]:
        assert accepts(g, text) == ok, text
        assert accepts(sg.Grammar.from_json_schema(QTY, engine=engine), text), text   # exact: all valid


def test_extras_after_declared_on_the_grammar_engine():
    schema = {"type": "object", "properties": {"a": INTEGER, "b": INTEGER}, "required": ["b"]}
    hy = sg.Grammar.from_json_schema(schema, engine="cfg", hygiene=True)
    exact = sg.Grammar.from_json_schema(schema, engine="cfg")
    for text, ok in [('{"a":1,"b":2,"z":3}', True), ('{"b":2,"z":[1]}', True), ('{"z":3,"b":2}', False),
                     ('{"a":1,"z":3,"b":2}', False), ('{"b":2}', True)]:
        assert accepts(hy, text) == ok, text
        assert accepts(exact, text), text
    any_order = sg.Grammar.from_json_schema(schema, engine="cfg", hygiene={"extra_properties": "anywhere"})
    assert accepts(any_order, '{"z":3,"b":2}')


def test_whitespace_bound():
    schema = {"type": "array", "items": INTEGER}
    hy = sg.Grammar.from_json_schema(schema, whitespace="flexible", hygiene=True)
    assert accepts(hy, "[1,    2]") and not accepts(hy, "[1,     2]")
    assert accepts(sg.Grammar.from_json_schema(schema, whitespace="flexible"), "[1," + " " * 16 + "2]")
    # an explicit max_whitespace wins over the hygiene default
    assert accepts(sg.Grammar.from_json_schema(schema, whitespace="flexible", hygiene=True, max_whitespace=8),
                   "[1," + " " * 8 + "2]")


def test_empty_under_hygiene_falls_back_to_exact():
    # a const string longer than the cap: nothing left, so the schema is compiled exactly
    for engine in ("dfa", "cfg"):
        g = sg.Grammar.from_json_schema({"const": "abc"}, engine=engine, hygiene={"max_string_length": 1})
        assert g.report.hygiene is None and "hygiene is off" in g.report.notes[0]
        assert accepts(g, '"abc"')
    with pytest.raises(sg.EmptyLanguage):  # empty in exact semantics too: the exact error
        sg.Grammar.from_json_schema({"type": "integer", "minimum": 2, "maximum": 1}, hygiene=True)
    tight = {"type": "string", "minLength": 5}
    g = sg.Grammar.from_json_schema(tight, hygiene={"max_string_length": 2})
    assert g.report.hygiene["max_string_length"] == 5        # widened to the schema's own minLength
    big = {"type": "integer", "minimum": 10 ** 30, "multipleOf": 7}
    g = sg.Grammar.from_json_schema(big, hygiene=True)
    assert accepts(g, str(10 ** 30 + 6)) and not accepts(g, str(10 ** 30 + 6) + ".0")
    never = {"type": "number", "exclusiveMinimum": 0.5, "exclusiveMaximum": 0.6, "multipleOf": 0.001}
    g = sg.Grammar.from_json_schema(never, hygiene={"number_digits": 1})
    assert g.report.hygiene["number_digits"] == 5 and accepts(g, "0.55")


def test_generation_defaults_and_opt_out():
    from structgen.constraints import resolve_constraint

    c = resolve_constraint(schema=QTY)
    assert c.grammar.report.hygiene is not None
    c = resolve_constraint(schema=QTY, schema_options={"hygiene": False})
    assert c.grammar.report.hygiene is None
    c = resolve_constraint(schema=QTY, schema_options={"hygiene": {"number_digits": 6}})
    assert c.grammar.report.hygiene["number_digits"] == 6


def test_bad_settings():
    with pytest.raises(OptionError):
        sg.JsonHygiene(number_digits=0)
    with pytest.raises(OptionError):
        sg.Grammar.from_json_schema(INTEGER, hygiene={"digits": 3})
    with pytest.raises(OptionError):
        sg.Grammar.from_json_schema(INTEGER, hygiene="yes")
    with pytest.raises(OptionError):
        sg.JsonHygiene(integer_range=(1, 5))


# ----------------------------------------------------------------------------- random models
class Order(BaseModel):
    name: str = Field(max_length=12)
    qty: int = Field(ge=1, le=99)
    price: float
    sizes: list[int] = Field(max_length=4)
    note: str = Field(max_length=20)


@pytest.fixture(scope="module")
def random_llama(one_torch_thread):
    """A tiny random-weight Llama over the real llama3 vocabulary: it picks among the allowed
    tokens almost uniformly (the harshest case for runaway digits and whitespace)."""
    vocab = load_vocab("llama3")
    return sg.Generator(tiny_llama(vocab.logits_width), load_tokenizer("llama3"), vocab=vocab, chat=False)


@pytest.mark.parametrize("whitespace", ["compact", "flexible"])
def test_random_model_generations_finish(random_llama, whitespace):
    """Every generation closes its object well before max_new_tokens=256 (with exact semantics
    29 of 60 such generations ran into max_new_tokens=128; ``benchmarks/bench_hygiene.py`` runs
    500 per layout, this test 8: the tiny model still costs a 128k-wide softmax per step)."""
    outs = random_llama([f"order {i}:" for i in range(8)], schema=Order, whitespace=whitespace, temperature=1.0,
                        seed=3, max_new_tokens=256)
    for r in outs:
        assert r.complete and r.finish_reason == "stop", r.text[:200]
        Order.model_validate_json(r.text)
        assert len(r.token_ids) < 160, r.text
        outside = re.sub(r'"(?:[^"\\]|\\.)*"', '""', r.text)   # runs outside strings
        assert not re.search(r"[0-9]{20}", outside) and not re.search(r"[ \t\n\r]{5}", outside), r.text

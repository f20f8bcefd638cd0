"""The byte-DFA builder: UTF-8 expansion, minimality, invariants, DFA algebra, limits.

Oracles: Python's UTF-8 codec, a brute-force Moore refinement written here, and
set-theoretic brute force over all short strings of a small alphabet.
"""
from __future__ import annotations

import itertools
import pickle
import random
import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from structgen.automaton import (build_dfa, clear_caches, complement, concat, difference, equivalent,
                                 intersect, is_empty, union, utf8_star)
from structgen.automaton import ir
from structgen.automaton.dfa import ByteDFA
from structgen.automaton.utf8 import utf8_sequences
from structgen.errors import LimitExceeded
from structgen.frontends.regex import dfa_from_regex, parse_regex
from tests.test_regex import render, trees

SETTINGS = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# ---------------------------------------------------------------------------- UTF-8


def _seq_match(seqs, data: bytes) -> int:
    return sum(len(sq) == len(data) and all(lo <= b <= hi for b, (lo, hi) in zip(data, sq))
               for sq in seqs)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 0x10FFFF), st.integers(0, 0x3000)), min_size=1, max_size=3))
def test_utf8_sequences_cover_exactly(pairs):
    ranges = [(a, min(a + w, 0x10FFFF)) for a, w in pairs]
    cs = ir.CharSet.of(ranges)
    seqs = utf8_sequences(cs.ranges)
    assert all(1 <= len(sq) <= 4 for sq in seqs)
    rng = random.Random(len(seqs))
    probes = set()
    for lo, hi in cs.ranges:
        probes.update({lo, hi, lo - 1, hi + 1, (lo + hi) // 2, rng.randint(lo, hi)})
    probes.update({0x7F, 0x80, 0x7FF, 0x800, 0xFFFF, 0x10000, 0xD7FF, 0xE000})
    for cp in probes:
        if not 0 <= cp <= 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
            continue
        hits = _seq_match(seqs, chr(cp).encode())
        assert hits == (1 if cs.contains(cp) else 0), hex(cp)


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def test_utf8_star_is_exactly_valid_utf8():
    dfa = utf8_star()
    for n in (1, 2):
        for tup in itertools.product(range(256), repeat=n):
            b = bytes(tup)
            assert dfa.fullmatch(b) == _is_utf8(b), b
    rng = random.Random(7)
    leads = [0xE0, 0xE1, 0xED, 0xEE, 0xEF, 0xF0, 0xF1, 0xF4, 0xF5, 0xC0, 0xC2]
    for _ in range(20000):
        b = bytes([rng.choice(leads)] + [rng.randrange(0x70, 0xC5) for _ in range(rng.randint(1, 3))])
        assert dfa.fullmatch(b) == _is_utf8(b), b
        assert dfa.is_prefix(b) == any(_is_utf8(b + bytes(t)) for t in _tails(len(b))), b


def _tails(n):
    # Enough continuation bytes to complete any valid prefix of length n.
    out = [()]
    for k in range(1, 4 - min(n, 3) + 1):
        out.extend(itertools.product((0x80, 0x90, 0xA0, 0xBF), repeat=k))
    return out


def test_any_char_every_code_point_sampled():
    dfa = build_dfa(ir.ANY_CHAR)
    for cp in list(range(0, 0x10FFFF, 37)) + [0x7F, 0x80, 0x7FF, 0x800, 0xFFFF, 0x10000, 0x10FFFF]:
        if 0xD800 <= cp <= 0xDFFF:
            continue
        assert dfa.fullmatch(chr(cp).encode())
    for bad in (b"\xed\xa0\x80", b"\xc0\x80", b"\xf4\x90\x80\x80", b"\xe0\x80\x80"):
        assert not dfa.fullmatch(bad)


# ---------------------------------------------------------------- invariants, minimality


def check_invariants(dfa: ByteDFA):
    n, k = dfa.transitions.shape
    assert dfa.byte_class.shape == (256,) and dfa.byte_class.min() == 0
    assert dfa.byte_class.max() == k - 1 and dfa.start == 0
    assert dfa.transitions.dtype == np.int32 and dfa.accepting.shape == (n,)
    assert ((dfa.transitions >= -1) & (dfa.transitions < n)).all()
    if dfa.is_empty():
        assert n == 1 and (dfa.transitions == -1).all()
        return
    # reachable from 0
    seen, todo = {0}, [0]
    while todo:
        s = todo.pop()
        for t in dfa.transitions[s]:
            if t >= 0 and t not in seen:
                seen.add(int(t))
                todo.append(int(t))
    assert len(seen) == n
    # co-reachable
    live = set(np.flatnonzero(dfa.accepting).tolist())
    changed = True
    while changed:
        changed = False
        for s in range(n):
            if s not in live and any(t in live for t in dfa.transitions[s].tolist()):
                live.add(s)
                changed = True
    assert len(live) == n


def brute_force_classes(dfa: ByteDFA) -> int:
    """Number of Myhill-Nerode classes among the states (naive Moore refinement)."""
    n, k = dfa.transitions.shape
    label = [int(a) for a in dfa.accepting] + [0]  # index n: dead sink
    while True:
        sig = {}
        new = []
        for s in range(n + 1):
            row = [n if s == n or dfa.transitions[s, c] < 0 else int(dfa.transitions[s, c])
                   for c in range(k)]
            key = (label[s], tuple(label[t] for t in row))
            new.append(sig.setdefault(key, len(sig)))
        if len(set(new)) == len(set(label)):
            return len(set(new)) - 1  # the sink's class holds no live state
        label = new


def test_columns_are_distinct_byte_classes():
    dfa = dfa_from_regex(r"[a-f]x|[d-k]y|é")
    cols = {tuple(dfa.transitions[:, c]) for c in range(dfa.n_classes)}
    assert len(cols) == dfa.n_classes  # coarsest partition: no two classes alike


@SETTINGS
@given(trees())
def test_minimal_and_no_bigger_than_unminimised(tree):
    node = parse_regex(render(tree))
    dfa = build_dfa(node)
    raw = build_dfa(node, minimize=False)
    check_invariants(dfa)
    check_invariants(raw)
    assert dfa.n_states <= raw.n_states
    if raw.n_states * raw.n_classes <= 20_000:  # keep the pure-Python oracle quick
        assert brute_force_classes(dfa) == dfa.n_states
        assert brute_force_classes(raw) == dfa.n_states  # same language, same quotient
    assert equivalent(dfa, raw)
    cols = {tuple(dfa.transitions[:, c]) for c in range(dfa.n_classes)}
    assert len(cols) == dfa.n_classes


_ENCLOSERS = ('"', "a", "c", "[ab]", "[a-c]", "[^a]")


@SETTINGS
@given(trees(), st.sampled_from(_ENCLOSERS), st.sampled_from(_ENCLOSERS))
def test_an_enclosed_body_is_the_canonical_dfa_of_the_whole(tree, opening, closing):
    """``Seq(byte set, body, byte set)`` built from the body's DFA (canonical_enclosed, when no
    accepting body state steps on a closing byte) has the arrays the subset construction and a
    minimisation of the whole give, merged start included."""
    from structgen.automaton.minimize import byte_set, canonical_dfa, canonical_enclosed

    body = parse_regex(render(tree))
    node = ir.Seq((parse_regex(opening), body, parse_regex(closing)))
    raw = build_dfa(node, minimize=False)
    ref = canonical_dfa(raw.transitions, raw.accepting, raw.byte_class)
    dfa = canonical_enclosed(byte_set(build_dfa(parse_regex(opening))), build_dfa(body),
                             byte_set(build_dfa(parse_regex(closing))))
    for got in (build_dfa(node), dfa):
        if got is not None:
            for x, y in ((got.transitions, ref.transitions), (got.byte_class, ref.byte_class),
                         (got.accepting, ref.accepting)):
                assert np.array_equal(x, y)


def test_enclosed_bodies_take_the_short_way_and_merge_a_start_like_state(monkeypatch):
    """The cases the property test draws rarely: a body state that only steps on the opening
    bytes to the body's start merges with the start (``a(ba)*c`` is ``(ab)*ac``); a closing byte
    an accepting body state steps on takes the general construction; both against brute force."""
    from structgen.automaton import minimize

    for opening, body, closing, short in (("a", "(ba)*", "c", True), ('"', "[^\"]{2,40}", '"', True),
                                          ('"', "x*", "x", False)):
        node = ir.Seq((parse_regex(opening), parse_regex(body), parse_regex(closing)))
        inner = build_dfa(parse_regex(body))
        got = minimize.canonical_enclosed(minimize.byte_set(build_dfa(parse_regex(opening))), inner,
                                          minimize.byte_set(build_dfa(parse_regex(closing))))
        assert (got is not None) == short
        dfa = build_dfa(node)
        pat = re.compile(opening + body + closing)
        for n in range(7):
            for w in itertools.product("abcx\"", repeat=n):
                word = "".join(w)
                assert dfa.fullmatch(word.encode()) == bool(pat.fullmatch(word)), word
        if short:
            assert np.array_equal(got.transitions, dfa.transitions)
            assert np.array_equal(got.byte_class, dfa.byte_class)
    assert build_dfa(parse_regex("a(ba)*c")).n_states == 3  # the start and the state after b merged
    # build_dfa takes this way for big Boolean bodies (a pattern under a length bound)
    body = ir.And((parse_regex("[a-z]{0,600}"), parse_regex(".*x.*y")))
    node = ir.Seq((parse_regex('"'), body, parse_regex('"')))
    calls = []
    real = minimize.canonical_enclosed
    monkeypatch.setattr("structgen.automaton.build.canonical_enclosed", lambda *a: calls.append(1) or real(*a))
    clear_caches()
    dfa = build_dfa(node)
    raw = build_dfa(node, minimize=False)
    ref = minimize.canonical_dfa(raw.transitions, raw.accepting, raw.byte_class)
    assert calls and build_dfa(body).n_states >= 512
    assert np.array_equal(dfa.transitions, ref.transitions) and np.array_equal(dfa.byte_class, ref.byte_class)


def test_canonical_form_is_identical_for_equal_languages():
    a = dfa_from_regex(r"(a|b)*")
    b = dfa_from_regex(r"[ab]*")
    c = dfa_from_regex(r"(a*b*)*")
    for x in (b, c):
        assert np.array_equal(a.transitions, x.transitions)
        assert np.array_equal(a.byte_class, x.byte_class)
        assert np.array_equal(a.accepting, x.accepting)


def test_empty_language_and_empty_string():
    for node in (ir.NOTHING, ir.CharSet(()), ir.seq(ir.literal("a"), ir.NOTHING),
                 ir.Repeat(ir.literal("a"), 3, 2), ir.CharSet(((0xD800, 0xDFFF),))):
        d = build_dfa(node)
        check_invariants(d)
        assert d.is_empty() and is_empty(d) and not d.is_prefix(b"")
    e = build_dfa(ir.EMPTY)
    assert e.fullmatch(b"") and not e.fullmatch(b"a") and e.n_states == 1


def test_large_repeats_stay_linear():
    per_char = build_dfa(parse_regex(r".")).n_states - 1  # start + UTF-8 continuation states
    assert build_dfa(parse_regex(r".{64}")).n_states == 64 * per_char + 1
    assert build_dfa(parse_regex(r"[a-z]{64}")).n_states == 65
    assert build_dfa(parse_regex(r"[a-z]{0,1000}")).n_states == 1001
    d = build_dfa(parse_regex(r"(?:ab){300,400}"))
    assert d.n_states == 801 and d.fullmatch(b"ab" * 350) and not d.fullmatch(b"ab" * 401)
    d = build_dfa(parse_regex(r"(?:a?){500}"))
    assert d.n_states == 501 and d.fullmatch(b"a" * 500) and not d.fullmatch(b"a" * 501)


def test_bytesets_and_embed():
    node = ir.seq(ir.ByteSet.of([(0x00, 0x10)]), ir.literal("x"))
    d = build_dfa(node)
    assert d.fullmatch(b"\x05x") and not d.fullmatch(b"\x11x")
    inner = dfa_from_regex(r"[0-9]+")
    d = build_dfa(ir.seq(ir.literal("n="), ir.Embed(inner), ir.literal(";")))
    assert d.fullmatch(b"n=42;") and not d.fullmatch(b"n=;")


def test_results_are_cached_and_read_only():
    node = parse_regex(r"cache[0-9]{3}")
    a = build_dfa(node)
    assert build_dfa(parse_regex(r"cache[0-9]{3}")) is a
    with pytest.raises(ValueError):
        a.transitions[0, 0] = 5



def test_nodes_and_dfas_are_single_objects_that_pickle():
    """IR nodes and DFAs keep their fields and caches in slots (no ``__dict__``: a cached tree is
    half the objects for the garbage collector), and still pickle, copy and weak-reference."""
    import copy
    import gc
    import pickle
    import weakref

    node = parse_regex(r"(ab|c[0-9]+)*é?")
    h, n, d = hash(node), ir.size(node), ir.depth(node)
    assert not hasattr(node, "__dict__") and not hasattr(ir.Embed(None), "__dict__")
    back = pickle.loads(pickle.dumps(node))
    assert not hasattr(back, "_hash")  # a cached hash is not carried (string hashes differ between processes)
    assert back == node and back is not node
    assert hash(back) == h and ir.size(back) == n and ir.depth(back) == d
    assert copy.deepcopy(node) == node
    with pytest.raises(AttributeError):
        node.items = ()  # still frozen
    dfa = build_dfa(node)
    assert not hasattr(dfa, "__dict__") and weakref.ref(dfa)() is dfa
    again = pickle.loads(pickle.dumps(dfa))
    assert again._canonical and again.fullmatch("abc12é".encode()) and not again.fullmatch(b"abd")
    # what the collector walks from a node: its fields, no per-node dict
    tree = ir.seq(ir.literal("xy"), ir.Repeat(ir.literal("z"), 0, None))
    hash(tree), ir.size(tree)  # with its cached hash and size set
    assert gc.get_referents(tree) and not any(isinstance(o, dict) for o in gc.get_referents(tree))


# ---------------------------------------------------------------------------- algebra

ALPHABET = ["a", "b", "é"]
WORDS = ["".join(t) for n in range(5) for t in itertools.product(ALPHABET, repeat=n)]
SMALL = ["a", "b", "é", "a*", "b+", "(ab)*", "a?b?", "[ab]*é", "(a|é)(b|é)", "", "a{2,3}", ".*b",
         "[^a]*", "é*a"]


def lang(dfa):
    return {w for w in WORDS if dfa.fullmatch(w.encode())}


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(SMALL), st.sampled_from(SMALL))
def test_boolean_ops_against_brute_force(p, q):
    a, b = dfa_from_regex(p), dfa_from_regex(q)
    la, lb = lang(a), lang(b)
    universe = set(WORDS)
    for op, expect in ((intersect, la & lb), (union, la | lb), (difference, la - lb)):
        r = op(a, b)
        check_invariants(r)
        assert lang(r) == expect, (op.__name__, p, q)
    r = complement(a)
    check_invariants(r)
    assert lang(r) == universe - la
    assert not r.fullmatch(b"\xff") and complement(r).n_states == a.n_states
    cat = concat(a, b)
    check_invariants(cat)
    expect = {w for w in WORDS if any(w[:i] in la and w[i:] in lb for i in range(len(w) + 1))}
    assert lang(cat) == expect
    same_arrays = (a.transitions.shape == b.transitions.shape
                   and np.array_equal(a.transitions, b.transitions)
                   and np.array_equal(a.byte_class, b.byte_class)
                   and np.array_equal(a.accepting, b.accepting))
    assert equivalent(a, b) == same_arrays == equivalent(b, a)  # canonical forms
    if la != lb:
        assert not equivalent(a, b)
    assert is_empty(intersect(a, complement(a)))
    assert equivalent(union(a, complement(a)), utf8_star())


def test_equivalent_distinguishes_languages_beyond_short_words():
    a = dfa_from_regex(r"a{0,9}")
    b = dfa_from_regex(r"a{0,10}")
    assert not equivalent(a, b) and equivalent(a, dfa_from_regex(r"(a{0,3}){0,3}"))


def test_and_not_nodes():
    node = ir.And((parse_regex(r"[a-z]+"), ir.Not(parse_regex(r".*bad.*"))))
    d = build_dfa(node)
    for w in ["good", "bad", "abadx", "ok", "", "BAD"]:
        assert d.fullmatch(w.encode()) == (bool(re.fullmatch(r"[a-z]+", w)) and "bad" not in w), w
    assert not build_dfa(ir.Not(ir.EMPTY)).fullmatch(b"")
    assert build_dfa(ir.Not(ir.NOTHING)).fullmatch("é".encode())
    assert not build_dfa(ir.Not(ir.NOTHING)).fullmatch(b"\xc3")


# ----------------------------------------------------------------------------- limits


def test_max_states_limit():
    with pytest.raises(LimitExceeded) as info:
        build_dfa(parse_regex(r"(a|b)*a(a|b){20}"), max_states=1000)
    assert info.value.limit == "max_states" and info.value.value == 1000
    # A smaller instance fits and is exact: 2**(k+1) states.
    d = build_dfa(parse_regex(r"(a|b)*a(a|b){6}"), max_states=1000)
    assert d.n_states == 2 ** 7
    with pytest.raises(LimitExceeded):
        intersect(dfa_from_regex(r"(a|b)*a(a|b){6}"), dfa_from_regex(r"(a|b)*b(a|b){5}"), max_states=50)


def test_time_limit():
    clear_caches()
    with pytest.raises(LimitExceeded) as info:
        build_dfa(parse_regex(r"(a|b)*a(a|b){12}c"), time_limit=0.0)
    assert info.value.limit == "time_limit"
    assert build_dfa(parse_regex(r"(a|b)*a(a|b){12}c"), time_limit=60.0).n_states > 0


def test_nfa_state_limit():
    with pytest.raises(LimitExceeded) as info:
        build_dfa(parse_regex(r"(?:abc){100000}"), max_nfa_states=10_000)
    assert info.value.limit == "max_nfa_states"


def test_equal_trees_remember_each_other_and_unequal_ones_stay_apart():
    """``==`` on IR trees is structural; a tree found equal to another points at it, so the next
    comparison of the two is one step, and that never makes unequal trees compare equal."""
    def tree(tail: str):
        return ir.seq(ir.Repeat(ir.alt(ir.literal("ab"), ir.CharSet.of([(48, 57)])), 0, None), ir.literal(tail))

    a, b, c = tree("x"), tree("x"), tree("y")
    assert a is not b and hash(a) == hash(b)
    assert a == b and b._canon is a
    assert a == b and b == a
    assert c != a and c != b and b != c and a != c
    assert not hasattr(c, "_canon")
    d = tree("x")
    assert b == d and d._canon is a        # through b's pointer: the tree a
    assert pickle.loads(pickle.dumps(b)) == a and not hasattr(pickle.loads(pickle.dumps(b)), "_canon")

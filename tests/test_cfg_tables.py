"""Grammar tables (structgen.cfg.engine): the worklist NULLABLE / FOLLOW-bytes kernel
(``_grammar_sets``) and trim give exactly what the plain round-robin fixpoints (kept here as the
reference) give; the literal terminals chained after a whitespace run are the builder's language."""
from __future__ import annotations

import random

import numpy as np
import pytest

from structgen import grammars
from structgen.frontends import lark_to_cfg
from structgen.cfg.engine import Tables, normalise
from structgen.frontends.json_schema.cfg import compile_json_schema_cfg

from .test_cfg_engine import random_grammar


def _nullable_ref(rules: dict) -> set:
    nullable = set()
    changed = True
    while changed:
        changed = False
        for a, alts in rules.items():
            if a not in nullable and any(all(s in nullable for s in rhs) for rhs in alts):
                nullable.add(a)
                changed = True
    return nullable


def _follow_ref(cfg, terms, nullable, trans, tstart):
    T = len(terms)
    tid = {t: i for i, t in enumerate(terms)}
    first = dict.fromkeys(cfg.rules, 0)
    changed = True
    while changed:
        changed = False
        for a, alts in cfg.rules.items():
            acc = first[a]
            for rhs in alts:
                for sym in rhs:
                    if sym in tid:
                        acc |= 1 << tid[sym]
                        break
                    acc |= first[sym]
                    if sym not in nullable:
                        break
            if acc != first[a]:
                first[a] = acc
                changed = True
    fol_nt = dict.fromkeys(cfg.rules, 0)
    fol_t = [0] * T
    changed = True
    while changed:
        changed = False
        for a, alts in cfg.rules.items():
            for rhs in alts:
                trailer = fol_nt[a]
                for sym in reversed(rhs):
                    i = tid.get(sym)
                    if i is not None:
                        fol_t[i] |= trailer
                        trailer = 1 << i
                    else:
                        if fol_nt[sym] | trailer != fol_nt[sym]:
                            fol_nt[sym] |= trailer
                            changed = True
                        trailer = (trailer | first[sym]) if sym in nullable else first[sym]
    starts = (trans[tstart] >= 0) if T else np.zeros((0, 256), bool)
    follow = np.zeros((max(T, 1), 256), np.uint8)
    for i in range(T):
        bits, j = fol_t[i], 0
        while bits:
            if bits & 1:
                follow[i] |= starts[j]
            bits >>= 1
            j += 1
    return follow


def _check(cfg):
    norm, dfas = normalise(cfg)
    tb = Tables(norm, dfas, 1 << 30)
    nullable = _nullable_ref(norm.rules)
    assert tb.nullable.tolist() == [int(n in nullable) for n in tb.nt_names]
    ref = _follow_ref(norm, tb.term_names, nullable, tb.trans, tb.tstart)
    assert tb.follow.shape == ref.shape and tb.follow.dtype == ref.dtype
    assert np.array_equal(tb.follow, ref)
    # the flat rule arrays: alternative r of nonterminal a spells its right-hand side
    for a, alts in norm.rules.items():
        i = tb.nt_names.index(a)
        assert tb.nt_ptr[i + 1] - tb.nt_ptr[i] == len(alts)
        for r, rhs in enumerate(alts):
            d = tb.nt_dr0[tb.nt_ptr[i] + r]
            syms = []
            while tb.dr_next[d] != -1:
                assert tb.dr_lhs[d] == i
                x = int(tb.dr_next[d])
                syms.append(tb.nt_names[x] if x < tb.NN else tb.term_names[x - tb.NN])
                d += 1
            assert tb.dr_lhs[d] == i
            assert tuple(syms) == tuple(rhs)


@pytest.mark.parametrize("seed", range(40))
def test_tables_random_grammars(seed):
    _check(lark_to_cfg(random_grammar(random.Random(seed))))


@pytest.mark.parametrize("name", ["json", "sql", "arithmetic", "c_subset", "csv", "sexpr"])
def test_tables_shipped_grammars(name):
    _check(lark_to_cfg(grammars.load(name)))


def test_tables_nullable_chains():
    # a long chain of nullable nonterminals, listed in the worst order for a round-robin pass
    n = 60
    text = "start: r0 \"x\" r0\n" + "".join(f"r{i}: r{i + 1} r{i + 1} | \"a\"\n" for i in range(n)) + f"r{n}: \"b\" |\n"
    cfg = lark_to_cfg(text)
    _check(cfg)
    norm, dfas = normalise(cfg)
    tb = Tables(norm, dfas, 1 << 30)
    assert all(tb.nullable[tb.nt_names.index(f"r{i}")] for i in range(n + 1))


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"type": "array", "items": {"$ref": "#"}}, "b": {"type": "string"}},
     "required": ["b"]},
    {"type": "object", "properties": {"x": {"type": "integer"}, "y": {"type": "object"}}, "additionalProperties": False},
    {"anyOf": [{"type": "array", "items": {"type": "number"}}, {"type": "object"}, {"enum": ["a", 1, None]}]},
])
def test_tables_json_schema_grammars(schema):
    for order in ("declared", "any"):
        _check(compile_json_schema_cfg(schema, whitespace="flexible", max_whitespace=2, property_order=order).grammar)


def _random_cfg(rng: random.Random):
    """Random rules over a few nonterminals, some unproductive or unreachable, some terminals empty."""
    from structgen.automaton import ir
    from structgen.cfg.grammar import CFG

    nts = [f"n{i}" for i in range(rng.randint(1, 9))]
    terms = {f"T{i}": ir.literal(chr(97 + i)) for i in range(4)}
    rules = {}
    for a in nts:
        alts = []
        for _ in range(rng.randint(0, 3)):
            alts.append(tuple(rng.choice(nts + list(terms)) for _ in range(rng.randint(0, 3))))
        rules[a] = alts
    return CFG("n0", rules, terms, []), {t for t in terms if rng.random() < 0.25}


@pytest.mark.parametrize("seed", range(300))
def test_trim_matches_round_robin_trim(seed):
    from structgen.cfg.grammar import trim
    from structgen.errors import GrammarError

    cfg, empty = _random_cfg(random.Random(seed))
    try:
        ref = _round_robin_trim(cfg, empty)
    except GrammarError as e:
        with pytest.raises(GrammarError) as got:
            trim(cfg, empty)
        assert str(got.value) == str(e)
        with pytest.raises(GrammarError):
            trim(cfg, empty, check_only=True)
        return
    assert trim(cfg, empty, check_only=True) is None
    got = trim(cfg, empty)
    assert got.start == ref.start and got.rules == ref.rules and got.terminals == ref.terminals
    assert got.ignore == ref.ignore


@pytest.mark.parametrize("seed", range(60))
def test_chained_literal_is_the_builders_language(seed):
    from structgen.automaton import ir
    from structgen.automaton.build import build_dfa
    from structgen.automaton.minimize import canonical_dfa
    from structgen.cfg.engine import _chained_literal, _prefixed_build

    rng = random.Random(seed)
    ws = ir.CharSet(((9, 10), (13, 13), (32, 32))) if seed % 3 else ir.CharSet(((32, 32), (97, 98)))
    text = "".join(rng.choice(['"', "a", "b", " ", "\t", ":", "é", "\U0001F600", "\\", "x"])
                   for _ in range(rng.randint(1, 7)))
    lit = ir.literal(text)
    items = lit.items if isinstance(lit, ir.Seq) else (lit,)
    k = rng.randint(1, 6)
    node = ir.seq(ir.Repeat(ws, 0, k), lit)
    ref = build_dfa(node)
    d = _chained_literal(items, ws.ranges, k, 10_000)
    if d is None:
        assert ws.contains(ord(text[0]))
        return
    assert d.start == 0 and d.n_states == ref.n_states  # trimmed, and as small as the builder's
    c = canonical_dfa(d.transitions, d.accepting, d.byte_class)
    assert np.array_equal(c.transitions, ref.transitions) and np.array_equal(c.accepting, ref.accepting)
    assert np.array_equal(c.byte_class, ref.byte_class)
    p = _prefixed_build(node, 10_000)
    assert np.array_equal(canonical_dfa(p.transitions, p.accepting, p.byte_class).transitions, ref.transitions)


def _round_robin_trim(cfg, empty_terminals=frozenset()):
    """The plain fixpoint trim (the reference for the worklist one)."""
    from structgen.cfg.grammar import CFG
    from structgen.errors import GrammarError

    cfg.validate()
    productive = {t for t in cfg.terminals if t not in empty_terminals}
    changed = True
    while changed:
        changed = False
        for lhs, alts in cfg.rules.items():
            if lhs not in productive and any(all(s in productive for s in rhs) for rhs in alts):
                productive.add(lhs)
                changed = True
    if cfg.start not in productive:
        raise GrammarError(f"the grammar's language is empty: start rule {cfg.start!r} derives no finite "
                           f"sentence", *cfg.where(cfg.start))
    reach, todo = {cfg.start}, [cfg.start]
    rules = {}
    while todo:
        a = todo.pop()
        alts = [rhs for rhs in cfg.rules[a] if all(s in productive for s in rhs)]
        rules[a] = alts
        for rhs in alts:
            for s in rhs:
                if s not in reach:
                    reach.add(s)
                    if s in cfg.rules:
                        todo.append(s)
    terms = {t: n for t, n in cfg.terminals.items() if t in reach}
    ignore = [t for t in cfg.ignore if t not in empty_terminals]
    for t in ignore:
        terms.setdefault(t, cfg.terminals[t])
    return CFG(cfg.start, rules, terms, ignore, dict(cfg.positions))

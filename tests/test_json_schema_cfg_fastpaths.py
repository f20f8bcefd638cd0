"""JSON Schema -> CFG helpers (structgen.frontends.json_schema.cfg): memoised unit inlining, and the
directly built automaton of keys outside a declared set."""
from __future__ import annotations

import random

import pytest

from structgen.frontends.json_schema.cfg import _inline_units, _unit_cycle


def _inline_units_ref(rules: dict, start: str) -> dict:
    alias = {a: alts[0][0] for a, alts in rules.items() if a != start and len(alts) == 1 and len(alts[0]) == 1}

    def final(x):
        seen = set()
        while x in alias and x not in seen:
            seen.add(x)
            x = alias[x]
        return x

    out = {}
    for a, alts in rules.items():
        if a in alias and final(a) != a and final(a) not in _unit_cycle(alias, a):
            continue
        out[a] = [tuple(final(s) for s in rhs) for rhs in alts]
    return out


@pytest.mark.parametrize("seed", range(400))
def test_inline_units_matches_reference(seed):
    rng = random.Random(seed)
    names = [f"a{i}" for i in range(rng.randint(1, 12))]
    syms = names + ["T", "U"]
    rules = {}
    for a in names:
        if rng.random() < 0.6:
            rules[a] = [(rng.choice(syms),)]  # unit rules: chains, cycles, chains into cycles
        else:
            rules[a] = [tuple(rng.choice(syms) for _ in range(rng.randint(0, 3))) for _ in range(rng.randint(1, 3))]
    start = rng.choice(names)
    assert _inline_units(rules, start) == _inline_units_ref(rules, start)


def test_inline_units_long_chain():
    n = 600
    rules = {f"a{i}": [(f"a{i + 1}",)] for i in range(n)}
    rules[f"a{n}"] = [("T", "U")]
    rules["S"] = [(f"a{i}",) for i in range(0, n, 7)] + [("a0", "a5")]
    out = _inline_units(rules, "S")
    assert out == _inline_units_ref(rules, "S")
    assert set(out) == {"S", f"a{n}"}


# ---------------------------------------------------------------- keys outside a declared set
def _generic_other_keys(declared):
    from structgen.automaton import ir
    from structgen.automaton.build import build_dfa
    from structgen.frontends.json_schema.strings import encode

    body = ir.Not(ir.alt(*[ir.literal(k) if k else ir.EMPTY for k in declared]))
    return build_dfa(ir.seq(ir.literal('"'), encode(body, "key"), ir.literal('"')))


def _same_dfa(a, b):
    import numpy as np

    return (a.start == b.start and np.array_equal(a.transitions, b.transitions)
            and np.array_equal(a.accepting, b.accepting) and np.array_equal(a.byte_class, b.byte_class))


_ALPHABET = ["a", "b", "ab", "A", " ", "\"", "\\", "/", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "\u00a0", "\u2028",
             "\uffff", "\U0001F600", "\U0010FFFF", "\ud800", "~", "}"]


@pytest.mark.parametrize("declared", [
    [""], ["a"], ["a", "ab", "abc"], ["name", "age", "email"], ["\"", "\\", "/"], ["a\nb", "\t"],
    ["é", "\u00e9t\u00e9", "\U0001F600x"], ["\ud800", "a"], ["\ud800"], ["", "x", "\x7f"],
])
def test_other_keys_node_matches_generic(declared):
    from structgen.automaton.build import build_dfa
    from structgen.frontends.json_schema.keys import other_keys_node

    node = other_keys_node(declared)
    assert node is not None
    assert _same_dfa(build_dfa(node), _generic_other_keys(declared))


@pytest.mark.parametrize("seed", range(40))
def test_other_keys_node_random_sets(seed):
    from structgen.automaton.build import build_dfa
    from structgen.frontends.json_schema.keys import other_keys_node

    rng = random.Random(seed)
    declared = ["".join(rng.choice(_ALPHABET) for _ in range(rng.randint(0, 4))) for _ in range(rng.randint(1, 6))]
    assert _same_dfa(build_dfa(other_keys_node(declared)), _generic_other_keys(declared))


def test_other_keys_node_accepts_and_rejects():
    import json

    from structgen.automaton.build import build_dfa
    from structgen.frontends.json_schema.keys import other_keys_node

    d = build_dfa(other_keys_node(["id", "name", "é"]))
    for k in ["id", "name", "é"]:
        for text in (json.dumps(k), json.dumps(k, ensure_ascii=False)):
            assert not d.fullmatch(text.encode())
    for k in ["", "i", "ids", "nam", "namE", "\u00e9\u00e9", "x\ny", "\U0001F600"]:
        for text in (json.dumps(k), json.dumps(k, ensure_ascii=False)):
            assert d.fullmatch(text.encode()), text

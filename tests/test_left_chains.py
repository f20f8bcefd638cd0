"""left_chains: long right-hand sides split into shared left-linear prefix chains, the language
unchanged (compared with the grammar as written on every sentence up to a length), the last
symbol of every rule kept last (right recursion keeps the tail form right_to_left needs)."""
from __future__ import annotations

import random

from structgen.cfg import CFG
from structgen.cfg.grammar import left_chains, name_maker, right_to_left

from .helpers import bounded_language


def _language(rules: dict, start: str, n: int) -> set:
    terms = {s: None for alts in rules.values() for rhs in alts for s in rhs if s not in rules}
    return bounded_language(CFG(start, rules, terms), n)


def _random_rules(rng: random.Random) -> dict:
    names = [f"N{i}" for i in range(rng.randint(1, 4))]
    syms = names + ["a", "b", "c"]
    rules = {}
    for a in names:
        alts = []
        for _ in range(rng.randint(1, 4)):
            alts.append(tuple(rng.choice(syms) for _ in range(rng.randint(0, 6))))
        rules[a] = alts
    return rules


def test_language_unchanged_on_random_grammars():
    rng = random.Random(7)
    split = 0
    for _ in range(200):
        rules = _random_rules(rng)
        out = left_chains(rules, name_maker(set(rules) | {"a", "b", "c"}))
        split += len(out) > len(rules)
        assert all(len(rhs) <= 2 for alts in out.values() for rhs in alts)
        assert _language(out, "N0", 6) == _language(rules, "N0", 6), rules
    assert split > 130  # the comparison saw chains


def test_prefixes_are_shared_and_last_symbols_kept():
    rules = {"A": [("x", "y", "z"), ("x", "y", "z", "w"), ("x", "y", "q")], "B": [("x", "y", "q", "r")]}
    out = left_chains(rules, name_maker(set(rules) | set("xyzwqr")))
    assert [rhs[-1] for rhs in out["A"]] == ["z", "w", "q"]
    pre_xy = out["A"][0][0]
    assert out["A"][2][0] == pre_xy and out[pre_xy] == [("x", "y")]
    pre_xyz = out["A"][1][0]
    assert out[pre_xyz] == [(pre_xy, "z")]
    pre_xyq = out["B"][0][0]
    assert out[pre_xyq] == [(pre_xy, "q")]
    assert len(out) == 5  # A, B and the prefixes xy, xyz, xyq


def test_right_recursion_keeps_its_tail_form():
    rules = {"S": [("o", "i", "s", "S"), ("c",)]}  # o i s o i s ... c
    chained = left_chains(rules, name_maker(set(rules) | {"o", "i", "s", "c"}))
    looped = right_to_left(chained)
    assert any(a.endswith("$rep") for a in looped)  # turned into a left-recursive loop
    assert _language(looped, "S", 9) == _language(rules, "S", 9)

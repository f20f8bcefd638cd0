"""Lark's lexers as conditions on lexemes: ``basic`` (``Grammar.from_lark(..., lexer="basic")``)
and the Earley ``dynamic`` one (``lexer="dynamic"``, :func:`greedy_variants`).

Lark's basic lexer (the one behind ``parser="lalr"`` grammars such as ``python.lark``) sorts the
terminals by priority, longest possible match, pattern length and name; at each position the
first terminal that matches wins, with its regex's own (greedy) match.  A regex terminal that
fully matches a string terminal of the same priority (``NAME`` and ``"if"``) reclassifies its
lexemes equal to that string, and the string leaves the scan when its flags allow.

Here each scanned terminal ``E`` becomes the lexemes ``w`` it yields, split by what they require
of the rest ``r`` of the input: no earlier terminal matches a nonempty prefix of ``w r`` and no
longer lexeme of ``E`` is a prefix of ``w r`` -- a regular condition built as the language
``w MARK r`` (:mod:`structgen.frontends.regex.boundary`) and split at the marker.  The rests go
to :func:`structgen.cfg.follow.resolve_follow` like a lookahead's.  Ignored terminals must need no
condition beyond their own longest match (which the grammar engine applies); one that an earlier
terminal always shadows is never produced and is dropped.
"""
from __future__ import annotations

import re

from ..automaton import ir, ops
from ..automaton.build import build_dfa
from ..errors import Unsupported
from .regex.boundary import MARK, marker_complement, marker_transparent, split_at_marker

__all__ = ["basic_lexer_variants", "greedy_variants", "scan_order"]

_ANY = ir.Repeat(ir.ANY_CHAR, 0, None)


def scan_order(terminal_defs) -> tuple:
    """``(order, reclassify)``: the names Lark's basic lexer scans, first tried first, and for a
    regex terminal the string terminals its lexemes turn into (``{name: {text: string name}}``)."""
    defs = sorted(terminal_defs, key=lambda t: (-t.priority, -t.pattern.max_width, -len(t.pattern.value), t.name))
    strings = [t for t in defs if t.pattern.type == "str"]
    embedded, reclassify = set(), {}
    for r in defs:
        if r.pattern.type != "re":
            continue
        for s in strings:
            if s.priority != r.priority:
                continue
            m = re.match(r.pattern.to_regexp(), s.pattern.value)
            if m and m.group(0) == s.pattern.value:
                reclassify.setdefault(r.name, {}).setdefault(s.pattern.value, s.name)
                if set(s.pattern.flags) <= set(r.pattern.flags):
                    embedded.add(s.name)
    return [t.name for t in defs if t.name not in embedded], reclassify


def basic_lexer_variants(order: list, reclassify: dict, forms: dict, ignore: list,
                         max_states: int = 100_000) -> tuple:
    """``(variants, ignored)``: for each token type, ``[(lexemes DFA, rests DFA or None)]`` as the
    basic lexer yields them, and the ignored terminals' languages (DFA) to give the grammar.
    ``forms``: each terminal as ``[(lexemes IR, rests IR or None)]`` (one pair without a lookahead
    that sees past the lexeme; :func:`structgen.frontends.regex.parse_terminal`)."""
    def matches(name):  # the texts where ``name`` matches at the start
        return ir.alt(*(ir.seq(lex, rest if rest is not None else _ANY) for lex, rest in forms[name]))

    variants: dict = {}
    ignored: dict = {}
    for k, name in enumerate(order):
        earlier = [matches(u) for u in order[:k]]
        shadow = marker_complement(ir.alt(*earlier), max_states) if earlier else None
        good = ir.alt(*(ir.seq(lex, MARK, rest if rest is not None else _ANY) for lex, rest in forms[name]))
        d = build_dfa(ir.And((good, shadow)) if shadow is not None else good, max_states=max_states)
        if name in ignore:
            # only the earlier terminals' condition: the engine makes ignored lexemes longest matches
            parts = split_at_marker(d)
            if any(rest is not None for _, rest in parts):
                raise Unsupported(f"under lexer='basic', whether the ignored terminal {name} is lexed depends on "
                                  f"the text after it", f"terminal {name}")
            if parts:
                lang = parts[0][0]
                for lex, _ in parts[1:]:
                    lang = ops.union(lang, lex, max_states)
                ignored[name] = lang
            continue
        d = ops.difference(d, _longer(forms[name], max_states), max_states)
        table = reclassify.get(name, {})
        words = {text: build_dfa(matches_exactly, max_states=max_states)
                 for text, sname in table.items() for matches_exactly in [forms[sname][0][0]]}
        for lex, rest in split_at_marker(d):
            own = lex
            for text, dfa in words.items():
                hit = ops.intersect(lex, dfa, max_states)
                if not hit.is_empty():
                    variants.setdefault(table[text], []).append((hit, rest))
                    own = ops.difference(own, dfa, max_states)
            if not own.is_empty():
                variants.setdefault(name, []).append((own, rest))
    return variants, ignored


def _longer(form, max_states: int):
    """The texts ``w MARK r`` where a lexeme of ``form`` longer than ``w`` is a prefix of ``w r``."""
    inside = ir.seq(_ANY, MARK, ir.ANY_CHAR, _ANY)  # a marker with text after it
    return build_dfa(ir.alt(*(ir.seq(ir.And((marker_transparent(lex, max_states), inside)),
                                     rest if rest is not None else _ANY) for lex, rest in form)),
                     max_states=max_states)


def greedy_variants(forms: dict, names, max_states: int = 100_000) -> dict:
    """Lark's ``dynamic`` lexer: at each position a terminal yields one lexeme, its regex's greedy
    match there (taken as the longest; Python's ``re`` agrees on the usual patterns), whatever the
    parser can use.  For each of ``names`` whose lexemes can be prefixes of its own longer ones,
    ``[(lexemes DFA, rests DFA or None)]``: the lexemes split by the condition on the rest ``r``
    of the input that no longer lexeme is a prefix of ``w r``.  Prefix-free terminals (strings,
    ``"(" | "["``) need no condition and are left out."""
    out = {}
    for name in names:
        form = forms[name]
        if len(form) == 1 and form[0][1] is None:  # no lookahead: split by the state a lexeme ends in
            parts = ops.longest_match_variants(build_dfa(form[0][0], max_states=max_states))
        else:
            good = build_dfa(ir.alt(*(ir.seq(lex, MARK, rest if rest is not None else _ANY) for lex, rest in form)),
                             max_states=max_states)
            parts = split_at_marker(ops.difference(good, _longer(form, max_states), max_states))
        free = [lex for lex, rest in parts if rest is None or _everything(rest)]
        if len(free) == len(parts) and len(form) == 1 and form[0][1] is None:
            continue
        kept = [(lex, rest) for lex, rest in parts if not (rest is None or _everything(rest))]
        if free:
            lang = free[0]
            for lex in free[1:]:
                lang = ops.union(lang, lex, max_states)
            kept.insert(0, (lang, None))
        out[name] = kept
    return out


def _everything(d) -> bool:
    """``d`` accepts every byte string (the condition always holds)."""
    return d.n_states == 1 and bool(d.accepting[0]) and bool((d.transitions == 0).all())

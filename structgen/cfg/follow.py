"""Conditions on what follows a lexeme, carried through the grammar: terminals whose lookaheads
see past their match (``OP: /[?](?![a-z])/``).

:func:`resolve_follow` takes a grammar without ignored terminals (:func:`.compose.fold_ignores`
first, so ignored text is part of what follows) and ``rests``: for some terminals, the DFA of the
rests of the input allowed after each of their lexemes (:func:`structgen.frontends.regex.
parse_terminal`).  It returns a grammar with the same language and no conditions.

The construction is a product of the grammar with the conditions still pending (Bar-Hillel's
construction for a regular language that the grammar does not spell out): a *pending set* is a
set of (condition, state) pairs, the conditions of lexemes already read that the bytes read since
have not settled.  Each terminal ``T`` read with pending set ``p`` is split by the pending set
``q`` its lexemes leave (:meth:`_Follow.split`: a product of ``T``'s DFA with the conditions,
dropping a condition whose state accepts every continuation and refusing a lexeme that kills
one); a nonterminal ``A`` becomes ``A`` from ``p`` to ``q`` for the pairs its derivations link.
The input ends where every pending state accepts the empty rest.  Rules are split into prefix
chains first (:func:`.grammar.left_chains`): a rule written per combination of the pending sets its
symbols pass on multiplies over its length, a chain of prefixes adds up.  Only the pairs reachable from
the start are built; with no pending condition, symbols keep their names and rules.
"""
from __future__ import annotations

import numpy as np

from ..automaton import ir, ops
from ..automaton.build import embedded
from ..automaton.dfa import ByteDFA
from ..automaton.minimize import canonical_dfa
from ..automaton.product import shared_classes
from ..errors import GrammarError, LimitExceeded
from .grammar import CFG, left_chains, name_maker, trim
from .terminals import build

__all__ = ["resolve_follow", "DEFAULT_MAX_FOLLOW_RULES"]

#: the most rules :func:`resolve_follow` writes before raising LimitExceeded
DEFAULT_MAX_FOLLOW_RULES = 500_000


def universal_states(d: ByteDFA) -> np.ndarray:
    """``out[s]``: from state ``s``, ``d`` accepts every valid UTF-8 continuation."""
    u = ops.utf8_star()
    ut, ub, ua = np.asarray(u.transitions), np.asarray(u.byte_class), np.asarray(u.accepting)
    dt, db, da = np.asarray(d.transitions), np.asarray(d.byte_class), np.asarray(d.accepting)
    _, reps = shared_classes([u.byte_class, d.byte_class])
    out = np.zeros(d.n_states, bool)
    for s0 in range(d.n_states):
        seen = {(s0, u.start)}
        todo = [(s0, u.start)]
        ok = True
        while todo and ok:
            s, x = todo.pop()
            if ua[x] and not da[s]:
                ok = False
                break
            for b in reps:
                x2 = int(ut[x, ub[b]])
                if x2 < 0:
                    continue
                s2 = int(dt[s, db[b]])
                if s2 < 0:
                    ok = False
                    break
                if (s2, x2) not in seen:
                    seen.add((s2, x2))
                    todo.append((s2, x2))
        out[s0] = ok
    return out


class _Follow:
    def __init__(self, cfg: CFG, rests: dict, max_states: int):
        self.cfg = cfg
        self.max_states = max_states
        self.conds = []  # (ByteDFA, universal states)
        self.own = {}    # terminal -> its (condition, start state) or None when it settles at once
        same = {}  # equal conditions share an id (python.lark: 77 terminals, 21 conditions)
        for t, d in rests.items():
            k = (d.transitions.shape, d.transitions.tobytes(), d.accepting.tobytes(), d.byte_class.tobytes(), d.start)
            if k not in same:
                univ = universal_states(d)
                same[k] = None if univ[d.start] else len(self.conds)
                if same[k] is not None:
                    self.conds.append((d, univ))
            if same[k] is not None:
                self.own[t] = (same[k], int(d.start))
        self.utf8 = ops.utf8_star()   # its states: where a lexeme's bytes stand in a character
        self.pending = [()]   # id -> sorted tuple of (condition, state)
        self.ids = {(): 0}
        self.splits = {}      # (terminal, pending id) -> {pending id after: lexeme DFA}
        self.dfas = {}

    def pid(self, p: tuple) -> int:
        i = self.ids.get(p)
        if i is None:
            i = self.ids[p] = len(self.pending)
            self.pending.append(p)
        return i

    def ends_ok(self, i: int) -> bool:
        return all(bool(self.conds[c][0].accepting[s]) for c, s in self.pending[i])

    def dfa(self, t: str) -> ByteDFA:
        d = self.dfas.get(t)
        if d is None:
            d = self.dfas[t] = build(self.cfg.terminals[t], max_states=self.max_states)
        return d

    def split(self, t: str, i: int) -> dict:
        """{pending id after: the lexemes of ``t`` that leave it} for ``t`` read with pending id ``i``."""
        key = (t, i)
        hit = self.splits.get(key)
        if hit is not None:
            return hit
        d = self.dfa(t)
        own = self.own.get(t)
        if i == 0:
            out = {} if d.is_empty() else {self.pid((own,)) if own else 0: d}
        else:
            out = self._product(d, self.pending[i], own)
        self.splits[key] = out
        return out

    def _product(self, d: ByteDFA, p: tuple, own) -> dict:
        # A condition is dropped where its state accepts every continuation (``universal_states``,
        # which starts at a character boundary), so only at a character boundary of the lexeme:
        # after the lead byte of ``é`` the rest of a comment is undecided (a complete ``é`` would
        # make the comment longer).  ``u`` is the UTF-8 decoding state of the lexeme's bytes.
        u8 = self.utf8
        ut, ub, ua = np.asarray(u8.transitions), np.asarray(u8.byte_class), np.asarray(u8.accepting)
        bc, reps = shared_classes([d.byte_class, u8.byte_class] + [self.conds[c][0].byte_class for c, _ in p])
        dt, db, da = np.asarray(d.transitions), np.asarray(d.byte_class), np.asarray(d.accepting)
        index = {}
        states, rows, outcome = [], [], []

        def state(x, pend, u):
            k = (x, pend, u)
            j = index.get(k)
            if j is None:
                if len(states) >= self.max_states:
                    raise LimitExceeded(f"a terminal under a lookahead condition needs more than "
                                        f"{self.max_states} DFA states", "max_states", self.max_states)
                j = index[k] = len(states)
                states.append(k)
            return j

        state(int(d.start), p, int(u8.start))
        j = 0
        while j < len(states):
            x, pend, u = states[j]
            if da[x]:
                outcome.append(self.pid(tuple(sorted(set(pend) | ({own} if own else set())))))
            else:
                outcome.append(-1)
            row = []
            for b in reps:
                x2 = int(dt[x, db[b]])
                u2 = int(ut[u, ub[b]]) if u >= 0 else -1
                boundary = u2 >= 0 and bool(ua[u2])
                nxt = []
                for c, s in pend:
                    cd, univ = self.conds[c]
                    s2 = int(cd.transitions[s, cd.byte_class[b]])
                    if s2 < 0:
                        x2 = -1
                        break
                    if not (boundary and univ[s2]):
                        nxt.append((c, s2))
                row.append(-1 if x2 < 0 else state(x2, tuple(sorted(set(nxt))), u2))
            rows.append(row)
            j += 1
        trans = np.array(rows, np.int32).reshape(len(states), len(reps))
        outcome = np.array(outcome)
        out = {}
        for q in sorted({int(o) for o in outcome if o >= 0}):
            part = canonical_dfa(trans, outcome == q, bc)
            if not part.is_empty():
                out[q] = part
        return out


def resolve_follow(cfg: CFG, rests: dict, max_states: int = 100_000,
                   max_rules: int = DEFAULT_MAX_FOLLOW_RULES) -> CFG:
    """The grammar of ``cfg`` (no ignored terminals) where a lexeme of terminal ``t`` in
    ``rests`` must be followed by a rest of the input in ``L(rests[t])``, without conditions:
    see the module docstring.  Raises :class:`GrammarError` when nothing satisfies them and
    :class:`LimitExceeded` past ``max_states`` (one split terminal) or ``max_rules``."""
    if cfg.ignore:
        raise GrammarError("resolve_follow() takes a grammar without ignored terminals (fold_ignores first)")
    f = _Follow(cfg, rests, max_states)
    if not f.own:
        return cfg
    terms = cfg.terminals
    rules = left_chains(cfg.rules, name_maker(set(cfg.rules) | set(terms)))

    # the pending ids each (nonterminal, pending id) can leave, from the start: a fixpoint
    outs = {(cfg.start, 0): set()}
    changed = True
    while changed:
        changed = False
        for (a, i) in list(outs):
            new = set()
            for rhs in rules[a]:
                cur = {i}
                for x in rhs:
                    nxt = set()
                    for c in cur:
                        if x in terms:
                            nxt.update(f.split(x, c))
                        else:
                            if (x, c) not in outs:
                                outs[(x, c)] = set()
                                changed = True
                            nxt |= outs[(x, c)]
                    cur = nxt
                    if not cur:
                        break
                new |= cur
            if not new <= outs[(a, i)]:
                outs[(a, i)] |= new
                changed = True

    fresh = name_maker(set(rules) | set(terms))

    nt_name, t_name = {}, {}
    new_terms = {}

    def nonterminal(a, i, j):
        k = (a, i, j)
        if k not in nt_name:
            nt_name[k] = a if (i, j) == (0, 0) else fresh(f"{a}@{i}.{j}")
        return nt_name[k]

    def terminal(t, i, j):
        k = (t, i, j)
        if k not in t_name:
            plain = (i, j) == (0, 0) and t not in f.own
            t_name[k] = n = t if plain else fresh(f"{t}@{i}.{j}")
            new_terms[n] = terms[t] if plain else embedded(f.split(t, i)[j])
        return t_name[k]

    new_rules: dict = {}
    written = 0
    for (a, i), js in outs.items():
        for rhs in rules[a]:
            paths = [((), i)]
            for x in rhs:
                nxt = []
                for syms, c in paths:
                    if x in terms:
                        nxt += [(syms + (terminal(x, c, j),), j) for j in f.split(x, c)]
                    else:
                        nxt += [(syms + (nonterminal(x, c, j),), j) for j in sorted(outs.get((x, c), ()))]
                paths = nxt
                if len(paths) > max_rules:
                    break
            written += len(paths)
            if written > max_rules:
                raise LimitExceeded(f"lookahead conditions need more than {max_rules} grammar rules",
                                    "max_follow_rules", max_rules)
            for syms, j in paths:
                new_rules.setdefault(nonterminal(a, i, j), []).append(syms)
    ends = [j for j in sorted(outs[(cfg.start, 0)]) if f.ends_ok(j)]
    if ends == [0]:
        start = cfg.start
    else:
        start = fresh(f"{cfg.start}$end")
        new_rules[start] = [(nonterminal(cfg.start, 0, j),) for j in ends]
    for n in list(new_rules):
        new_rules[n] = list(dict.fromkeys(new_rules[n]))
    out = CFG(start, new_rules, new_terms, [], dict(cfg.positions))
    for a, i, j in nt_name:
        if nt_name[(a, i, j)] not in new_rules:
            new_rules[nt_name[(a, i, j)]] = []
    empty = frozenset(n for n, node in new_terms.items() if node == ir.NOTHING)
    return trim(out, empty)

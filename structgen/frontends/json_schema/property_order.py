"""``property_order="any"``: object members in any order, each key at most once.

The language "n keys, each at most once, in any order" needs 2^n states in any automaton and an
exponential context-free grammar, so no grammar alone can be exact for objects with many
properties.  structgen splits the work:

- the *grammar* (one DFA, or the grammar engine's rules) is exact **modulo duplicate keys**: it
  accepts every valid instance, and every text it accepts that has no duplicate key is valid;
- the *key guard* (:class:`structgen.runtime.key_guard.KeyGuardMatcher`, put in front of every
  matcher of the grammar by :meth:`structgen.CompiledGrammar.matcher`) rejects any token that
  completes a key already present in the same object, in ``advance`` and in the mask alike.

Per object the compilers pick one of two forms (:func:`choose_form`):

``"repeat"``
    ``member ("," member)*`` over every declared and additional member, with a counter of the
    *required* members seen (exactly ``r`` of them: without duplicates, that is every required
    key).  Linear in the number of properties.  Always right when the object's key language is
    *extension-infinite* (:func:`extension_infinite`: every prefix of an allowed key extends to
    infinitely many allowed keys -- e.g. ``additionalProperties`` is not ``false``): then, whatever
    keys are used already, a key in progress can always be finished with a fresh key.
``"subset"``
    The set of declared keys used so far is part of the grammar state (2^n states / nonterminals),
    so the grammar itself never offers a declared key twice.  For objects with a finite or
    otherwise "closable" key language (``additionalProperties: false``), where the duplicate
    check alone could let a model start a key that only a used key completes.  Bounded by
    ``any_order_limit`` (the number of key subsets; default 1024, i.e. 10 properties) and, for one
    DFA, by ``any_order_max_states`` (default 50,000: 2^n times the size of the members' automata).

Past those bounds a closed object takes the "repeat" form too (:func:`choose_form` says
``"closed"``) and ``SchemaReport.live_keys`` is set: the key guard then also refuses any token
after which every key the grammar allows is a used one (``{"name": 1, "na`` when no unused key
starts with ``na``; a comma when every key is used), so generation never walks into a key it
cannot finish.  This check searches the used keys' trie with a byte probe of the grammar and is
memoised per object and key prefix; it runs only for schemas with such objects.

Options (both compilers): ``property_order="declared"|"any"``, ``any_order_limit=1024``,
``any_order_max_states=50_000`` (regular compiler).  ``SchemaReport.unique_keys`` is True under
``"any"``; :meth:`structgen.CompiledGrammar.matcher` then wraps every matcher in the key guard.
In this mode the grammar's object languages count as exact for ``not`` / ``oneOf`` / ``if``
(their complement is exact modulo duplicate keys too, and the guard removes those).

Known gap (liveness only, never exactness): in a "subset" object, additional properties whose key
language is not extension-infinite (``patternProperties: {"^x[0-9]$": ...}`` with
``additionalProperties: false``) repeat under the guard, so, unless ``live_keys`` is on for
another object of the schema, a model can start such a key that only a used key completes.  The
liveness check leaves out tokens containing ``\\``, ``{``, ``}``, ``[`` or ``]`` (a model can still
write a used key's prefix through an escape).  Not covered (sound, narrower than the schema):
``enum``/``const`` object values keep the key order they are written in; keys are read in the
layout the compilers use in both modes (``json.dumps``' escaping).
"""
from __future__ import annotations

import numpy as np

from structgen.automaton import ir
from structgen.automaton.build import build_dfa

ORDERS = ("declared", "any")


def check_order(property_order: str) -> str:
    if property_order not in ORDERS:
        raise ValueError("property_order must be 'declared' or 'any'")
    return property_order


def extension_infinite(key_nodes) -> bool:
    """True when every prefix of a key in ``alt(*key_nodes)`` (quoted JSON key texts) has
    infinitely many completions in it.  An empty key language counts as True (no key can start).

    On the minimal DFA: every state from which the closing quote is not yet read can reach a
    cycle; only the states after a closing quote (accepting, no transition) have a finite future.
    """

    node = ir.alt(*key_nodes) if key_nodes else ir.NOTHING
    if node == ir.NOTHING:
        return True
    dfa = build_dfa(node)
    if dfa.is_empty():
        return True
    return bool(_all_infinite(np.ascontiguousarray(dfa.transitions), np.asarray(dfa.accepting, bool)))


def _all_infinite(trans: np.ndarray, accepting: np.ndarray) -> bool:
    n = trans.shape[0]
    succ = [set(int(x) for x in row if x >= 0) for row in trans]
    outdeg = np.array([len(s) for s in succ], np.int64)
    preds: list = [[] for _ in range(n)]
    for s, ss in enumerate(succ):
        for t in ss:
            preds[t].append(s)
    finite = np.zeros(n, bool)
    todo = [s for s in range(n) if outdeg[s] == 0]
    while todo:
        s = todo.pop()
        if finite[s]:
            continue
        finite[s] = True
        for p in preds[s]:
            outdeg[p] -= 1
            if outdeg[p] == 0:
                todo.append(p)
    # a finite state is fine only when it is a complete key with nothing after it
    return all(accepting[s] and not succ[s] for s in np.flatnonzero(finite))


def choose_form(key_nodes, n_declared: int, limit: int, open_keys=None) -> str:
    """``"repeat"``, ``"subset"`` or ``"closed"`` (repeat, with the guard's liveness check) for an
    object (see the module docstring).

    ``key_nodes``: the quoted key languages of the members that can occur (declared keys whose
    value can exist, additional-property key languages); ``n_declared``: how many declared
    members can occur; ``open_keys``: True when every key is known to be allowed, False when only
    the declared ones are (then no automaton is built), None to decide on the key languages."""
    if open_keys if open_keys is not None else extension_infinite(key_nodes):
        return "repeat"
    if (1 << n_declared) <= limit:
        return "subset"
    return "closed"


def ir_size(node: ir.Node, cap: int = 1_000_000) -> int:
    """A rough automaton-size measure of an IR node: DFA states of embedded automata plus one
    per character class (stops counting at ``cap``)."""
    total, todo = 0, [node]
    while todo and total < cap:
        x = todo.pop()
        if isinstance(x, ir.Embed):
            total += int(x.dfa.n_states)
        elif isinstance(x, (ir.CharSet, ir.ByteSet)):
            total += 1
        elif isinstance(x, (ir.Seq, ir.Alt, ir.And)):
            todo.extend(x.items)
        elif isinstance(x, (ir.Repeat, ir.Not)):
            todo.append(x.item)
        else:
            total += 1
    return total


def members_ir(live: list, x_member: ir.Node, sep: ir.Node, lo: int, hi, form: str) -> ir.Node:
    """The non-empty member lists of an object in any order, for the regular compiler.

    ``live``: ``[(key, member IR, required)]`` of the declared members that can occur;
    ``x_member``: the additional members (``ir.NOTHING`` when none); ``lo``/``hi``: bounds on the
    number of members after the first (``hi`` None: unbounded).

    B, the separated lists of any member with the count bounds, is intersected with languages
    over "optional separator, member" items.  The intersection is exact because members are
    self-delimiting JSON texts, so both split a text at the same commas (as in declared mode).
    """
    opt_sep = ir.optional(sep)
    any_member = ir.alt(*[m for _, m, _ in live], x_member)
    body = ir.seq(any_member, ir.Repeat(ir.seq(sep, any_member), lo, hi))
    if form == "repeat":
        req = [m for _, m, r in live if r]
        if not req:
            return body
        opt = ir.alt(*[m for _, m, r in live if not r], x_member)
        opts = ir.Repeat(ir.seq(opt_sep, opt), 0, None) if opt != ir.NOTHING else ir.EMPTY
        # exactly r required members; without duplicate keys, that is each required key once
        count = ir.seq(opts, ir.Repeat(ir.seq(opt_sep, ir.alt(*req), opts), len(req), len(req)))
        return ir.And((count, body))
    if form != "subset":
        raise ValueError(form)
    conds = [body]
    for i, (_, m, r) in enumerate(live):
        others = ir.alt(*[m2 for j, (_, m2, _) in enumerate(live) if j != i], x_member)
        rest = ir.Repeat(ir.seq(opt_sep, others), 0, None) if others != ir.NOTHING else ir.EMPTY
        once = ir.seq(opt_sep, m, rest)
        conds.append(ir.seq(rest, once if r else ir.optional(once)))
    return ir.And(tuple(conds))

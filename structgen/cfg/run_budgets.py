"""Run budgets: lexer states that count the characters of the run character set.

The run character set is the first vocabulary slice of the compile options
(:meth:`structgen.cfg.engine.CompiledCFG.runs`; for JSON Schema grammars the characters a JSON
string holds unescaped).  ``u_trans``/``u_acc``/``u0`` is the byte automaton of one such
character (full 256-column rows).  :func:`chain_budget` says how many run characters a lexer
state takes when they all move it alike (a counted repetition or a loop), so that the run
tokens it allows are exactly the table row ``cum[r]``; :func:`first_byte_budgets` and
:func:`split_budget` do the same per first byte for states where the characters disagree.
Numba kernels on flat arrays.
"""
from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True, nogil=True)
def _char_step(c, trans, gacc, u_trans, u_acc, u0, pd, pu):
    """Where one character of the run character set takes lexer state ``c``: the state
    every character leads to, -1 when every one dies, -2 when they disagree (or the lexeme
    could end inside a character)."""
    return _char_rest(c, u0, trans, gacc, u_trans, u_acc, pd, pu)


@njit(cache=True, nogil=True)
def _char_rest(c, u, trans, gacc, u_trans, u_acc, pd, pu):
    """:func:`_char_step` from lexer state ``c`` with the character automaton in state ``u``
    (part of a character read): where the rest of every character leads."""
    out = -3
    pd[0] = c
    pu[0] = u
    n = 1
    head = 0
    while head < n:
        ds = pd[head]
        us = pu[head]
        head += 1
        for b in range(256):
            un = u_trans[us, b]
            if un < 0:
                continue
            dn = trans[ds, b]
            if dn < 0:
                res = -1
            elif u_acc[un]:
                res = dn
            else:
                if gacc[dn]:
                    return -2
                seen = False
                for q in range(n):
                    if pd[q] == dn and pu[q] == un:
                        seen = True
                        break
                if not seen:
                    if n == pd.shape[0]:
                        return -2
                    pd[n] = dn
                    pu[n] = un
                    n += 1
                continue
            if out == -3:
                out = res
            elif out != res:
                return -2
    return out


@njit(cache=True, nogil=True)
def chain_budget(g, trans, gacc, u_trans, u_acc, u0, maxc, chain):
    """``chain[g]``: the number ``r`` of run characters (up to ``maxc``) lexer state ``g``
    takes when every character of the set moves it alike -- through non-accepting states,
    one after another, until all die (a counted repetition, ``r`` left) or forever (a loop,
    ``maxc``) -- so that a token made only of run characters is allowed from ``g`` exactly
    when it has at most ``r`` of them; -1 when that does not hold.  Fills ``chain`` for the
    states met on the way where the value is exact."""
    if chain[g] != -2:
        return chain[g]
    pd = np.empty(64, np.int32)
    pu = np.empty(64, np.int32)
    path = np.empty(maxc + 2, np.int32)
    c = g
    r = maxc
    n = 0
    for k in range(maxc + 1):
        path[n] = c
        n += 1
        nxt = _char_step(c, trans, gacc, u_trans, u_acc, u0, pd, pu)
        if nxt == -2:
            chain[g] = -1
            return -1
        if nxt == -1:
            r = k
            for q in range(n):  # exact for every state of the chain
                chain[path[q]] = r - q
            return r
        if gacc[nxt]:
            chain[g] = -1
            return -1
        if nxt == c:  # a loop: unbounded
            for q in range(n):
                chain[path[q]] = maxc
            return maxc
        c = nxt
    chain[g] = maxc  # alive past the longest run token
    return maxc


@njit(cache=True, nogil=True)
def first_byte_budgets(g, trans, gacc, u_trans, u_acc, u0, maxc, chain, vals):
    """Per first byte ``x``, ``vals[x]``: -3 when no run character starts with ``x``; else,
    when every run character starting with ``x`` takes lexer state ``g`` alike -- through
    non-accepting states to one state ``f`` -- the number of run characters a token starting
    with one of them may have (``1 +`` :func:`chain_budget` of ``f``, at most ``maxc``; 0 when
    they all die), so that such a token made only of run characters is allowed from ``g``
    exactly when it has at most ``vals[x]`` of them; -1 when that does not hold."""
    pd = np.empty(64, np.int32)
    pu = np.empty(64, np.int32)
    for x in range(256):
        un = u_trans[u0, x]
        if un < 0:
            vals[x] = -3
            continue
        dn = trans[g, x]
        if dn < 0:
            vals[x] = 0
            continue
        if u_acc[un]:
            f = dn
        elif gacc[dn]:
            f = -2
        else:
            f = _char_rest(dn, un, trans, gacc, u_trans, u_acc, pd, pu)
        if f == -1:
            vals[x] = 0
        elif f < 0 or gacc[f]:
            vals[x] = -1
        else:
            r = chain_budget(f, trans, gacc, u_trans, u_acc, u0, maxc, chain)
            vals[x] = -1 if r < 0 else min(r + 1, maxc)


@njit(cache=True, nogil=True)
def split_budget(g, trans, gacc, u_trans, u_acc, u0, maxc, chain, kb, kids, node_end, tok_ptr, full):
    """For a root walk from a lexer state that run characters do not all move alike
    (:func:`chain_budget` -1): the budget ``R`` shared by the first bytes that hold most of
    the vocabulary (:func:`first_byte_budgets`), so that the run tokens starting with those
    come from the per-vocabulary table (``cum[R]``) and only the others need a full walk:
    ``full[x] = 1`` for the first bytes whose subtrees must be walked in full (their run
    tokens are not those of ``cum[R]``).  -1 (``full`` untouched) when that would not save
    at least half of the walk."""
    vals = np.empty(256, np.int64)
    first_byte_budgets(g, trans, gacc, u_trans, u_acc, u0, maxc, chain, vals)
    tk = np.zeros(256, np.int64)  # tokens below each first byte's children
    gain = np.zeros(maxc + 1, np.int64)
    base = 0
    total = 0
    for x in range(256):
        if vals[x] == -3:
            continue
        for q in range(kb[x], kb[x + 1]):
            c = kids[q]
            tk[x] += tok_ptr[node_end[c]] - tok_ptr[c]
        # cost of a bucket outside the shared budget: clear its bits, walk it (a dying one: clear)
        w = tk[x] if vals[x] == 0 else 2 * tk[x]
        total += w
        if vals[x] != 0:
            base += 2 * tk[x]
        if vals[x] >= 0:
            gain[vals[x]] += w
    best = 0
    for v in range(maxc + 1):
        if gain[v] > gain[best]:
            best = v
    if 2 * (total - gain[best]) >= base:
        return -1
    for x in range(256):
        full[x] = 1 if (vals[x] != -3 and vals[x] != best) else 0
    return best

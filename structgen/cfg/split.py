"""Splitting a terminal whose DFA is too large into parser symbols.

Without ignored text, a lexeme boundary may fall anywhere, so a regular terminal is the same
language as a sequence of smaller terminals and rules: a sequence becomes its parts (consecutive
small ones kept together), a union a rule of alternatives, a repetition copies and nested
options.  Used by :func:`structgen.cfg.engine.normalise`.
"""
from __future__ import annotations

from ..automaton import ir

__all__ = ["SPLIT_STATES", "SPLIT_GROUP", "splittable", "split_terminal", "unrolled_size"]

SPLIT_STATES = 20_000  # a terminal's DFA past this many states is split into parser symbols


def splittable(node) -> bool:
    """Can :func:`split_terminal` split ``node`` (a sequence or union of several, a repetition)?"""
    return isinstance(node, (ir.Seq, ir.Alt)) and len(node.items) > 1 or (
        isinstance(node, ir.Repeat) and (node.max is None or node.max > 1))


def split_terminal(t: str, node, source: dict, rules: dict, todo: list) -> tuple:
    """The symbols of a sentence for terminal ``t`` (IR ``node``: a sequence, union or repetition)
    with each part a new terminal ``t$k`` (added to ``source`` and ``todo``: built, or split
    again, in turn) and unions and repetitions as new rules (``t$k`` too): ``x{m,n}`` is ``m``
    copies of ``x`` and ``n - m`` nested options ``(x (x ...)?)?`` (one way to derive each count),
    ``x{m,}`` a left-recursive loop."""
    def fresh():
        k = 0
        while f"{t}${k}" in source or f"{t}${k}" in rules:
            k += 1
        return f"{t}${k}"

    def part(x):
        name = fresh()
        source[name] = x
        todo.append(name)
        return name

    if isinstance(node, ir.Seq):
        # consecutive parts stay together while their unrolled size is small, so that a quoted
        # string stays inside one lexeme (its characters then move non-accepting lexer states
        # alike: the mask kernel's run budgets); a grouping that would not split at all splits
        # into single parts
        groups, cur, size = [], [], 0
        for x in node.items:
            n = unrolled_size(x)
            if cur and size + n > SPLIT_GROUP:
                groups.append(cur)
                cur, size = [], 0
            cur.append(x)
            size += n
        groups.append(cur)
        if len(groups) == 1:
            groups = [[x] for x in node.items]
        return tuple(part(g[0] if len(g) == 1 else ir.seq(*g)) for g in groups)
    if isinstance(node, ir.Alt):
        n = fresh()
        rules[n] = [(part(x),) for x in node.items]
        return (n,)
    x = part(node.item)
    out = (x,) * node.min
    if node.max is None:
        n = fresh()
        rules[n] = [(), (n, x)]
        return out + (n,)
    opt = None
    for _ in range(node.max - node.min):
        n = fresh()
        rules[n] = [(), (x,) + ((opt,) if opt else ())]
        opt = n
    return out + ((opt,) if opt else ())


SPLIT_GROUP = SPLIT_STATES // 4  # unrolled IR size of the consecutive parts a split keeps as one terminal


def unrolled_size(node) -> int:
    """The size of the IR tree ``node`` with every bounded repetition written out (``x{m,n}``:
    ``n`` copies, ``x{m,}``: ``m + 1``): a cheap stand-in for its DFA's size.  Iterative."""
    memo: dict = {}
    todo = [node]
    while todo:
        x = todo[-1]
        if id(x) in memo:
            todo.pop()
            continue
        kids = x.items if isinstance(x, (ir.Seq, ir.Alt)) else (x.item,) if isinstance(x, ir.Repeat) else ()
        missing = [k for k in kids if id(k) not in memo]
        if missing:
            todo.extend(missing)
            continue
        todo.pop()
        inner = sum(memo[id(k)] for k in kids)
        if isinstance(x, ir.Repeat):
            inner *= max(1, x.max if x.max is not None else x.min + 1)
        memo[id(x)] = 1 + inner
    return memo[id(node)]

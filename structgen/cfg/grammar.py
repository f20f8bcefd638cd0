"""CFG: the context-free grammar IR every grammar front-end emits.

A :class:`CFG` is a start symbol, rules over symbol *names* (plain strings) and
terminals that are regular-language IR nodes (:mod:`structgen.automaton.ir`).
A name is a terminal iff it is a key of ``terminals``, a nonterminal iff it is a
key of ``rules``; the two key sets must be disjoint.

Language (the contract the engine implements exactly, and the one Lark's Earley
parser with ``lexer="dynamic_complete"`` implements for well-behaved terminals):
a byte string ``s`` is in L(G) iff ``s = i0 w1 i1 w2 ... wn in`` where
``T1 ... Tn`` is a sentence of the rules (terminal symbols only), every ``wk``
is in the language of terminal ``Tk`` (full match, any lexing — no longest-match
rule, no priorities) and every ``ik`` is a (possibly empty) concatenation of
lexemes of the ``ignore`` terminals, each the longest match of its terminal at its
position (no longer word of that terminal is a prefix of the rest of ``s``).

``positions`` optionally maps names to ``(line, column)`` of their definition so
semantic errors can point into the source text.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..automaton import ir
from ..errors import GrammarError


@dataclass
class CFG:
    start: str
    rules: dict  # dict[str, list[tuple[str, ...]]]
    terminals: dict  # dict[str, ir.Node]
    ignore: list = field(default_factory=list)
    positions: dict = field(default_factory=dict)  # name -> (line, column)

    def where(self, name: str):
        return self.positions.get(name, (None, None))

    def key(self) -> tuple:
        """A hashable description (for compile caches)."""
        return (self.start, tuple((k, tuple(v)) for k, v in sorted(self.rules.items())),
                tuple(sorted(self.terminals.items(), key=lambda kv: kv[0])), tuple(self.ignore))

    def validate(self) -> None:
        """Raise :class:`GrammarError` for undefined symbols or start; silently OK otherwise."""
        both = set(self.rules) & set(self.terminals)
        if both:
            n = sorted(both)[0]
            raise GrammarError(f"{n!r} is both a rule and a terminal", *self.where(n))
        if self.start not in self.rules:
            if self.start in self.terminals:
                raise GrammarError(f"start symbol {self.start!r} must be a rule, not a terminal",
                                   *self.where(self.start))
            raise GrammarError(f"start symbol {self.start!r} is not defined")
        for lhs, alts in self.rules.items():
            for rhs in alts:
                for s in rhs:
                    if s not in self.rules and s not in self.terminals:
                        raise GrammarError(f"symbol {s!r} used in rule {lhs!r} is not defined", *self.where(lhs))
        for n in self.ignore:
            if n not in self.terminals:
                raise GrammarError(f"ignored terminal {n!r} is not defined")

    def __repr__(self) -> str:
        n = sum(len(a) for a in self.rules.values())
        return f"CFG(start={self.start!r}, {len(self.rules)} nonterminals, {n} rules, {len(self.terminals)} terminals)"


def name_maker(taken: set):
    """``fresh(base)``: a symbol name not in ``taken`` (``base``, else ``base1``, ``base2``...),
    added to it."""
    def fresh(base: str) -> str:
        n, k = base, 0
        while n in taken:
            k += 1
            n = f"{base}{k}"
        taken.add(n)
        return n
    return fresh


def trim(cfg: CFG, empty_terminals=frozenset(), validate: bool = True, check_only: bool = False):
    """The equivalent grammar with only productive, reachable symbols.

    ``empty_terminals`` names terminals whose language is empty (they never match).  Raises
    :class:`GrammarError` when the language is empty; ``check_only``: only that (returns None).
    Productive symbols come from a worklist, linear in the grammar's size (a round-robin
    fixpoint is quadratic on the long rule chains of large JSON Schemas)."""
    if validate:
        cfg.validate()
    rules = cfg.rules
    productive = {t for t in cfg.terminals if t not in empty_terminals}
    left, lhs, uses, todo = [], [], {}, []
    for a, alts in rules.items():
        for rhs in alts:
            k = len(left)
            n = 0
            for s in rhs:
                if s not in productive:
                    n += 1
                    uses.setdefault(s, []).append(k)  # once per occurrence
            left.append(n)
            lhs.append(a)
            if n == 0:
                todo.append(a)
    while todo:
        a = todo.pop()
        if a in productive:
            continue
        productive.add(a)
        for k in uses.get(a, ()):
            left[k] -= 1
            if left[k] == 0:
                todo.append(lhs[k])
    if cfg.start not in productive:
        raise GrammarError(f"the grammar's language is empty: start rule {cfg.start!r} derives no finite "
                           f"sentence", *cfg.where(cfg.start))
    if check_only:
        return None
    every = not uses or all(s in productive for s in uses)  # (often: no alternative to drop)
    reach, todo = {cfg.start}, [cfg.start]
    out = {}
    while todo:
        a = todo.pop()
        alts = list(rules[a]) if every else [rhs for rhs in rules[a] if all(s in productive for s in rhs)]
        out[a] = alts
        for rhs in alts:
            for s in rhs:
                if s not in reach:
                    reach.add(s)
                    if s in rules:
                        todo.append(s)
    terms = {t: n for t, n in cfg.terminals.items() if t in reach}
    ignore = [t for t in cfg.ignore if t not in empty_terminals]
    for t in ignore:
        terms.setdefault(t, cfg.terminals[t])
    return CFG(cfg.start, out, terms, ignore, dict(cfg.positions))


def nullable(rules: dict, empty_symbols=frozenset()) -> set:
    """The nonterminals of ``rules`` (name -> list of right-hand sides) that derive the empty
    text, given the symbols in ``empty_symbols`` (terminals matching the empty text) do."""
    out = set(empty_symbols)
    grew = True
    while grew:
        grew = False
        for a, alts in rules.items():
            if a not in out and any(all(x in out for x in rhs) for rhs in alts):
                out.add(a)
                grew = True
    return out


def literal_terminal(text: str, case_insensitive: bool = False) -> ir.Node:
    """The IR of a literal string terminal (optionally case-insensitive, as Lark's ``"abc"i``)."""
    if not case_insensitive:
        return ir.literal(text) if text else ir.EMPTY
    parts = []
    for c in text:
        cps = {ord(c)}
        for v in (c.lower(), c.upper(), c.swapcase()):
            if len(v) == 1:
                cps.add(ord(v))
        parts.append(ir.CharSet.of([(x, x) for x in cps]))
    return ir.seq(*parts) if parts else ir.EMPTY


def right_to_left(rules: dict, keep=frozenset()) -> dict:
    """The rules with right recursion of the tail form turned into left recursion (same language).

    A nonterminal ``A`` whose alternatives either do not mention ``A`` (``beta``) or mention it
    only as their last symbol (``alpha A``) derives ``(alpha_1 | ... | alpha_m)* (beta_1 | ...)``
    -- by induction on derivations, also when an ``alpha`` reaches ``A`` again through other
    rules.  It becomes ``A ::= A$rep beta_i``, ``A$rep ::= () | A$rep alpha_j``: an Earley chart
    keeps one item for a left-recursive loop per set, where the right-recursive spelling keeps one
    per byte generated (``s ::= "" | [^"] s`` cost time linear in the string's length at every
    byte).  First, a nonterminal used exactly once, as the whole of an alternative of ``A`` and
    with an alternative ending in ``A`` (the helper of ``ws ::= ([ ] ws)?`` in GBNF), is inlined
    into ``A`` so that ``A`` takes the tail form.  ``keep``: names never inlined (the start).
    Left recursion needs nothing: it is linear in Earley already."""
    rules = {a: list(alts) for a, alts in rules.items()}
    uses: dict = {}
    for alts in rules.values():
        for rhs in alts:
            for s in rhs:
                if s in rules:
                    uses[s] = uses.get(s, 0) + 1
    for a in list(rules):
        alts = rules.get(a)
        if alts is None:
            continue
        for _ in range(8):  # a few levels of helpers
            new, changed = [], False
            for rhs in alts:
                b = rhs[0] if len(rhs) == 1 else None
                if (b is not None and b != a and b in rules and b not in keep and uses.get(b) == 1
                        and any(r2 and r2[-1] == a for r2 in rules[b])):
                    new.extend(rules.pop(b))
                    changed = True
                else:
                    new.append(rhs)
            alts = rules[a] = new
            if not changed:
                break
    out = {}
    for a, alts in rules.items():
        rec = [rhs[:-1] for rhs in alts if rhs and rhs[-1] == a and a not in rhs[:-1]]
        base = [rhs for rhs in alts if a not in rhs]
        if not rec or not base or len(rec) + len(base) != len(alts):
            out[a] = alts
            continue
        rep = a + "$rep"
        while rep in rules or rep in out:
            rep += "_"
        out[rep] = [()] + [(rep,) + alpha for alpha in dict.fromkeys(rec) if alpha]
        out[a] = [(rep,) + beta for beta in base]
    return out


def left_chains(rules: dict, fresh, min_len: int = 3) -> dict:
    """The rules with every right-hand side of ``min_len`` or more symbols split into a
    left-linear chain of its prefixes (same language): ``A ::= X1 X2 X3`` becomes
    ``A ::= A$pre X3`` with ``A$pre ::= X1 X2``; equal prefixes (of any rule) share one name.

    Constructions that write a variant of a rule per combination of what its symbols leave
    behind (the Indenter's column and ending, pending lookahead conditions) then write a few
    alternatives per prefix instead of their product over the whole right-hand side, and an
    Earley prediction of ``A`` predicts prefixes, not every combination.  The last symbol of a
    rule stays last, so right recursion keeps the tail form :func:`right_to_left` turns into
    a loop.  ``fresh(base)`` makes new names (:func:`name_maker`)."""
    made: dict = {}
    out: dict = {}

    def prefix(owner: str, syms: tuple) -> str:
        name = made.get(syms)
        if name is None:
            name = made[syms] = fresh(f"{owner}$pre")
            out[name] = [(prefix(owner, syms[:-1]), syms[-1]) if len(syms) > 2 else syms]
        return name

    for a, alts in rules.items():
        out[a] = [(prefix(a, rhs[:-1]), rhs[-1]) if len(rhs) >= min_len else rhs for rhs in alts]
    prefix = None  # a recursive closure is a reference cycle: break it, so refcounting frees what it holds
    return out

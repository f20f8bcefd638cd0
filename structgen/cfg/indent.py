"""Indenter: Lark's indentation post-lexer compiled into the grammar.

Lark's ``Indenter`` (``lark.indenter``) reads the token stream of a ``lalr`` parser: after
each newline token ``NL`` outside brackets it compares the indentation of the newline's last line
(spaces count 1, tabs ``tab_len``) with a stack of columns and emits ``_INDENT`` (deeper: push)
or one ``_DEDENT`` per popped column (shallower; the column must then be on the stack, else a
``DedentError``); at the end of the input it emits a ``_DEDENT`` per column left; inside
brackets (``open_paren_types`` / ``close_paren_types``) newline tokens are dropped.  The newline
token is its terminal's longest match, as Lark's lexers make it.

:func:`apply_indenter` turns a grammar over ``NL``, ``_INDENT`` and ``_DEDENT`` into a plain
grammar over text with the same language, for columns up to ``max_column``:

- **Brackets.**  Symbols between an opening and its closing bracket in a rule are read in a copy of
  the grammar where a run of newline lexemes may precede every terminal and rules using ``NL``,
  ``_INDENT`` or ``_DEDENT`` are dropped (the parser never sees those tokens there).
- **Blocks.**  Each ``NL _INDENT ... _DEDENT`` of a rule becomes a *segment*: a newline whose
  column ``c'`` is deeper than the current one, then its inside at column ``c'``.
- **Columns.**  A rule that may contain a newline outside brackets gets a variant per current
  column ``c`` and per way its text ends: ``F`` (nothing pending), ``P`` (its last token was a
  newline followed only by ``_DEDENT`` s -- the newline is taken out and written by the enclosing
  rule that goes on, at that rule's column: the dedent lands exactly on a column of the stack)
  and ``E`` (the input ends after it; the remaining ``_DEDENT`` s come from the end of input).
  A newline written at column ``c`` is the terminal ``NL`` restricted to last lines of weight
  ``c``, followed by no byte that would make it longer.  Rules are split into prefix chains first
  (:func:`~.grammar.left_chains`), so each prefix gets a few variants instead of one rule getting
  every combination of its symbols' endings (python.lark: 3.3M dotted rules before, 211,000 after).

Rules must put each ``_INDENT`` right after ``NL`` with its ``_DEDENT`` in the same rule, and
balance brackets within a rule (else :class:`Unsupported` naming the rule).  A line indented
deeper than ``max_column`` is not accepted.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..automaton import ops
from ..automaton.build import embedded
from ..automaton.dfa import ByteDFA
from ..automaton.minimize import canonical_dfa
from ..errors import GrammarError, LimitExceeded, OptionError, Unsupported
from .grammar import CFG, left_chains, name_maker
from .terminals import build

__all__ = ["Indenter", "python_indenter", "apply_indenter", "DEFAULT_MAX_COLUMN"]

#: the deepest indentation (in columns, a tab counting ``tab_len``) the compiled grammar accepts
DEFAULT_MAX_COLUMN = 40
#: the most alternatives one rule's columns may expand to before LimitExceeded
MAX_EXPANSION = 50_000


@dataclass(frozen=True)
class Indenter:
    """What Lark's ``Indenter`` subclass says (its attribute names, in lower case) and the
    deepest column accepted."""
    nl_type: str = "_NEWLINE"
    indent_type: str = "_INDENT"
    dedent_type: str = "_DEDENT"
    open_paren_types: tuple = ()
    close_paren_types: tuple = ()
    tab_len: int = 8
    max_column: int = DEFAULT_MAX_COLUMN

    def __post_init__(self):
        for n in ("nl_type", "indent_type", "dedent_type"):
            if not isinstance(getattr(self, n), str):
                raise OptionError(f"Indenter.{n} must be a terminal name, not {getattr(self, n)!r}")
        object.__setattr__(self, "open_paren_types", tuple(self.open_paren_types))
        object.__setattr__(self, "close_paren_types", tuple(self.close_paren_types))
        if len(self.open_paren_types) != len(self.close_paren_types):
            raise OptionError("Indenter: as many open_paren_types as close_paren_types are needed")
        if not isinstance(self.tab_len, int) or self.tab_len < 0:
            raise OptionError(f"Indenter.tab_len must be an int >= 0, not {self.tab_len!r}")
        if not isinstance(self.max_column, int) or not 0 < self.max_column <= 1024:
            raise OptionError(f"Indenter.max_column must be an int in 1..1024, not {self.max_column!r}")

    @classmethod
    def of(cls, postlex, max_column: int | None = None) -> "Indenter":
        """``postlex`` as an :class:`Indenter`: one already, or an instance of a subclass of
        ``lark.indenter.Indenter`` (its ``NL_type``, ``INDENT_type``... are read)."""
        if isinstance(postlex, Indenter):
            ind = postlex
        else:
            try:
                ind = cls(postlex.NL_type, postlex.INDENT_type, postlex.DEDENT_type,
                          tuple(postlex.OPEN_PAREN_types), tuple(postlex.CLOSE_PAREN_types), int(postlex.tab_len))
            except AttributeError:
                raise OptionError(f"postlex must be an Indenter (structgen's or a subclass of lark.indenter."
                                  f"Indenter), not {type(postlex).__name__}") from None
        if max_column is not None:
            ind = cls(ind.nl_type, ind.indent_type, ind.dedent_type, ind.open_paren_types,
                      ind.close_paren_types, ind.tab_len, max_column)
        return ind

    def key(self) -> tuple:
        return (self.nl_type, self.indent_type, self.dedent_type, self.open_paren_types,
                self.close_paren_types, self.tab_len, self.max_column)


def python_indenter(max_column: int = DEFAULT_MAX_COLUMN) -> Indenter:
    """Lark's ``PythonIndenter`` (for ``lark/grammars/python.lark``)."""
    return Indenter("_NEWLINE", "_INDENT", "_DEDENT", ("LPAR", "LSQB", "LBRACE"), ("RPAR", "RSQB", "RBRACE"),
                    8, max_column)


# -- the newline terminal ------------------------------------------------------------------------

def last_line_weight(column: int, tab_len: int) -> ByteDFA:
    """Byte strings containing a newline whose text after the last newline weighs ``column``
    (spaces 1, tabs ``tab_len``, other characters 0), as Lark's Indenter counts it."""
    # states 0..column: the weight since the last newline; column+1: heavier; column+2: before any
    # newline (the start)
    over, pre = column + 1, column + 2
    bc = np.zeros(256, np.int32)
    bc[ord(" ")], bc[ord("\t")], bc[ord("\n")] = 1, 2, 3
    trans = np.zeros((column + 3, 4), np.int32)
    for s in range(column + 1):
        trans[s] = [s, min(s + 1, over), min(s + tab_len, over), 0]
    trans[over] = [over, over, over, 0]
    trans[pre] = [pre, pre, pre, 0]
    acc = np.zeros(column + 3, bool)
    acc[column] = True
    order = np.array([pre] + list(range(pre)))
    rank = np.argsort(order)
    moved = rank[trans[order]].astype(np.int32)
    return canonical_dfa(moved, acc[order], bc)


# -- the grammar ---------------------------------------------------------------------------------

def apply_indenter(cfg: CFG, ind: Indenter, max_states: int = 100_000, nl_variants=None) -> tuple:
    """``(grammar, rests)``: ``cfg`` (whose rules use ``ind``'s newline, indent and dedent
    terminals; the latter two need not be defined) as a grammar over text without them, and the
    longest-match conditions of the newline terminals it introduces (for
    :func:`structgen.cfg.follow.resolve_follow`, after folding the ignored terminals).
    ``nl_variants``: the newline's lexemes as ``[(lexemes DFA, rests DFA or None)]`` when a lexer
    other than the longest match of its terminal alone decides them (:mod:`..frontends.lark_lexer`)."""
    NL, IN, DE = ind.nl_type, ind.indent_type, ind.dedent_type
    if NL not in cfg.terminals:
        raise GrammarError(f"the Indenter's newline terminal {NL} is not defined")
    if NL in cfg.ignore:
        raise Unsupported(f"the Indenter's newline terminal {NL} is %ignore'd", f"terminal {NL}")
    nl = build(cfg.terminals[NL], max_states=max_states)
    if nl.accepting[nl.start]:
        raise GrammarError(f"the Indenter's newline terminal {NL} matches the empty string", *cfg.where(NL))
    variants = ops.longest_match_variants(nl) if nl_variants is None else list(nl_variants)
    fresh = name_maker(set(cfg.rules) | set(cfg.terminals) | {IN, DE})
    terminals = {t: v for t, v in cfg.terminals.items() if t not in (NL, IN, DE)}
    rules: dict = {}
    rests: dict = {}

    # 1. segments: NL IN ... DE -> SEG, its inside a rule of its own
    seg_inner: dict = {}
    for a, alts in cfg.rules.items():
        out = []
        for rhs in alts:
            stack = [[]]
            for x in rhs:
                if x == IN:
                    if not stack[-1] or stack[-1][-1] != NL:
                        raise Unsupported(f"{IN} must come right after {NL} in the same rule", _rule(cfg, a))
                    stack[-1].pop()
                    stack.append([])
                elif x == DE:
                    if len(stack) == 1:
                        raise Unsupported(f"{DE} without its {IN} in the same rule", _rule(cfg, a))
                    inner = tuple(stack.pop())
                    seg, body = fresh(f"{a}$seg"), fresh(f"{a}$block")
                    rules[body] = [inner]
                    seg_inner[seg] = body
                    stack[-1].append(seg)
                else:
                    stack[-1].append(x)
            if len(stack) != 1:
                raise Unsupported(f"{IN} without its {DE} in the same rule", _rule(cfg, a))
            out.append(tuple(stack[0]))
        rules[a] = out

    # 2. brackets: positions inside them read the paren copy
    opens, closes = set(ind.open_paren_types), set(ind.close_paren_types)
    paren: dict = {}
    nl_run = None

    def newline_run():
        nonlocal nl_run
        if nl_run is None:
            nl_run, one = fresh(f"{NL}$dropped"), fresh(f"{NL}$lexeme")
            rules[nl_run] = [(one,), (nl_run, one)]
            rules[one] = []
            for i, (lex, rest) in enumerate(variants):
                t = fresh(f"{NL}@{i}")
                terminals[t] = embedded(lex)
                if rest is not None:
                    rests[t] = rest
                rules[one].append((t,))
        return nl_run

    def in_paren(x):
        if x in paren:
            return paren[x]
        if x == NL or x in seg_inner:
            return None
        name = paren[x] = fresh(f"{x}$p")
        paren[name] = name
        if x not in rules:  # a terminal (or one the caller turns into a rule of lexeme variants later)
            rules[name] = [(x,), (newline_run(), x)]
        else:
            alts = []
            for rhs in rules[x]:
                new = tuple(in_paren(y) for y in rhs)
                if None not in new:
                    alts.append(new)
            rules[name] = alts
        return name

    if opens:
        for a in list(rules):
            if a in paren.values():
                continue
            alts = []
            for rhs in rules[a]:
                depth, new = 0, []
                for x in rhs:
                    if x in closes:
                        depth -= 1
                        if depth < 0:
                            raise Unsupported(f"a closing bracket {x} without its opening one in the same rule",
                                              _rule(cfg, a))
                    new.append(in_paren(x) if depth > 0 or (x in closes) else x)
                    if x in opens:
                        depth += 1
                if depth:
                    raise Unsupported("an opening bracket without its closing one in the same rule", _rule(cfg, a))
                alts.append(tuple(s for s in new))
            if None in {s for rhs in alts for s in rhs}:
                alts = [rhs for rhs in alts if None not in rhs]
            rules[a] = alts
    in_paren = None  # a recursive closure is a reference cycle: break it, so refcounting frees what it holds

    # 3. columns
    rules = left_chains(rules, fresh)
    nullable = _nullable(rules, terminals)
    relevant = _relevant(rules, NL, seg_inner)
    W = ind.max_column
    nl_at: dict = {}

    def newline(c):
        if c not in nl_at:
            name = nl_at[c] = fresh(f"{NL}#{c}")
            rules[name] = []
            weight = last_line_weight(c, ind.tab_len)
            for i, (lex, rest) in enumerate(variants):
                part = ops.intersect(lex, weight, max_states=max_states)
                if part.is_empty():
                    continue
                t = fresh(f"{NL}#{c}@{i}")
                terminals[t] = embedded(part)
                if rest is not None:
                    rests[t] = rest
                rules[name].append((t,))
        return nl_at[c]

    made: dict = {}
    todo: list = []

    def variant(x, c, s):
        if x not in relevant:
            return None if s == "P" else x
        k = (x, c, s)
        if k not in made:
            if x in seg_inner and s == "F":
                made[k] = None
            else:
                made[k] = fresh(f"{x}#{c}{s}")
                todo.append(k)
        return made[k]

    def expand(rhs, c):
        paths = {("F", ())}
        for x in rhs:
            new = set()
            for st, out in paths:
                if st == "E":
                    if nullable.get(x, False):
                        new.add(("E", out))
                    continue
                if x == NL:
                    if st == "F":
                        new.add(("P", out))
                    continue
                pre = out
                if st == "P":
                    if nullable.get(x, False):
                        new.add(("P", out))
                    pre = out + (newline(c),)
                for s2 in "FPE":
                    v = variant(x, c, s2)
                    if v is not None:
                        new.add((s2, pre + (v,)))
            paths = new
            if len(paths) > MAX_EXPANSION:
                raise LimitExceeded(f"the Indenter's columns expand one rule to more than {MAX_EXPANSION} "
                                    f"alternatives", "max_expansion", MAX_EXPANSION)
        ends = {"F": set(), "P": set(), "E": set()}
        for st, out in paths:
            ends[st].add(out)
            if st == "F":
                ends["E"].add(out)
            elif st == "P":
                ends["E"].add(out + (newline(c),))
        return ends

    start = fresh(f"{cfg.start}$indented")
    rules[start] = [(v,) for v in (variant(cfg.start, 0, "F"), variant(cfg.start, 0, "E")) if v is not None]
    while todo:
        x, c, s = todo.pop()
        name = made[(x, c, s)]
        if x in seg_inner:
            inner = seg_inner[x]
            rules[name] = [(newline(c2), v) for c2 in range(c + 1, W + 1)
                           if (v := variant(inner, c2, s)) is not None]
            continue
        alts = set()
        for rhs in rules[x]:
            alts |= expand(rhs, c)[s]
        rules[name] = sorted(alts)
    keep = _reachable(rules, terminals, start)
    out = CFG(start, {a: v for a, v in rules.items() if a in keep},
              {t: v for t, v in terminals.items() if t in keep or t in cfg.ignore},
              list(cfg.ignore), dict(cfg.positions))
    return out, {t: r for t, r in rests.items() if t in keep}


def _rule(cfg: CFG, a: str) -> str:
    line, col = cfg.where(a)
    return f"rule {a}" + (f" at line {line}, column {col}" if line else "")


def _nullable(rules: dict, terminals: dict) -> dict:
    null = {t: False for t in terminals}
    changed = True
    while changed:
        changed = False
        for a, alts in rules.items():
            if not null.get(a) and any(all(null.get(x, False) for x in rhs) for rhs in alts):
                null[a] = True
                changed = True
    return null


def _relevant(rules: dict, nl: str, segs: dict) -> set:
    """Nonterminals whose text may hold a newline token outside brackets."""
    rel = set(segs)
    changed = True
    while changed:
        changed = False
        for a, alts in rules.items():
            if a not in rel and any(x == nl or x in rel for rhs in alts for x in rhs):
                rel.add(a)
                changed = True
    return rel


def _reachable(rules: dict, terminals: dict, start: str) -> set:
    seen, todo = {start}, [start]
    while todo:
        for rhs in rules.get(todo.pop(), ()):
            for x in rhs:
                if x not in seen:
                    seen.add(x)
                    if x in rules:
                        todo.append(x)
    return seen

"""Composing grammars: regular pieces (IR) and context-free pieces (:class:`CFG`) into one CFG.

:class:`CFGBuilder` collects rules and terminals under fresh names, so that pieces written
separately (two Lark grammars that both say ``start`` and ``NAME``, a JSON Schema's grammar, a
regex) cannot capture each other's symbols.  The language of what it builds is the one its
operations say -- concatenation, union, bounded or unbounded repetition of the pieces' languages
-- exactly, with each piece's ``%ignore`` kept to that piece: :func:`fold_ignores` first rewrites
a grammar with ignored terminals into one without, as the grammar engine's normalisation does
(every terminal ``T`` becomes the lexer DFA of ``IGN* T``, each ignored lexeme its terminal's
longest match, :func:`~structgen.cfg.terminals.after_ignores`, and the start rule gets an
optional trailing run), so ignored text is allowed where the piece allows it and nowhere else.

Regular pieces stay regular inside: each becomes one terminal (a DFA in the engine), and the
callers merge neighbouring regular pieces into one node first.
"""
from __future__ import annotations

from ..automaton import ir
from ..errors import GrammarError
from .grammar import CFG, name_maker, nullable as nullable_symbols
from .terminals import after_ignores, build, drop_epsilon, with_epsilon

__all__ = ["CFGBuilder", "fold_ignores", "lazy", "trim_edges"]

DEFAULT_MAX_STATES = 100_000


def fold_ignores(cfg: CFG, opaque=frozenset(), max_states: int = DEFAULT_MAX_STATES) -> CFG:
    """The grammar with the same language and no ignored terminals (``cfg`` itself when it has
    none).  Terminals named in ``opaque`` are left as they are (a placeholder that the caller
    replaces by a whole grammar): each use of one becomes a rule allowing a run of ignored
    lexemes before it."""
    if not cfg.ignore:
        return cfg
    cfg.validate()
    ign = [(n, build(cfg.terminals[n], max_states=max_states)) for n in cfg.ignore]
    ign = [(n, drop_epsilon(d) if d.accepting[d.start] else d) for n, d in ign if not d.is_empty()]
    used = {s for alts in cfg.rules.values() for rhs in alts for s in rhs if s in cfg.terminals}
    fresh = name_maker(set(cfg.rules) | set(cfg.terminals))

    run = after_ignores(ign, None, max_states) if ign else None
    if run is not None and run.is_empty():
        run = None
    run_name = fresh("$ignored") if run is not None else None
    terminals = {}
    rules = {a: list(alts) for a, alts in cfg.rules.items()}
    wrap = {}
    for t in sorted(used):
        if t in opaque:
            if run is not None:
                w = wrap[t] = fresh(f"{t}$ign")
                rules[w] = [(t,), (run_name, t)]
            terminals[t] = cfg.terminals[t]
            continue
        d = build(cfg.terminals[t], max_states=max_states)
        if not d.is_empty() and ign:
            body = drop_epsilon(d) if d.accepting[d.start] else d
            if not body.is_empty():
                body = after_ignores(ign, body, max_states, t)
            d = with_epsilon(body) if d.accepting[d.start] else body
        terminals[t] = ir.NOTHING if d.is_empty() else ir.Embed(d)
    if wrap:
        rules = {a: [tuple(wrap.get(s, s) if a not in wrap.values() else s for s in rhs) for rhs in alts]
                 for a, alts in rules.items()}
    start = cfg.start
    if run is not None:
        terminals[run_name] = ir.Embed(run)
        start = fresh(f"{cfg.start}$ign")
        rules[start] = [(cfg.start,), (cfg.start, run_name)]
    return CFG(start, rules, terminals, [], dict(cfg.positions))


def lazy(node: ir.Node) -> ir.Node:
    """The words of ``node`` none of whose proper prefixes is a word (the shortest match, as a
    lazy lexeme: ``/(.|\\n)*/ "<f"`` ends at the first ``<f``)."""
    return ir.And((node, ir.Not(ir.seq(node, ir.repeat(ir.ANY_CHAR, 1, None)))))


class CFGBuilder:
    """Rules and terminals collected under fresh names; :meth:`grammar` hands out the CFG.

    Every method returns the symbol that derives the piece's language."""

    def __init__(self, prefix: str = "c"):
        self.rules: dict = {}
        self.terminals: dict = {}
        self.positions: dict = {}
        self.prefix = prefix
        self._n = 0
        self._terminal_of: dict = {}

    def fresh(self, hint: str) -> str:
        self._n += 1
        return f"{self.prefix}{self._n}:{hint}"

    def terminal(self, node: ir.Node, hint: str = "re") -> str:
        """A terminal for the regular language ``node`` (one per distinct node)."""
        name = self._terminal_of.get(node)
        if name is None:
            name = self._terminal_of[node] = self.fresh(hint)
            self.terminals[name] = node
        return name

    def embed(self, cfg: CFG, substitute: dict | None = None, hint: str = "g") -> str:
        """A renamed copy of ``cfg`` (ignored terminals folded in first); uses of the terminals
        named in ``substitute`` become the symbols given there (symbols of this builder)."""
        substitute = dict(substitute or {})
        cfg = fold_ignores(cfg, opaque=frozenset(substitute))
        tag = self.fresh(hint)
        ren = {}
        for name in list(cfg.rules) + [t for t in cfg.terminals if t not in substitute]:
            ren[name] = f"{tag}.{name}"
        ren.update(substitute)
        for a, alts in cfg.rules.items():
            self.rules[ren[a]] = [tuple(ren[s] for s in rhs) for rhs in alts]
        for t, node in cfg.terminals.items():
            if t not in substitute:
                self.terminals[ren[t]] = node
        for n, pos in cfg.positions.items():
            if n in ren and n not in substitute:
                self.positions[ren[n]] = pos
        return ren[cfg.start]

    def rule(self, alternatives, hint: str = "r") -> str:
        """A nonterminal deriving each of ``alternatives`` (tuples of symbols)."""
        name = self.fresh(hint)
        self.rules[name] = [tuple(a) for a in alternatives]
        return name

    def sequence(self, symbols, hint: str = "seq") -> str:
        symbols = tuple(symbols)
        return symbols[0] if len(symbols) == 1 else self.rule([symbols], hint)

    def repeat(self, symbol: str, lo: int, hi: int | None, hint: str = "rep") -> str:
        """``symbol`` repeated ``lo`` to ``hi`` times (``None``: unbounded): ``lo`` copies, then
        a left-recursive loop or ``hi - lo`` nested options (one derivation per count)."""
        if lo < 0 or (hi is not None and hi < lo):
            raise GrammarError(f"repetition bounds {lo}..{hi} are not 0 <= min <= max")
        head = (symbol,) * lo
        if hi is None:
            loop = self.rule([()], hint)
            self.rules[loop].append((loop, symbol))
            return self.rule([head + (loop,)], hint)
        opt = None
        for _ in range(hi - lo):
            opt = self.rule([(), (symbol,) + ((opt,) if opt else ())], hint)
        return self.rule([head + ((opt,) if opt else ())], hint)

    def grammar(self, start: str) -> CFG:
        """The CFG of everything built, starting at ``start`` (a nonterminal is made for a start
        that is a terminal)."""
        if start in self.terminals:
            start = self.rule([(start,)], "start")
        return CFG(start, dict(self.rules), dict(self.terminals), [], dict(self.positions))


def trim_edges(cfg: CFG, chars: ir.CharSet, max_states: int = DEFAULT_MAX_STATES) -> CFG:
    """The grammar of ``cfg``'s sentences that neither start nor end with a character of
    ``chars`` (an exact intersection: a JSON value without whitespace around it).  ``cfg`` has no
    ignored terminals (see :func:`fold_ignores`).  Each nonterminal gets at most one copy per edge:
    ``A$nf`` derives the non-empty sentences of ``A`` whose first character is not in ``chars``
    (an alternative ``X1..Xn`` gives ``Xi$nf X(i+1)..Xn`` for every ``i`` whose ``X1..X(i-1)`` may
    derive nothing), ``A$nl`` likewise at the end."""
    if cfg.ignore:
        raise GrammarError("trim_edges() takes a grammar without ignored terminals (fold_ignores first)")
    other = chars.negate()
    anything = ir.repeat(ir.ANY_CHAR, 0, None)
    for first in (True, False):
        eps = set()
        for t, n in cfg.terminals.items():
            d = build(n, max_states=max_states)
            if d.accepting[d.start]:
                eps.add(t)
        nullable = nullable_symbols(cfg.rules, eps)
        rules, terminals = {a: list(alts) for a, alts in cfg.rules.items()}, dict(cfg.terminals)
        tag = "$nf" if first else "$nl"
        done, todo = {}, []

        def copy(s):
            n = done.get(s)
            if n is None:
                n = s + tag
                while n in rules or n in terminals:
                    n += "_"
                done[s] = n
                if s in cfg.terminals:
                    edge = ir.seq(other, anything) if first else ir.seq(anything, other)
                    terminals[n] = ir.And((cfg.terminals[s], edge))
                else:
                    todo.append(s)
            return n

        start = copy(cfg.start)
        while todo:
            a = todo.pop()
            alts = []
            for rhs in cfg.rules[a]:
                for i in (range(len(rhs)) if first else range(len(rhs) - 1, -1, -1)):
                    # the symbols on the edge side of X_i derive nothing here (so they are left out)
                    alts.append((copy(rhs[i]),) + rhs[i + 1:] if first else rhs[:i] + (copy(rhs[i]),))
                    if rhs[i] not in nullable:
                        break
            rules[done[a]] = alts
        if cfg.start in nullable:
            rules[start + "$e"] = [(start,), ()]
            start = start + "$e"
        cfg = CFG(start, rules, terminals, [], dict(cfg.positions))
    return cfg

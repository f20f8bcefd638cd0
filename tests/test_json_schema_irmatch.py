"""An independent IR matcher (Brzozowski derivatives) used as a second oracle for the schema tests.

It shares no code with the automaton builder: it decides membership of a *string* in an IR node by
taking derivatives character by character over hash-consed terms, so ``And``/``Not`` cost nothing
special.  ``Embed`` leaves are walked byte-wise through their ByteDFA.  It is slow on long inputs but
plenty for test instances, and it lets the JSON Schema emitter be tested before (and against) the
DFA builder.
"""
from __future__ import annotations

from structgen.automaton import ir

_EPS, _NONE = 0, 1


class IRMatcher:
    """``IRMatcher(node).fullmatch(text) -> bool``; ``text`` is a str of code points."""

    def __init__(self, node: ir.Node):
        self._terms: list = [("eps",), ("none",)]
        self._ids: dict = {("eps",): 0, ("none",): 1}
        self._by_node: dict = {}
        self._null: dict = {}
        self._deriv: dict = {}
        self.root = self._convert(node)

    # -- hash-consing ------------------------------------------------------------------------
    def _mk(self, t) -> int:
        i = self._ids.get(t)
        if i is None:
            i = len(self._terms)
            self._terms.append(t)
            self._ids[t] = i
        return i

    def _seq(self, a: int, b: int) -> int:
        if a == _NONE or b == _NONE:
            return _NONE
        if a == _EPS:
            return b
        if b == _EPS:
            return a
        ta = self._terms[a]
        if ta[0] == "seq":  # right-associate
            return self._seq(ta[1], self._seq(ta[2], b))
        return self._mk(("seq", a, b))

    def _alt(self, items) -> int:
        flat = set()
        for i in items:
            t = self._terms[i]
            if t[0] == "alt":
                flat.update(t[1])
            elif i != _NONE:
                flat.add(i)
        if not flat:
            return _NONE
        if len(flat) == 1:
            return next(iter(flat))
        return self._mk(("alt", frozenset(flat)))

    def _and(self, items) -> int:
        flat = set()
        for i in items:
            t = self._terms[i]
            if i == _NONE:
                return _NONE
            if t[0] == "and":
                flat.update(t[1])
            else:
                flat.add(i)
        if len(flat) == 1:
            return next(iter(flat))
        return self._mk(("and", frozenset(flat)))

    def _not(self, a: int) -> int:
        t = self._terms[a]
        if t[0] == "not":
            return t[1]
        return self._mk(("not", a))

    def _rep(self, a: int, lo: int, hi) -> int:
        if hi is not None and hi == 0:
            return _EPS
        if a == _NONE:
            return _EPS if lo == 0 else _NONE
        if a == _EPS:
            return _EPS
        return self._mk(("rep", a, lo, hi))

    def _convert(self, node) -> int:
        key = id(node)
        hit = self._by_node.get(key)
        if hit is not None and hit[0] is node:
            return hit[1]
        if isinstance(node, ir.CharSet):
            r = self._mk(("chars", node.ranges)) if node.ranges else _NONE
        elif isinstance(node, ir.Seq):
            r = _EPS
            for it in reversed(node.items):
                r = self._seq(self._convert(it), r)
        elif isinstance(node, ir.Alt):
            r = self._alt([self._convert(it) for it in node.items])
        elif isinstance(node, ir.Repeat):
            r = self._rep(self._convert(node.item), node.min, node.max)
        elif isinstance(node, ir.And):
            r = self._and([self._convert(it) for it in node.items])
        elif isinstance(node, ir.Not):
            r = self._not(self._convert(node.item))
        elif isinstance(node, ir.Embed):
            r = self._mk(("dfa", id(node.dfa), node.dfa.start))
            self._dfas = getattr(self, "_dfas", {})
            self._dfas[id(node.dfa)] = node.dfa
        else:
            raise TypeError(f"IRMatcher cannot handle {type(node).__name__}")
        self._by_node[key] = (node, r)
        return r

    # -- derivatives -------------------------------------------------------------------------
    def nullable(self, i: int) -> bool:
        v = self._null.get(i)
        if v is not None:
            return v
        t = self._terms[i]
        k = t[0]
        if k == "eps":
            v = True
        elif k in ("none", "chars"):
            v = False
        elif k == "seq":
            v = self.nullable(t[1]) and self.nullable(t[2])
        elif k == "alt":
            v = any(self.nullable(x) for x in t[1])
        elif k == "and":
            v = all(self.nullable(x) for x in t[1])
        elif k == "not":
            v = not self.nullable(t[1])
        elif k == "rep":
            v = t[2] == 0 or self.nullable(t[1])
        elif k == "dfa":
            dfa = self._dfas[t[1]]
            v = t[2] >= 0 and bool(dfa.accepting[t[2]])
        self._null[i] = v
        return v

    def deriv(self, i: int, c: int) -> int:
        key = (i, c)
        v = self._deriv.get(key)
        if v is not None:
            return v
        t = self._terms[i]
        k = t[0]
        if k in ("eps", "none"):
            v = _NONE
        elif k == "chars":
            v = _EPS if any(a <= c <= b for a, b in t[1]) else _NONE
        elif k == "seq":
            v = self._seq(self.deriv(t[1], c), t[2])
            if self.nullable(t[1]):
                v = self._alt([v, self.deriv(t[2], c)])
        elif k == "alt":
            v = self._alt([self.deriv(x, c) for x in t[1]])
        elif k == "and":
            v = self._and([self.deriv(x, c) for x in t[1]])
        elif k == "not":
            v = self._not(self.deriv(t[1], c))
        elif k == "rep":
            _, a, lo, hi = t
            v = self._seq(self.deriv(a, c), self._rep(a, max(lo - 1, 0), None if hi is None else hi - 1))
        elif k == "dfa":
            dfa = self._dfas[t[1]]
            s = dfa.walk(chr(c).encode("utf-8", "surrogatepass"), t[2]) if t[2] >= 0 else -1
            v = self._mk(("dfa", t[1], s)) if s >= 0 else _NONE
        self._deriv[key] = v
        return v

    def fullmatch(self, text: str) -> bool:
        s = self.root
        for ch in text:
            s = self.deriv(s, ord(ch))
            if s == _NONE:
                return False
        return self.nullable(s)


def test_irmatcher_basics():
    a, b = ir.literal("a"), ir.literal("b")
    node = ir.And((ir.Repeat(ir.alt(a, b), 0, None), ir.Not(ir.seq(ir.Repeat(ir.ANY_CHAR, 0, None), a, a,
                                                                        ir.Repeat(ir.ANY_CHAR, 0, None)))))
    m = IRMatcher(node)
    import itertools
    import re
    for n in range(6):
        for t in itertools.product("ab", repeat=n):
            s = "".join(t)
            assert m.fullmatch(s) == ("aa" not in s), s
    m2 = IRMatcher(ir.Repeat(ir.literal("ab"), 2, 3))
    for s in ["", "ab", "abab", "ababab", "abababab", "aba"]:
        assert m2.fullmatch(s) == bool(re.fullmatch("(ab){2,3}", s))

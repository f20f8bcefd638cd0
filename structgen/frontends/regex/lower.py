"""Lowering: a regex parse tree (:mod:`.parser`) -> regular IR.

:meth:`Lowering.variants` splits a tree by its anchors into (start kind, end kind, anchor-free
tree) variants (anchors only at the pattern's edges, else :class:`Unsupported`);
:meth:`Lowering.lower` turns an anchor-free tree followed by a continuation into IR, compiling
possessive quantifiers and atomic groups exactly (``X{m,n}+ K`` is
``X{m,n}(K ∩ ¬(X.*)) | X{n}K`` for a prefix-free, non-nullable ``X``; other bodies raise).
A lookahead sees the rest of the input, which the continuation is: ``(?=X) K`` is
``K ∩ X.*`` and ``(?!X) K`` is ``K ∩ ¬(X.*)`` (``.`` any character; an end anchor in ``X``
ends ``X.*`` there).  A lookbehind becomes a marker byte, resolved on the built language
(:func:`.boundary.resolve_behind`).  Inside a repetition of at most :data:`LOOK_UNROLL` copies the
repetition is unrolled; inside a longer one a lookahead raises :class:`Unsupported`.
"""
from __future__ import annotations

from ...automaton import ir
from ...automaton.build import DEFAULT_MAX_STATES, build_dfa
from .boundary import BEHIND_BYTES, marker_complement, marker_node, marker_transparent
from .parser import ALT, ANCHOR, ATOMIC, EMPTY_SEQ, LIT, LOOK, REP, SEQ, SET, Parser, Tree

ANY_STAR = ir.Repeat(ir.ANY_CHAR, 0, None)
#: most copies of a repeated sub-pattern holding a lookahead that are unrolled
LOOK_UNROLL = 4
#: what may follow a lookahead body, by the end anchor it ends with
_LOOK_TAIL = {None: ANY_STAR, "Z": ir.EMPTY, "$": ir.repeat(ir.literal("\n"), 0, 1)}



class Lowering:
    def __init__(self, parser: Parser, max_states: int = DEFAULT_MAX_STATES, boundary: bool = False):
        self.parser = parser
        self.max_states = max_states  # bounds the DFAs that decide prefix-freeness
        # marker bytes in the language (a terminal's lexeme end inside the continuation, lookbehind
        # positions): lookaheads see through them
        self.boundary = boundary
        self.behind: dict = {}  # id(lookbehind tree) -> (marker byte, body IR, negative, position, tree)

    def behind_marker(self, node: Tree) -> ir.Node:
        """The marker standing where lookbehind ``node`` looks back from (see :mod:`.boundary`)."""
        hit = self.behind.get(id(node))
        if hit is None:
            if len(self.behind) == len(BEHIND_BYTES):
                raise self.parser.unsupported(f"more than {len(BEHIND_BYTES)} lookbehinds", node.pos)
            if node.a.poss or node.a.anchor is not None:
                raise self.parser.unsupported("a lookaround or an anchor inside a lookbehind", node.pos)
            hit = self.behind[id(node)] = (BEHIND_BYTES[len(self.behind)], self.plain(node.a), node.b, node.pos, node)
        return marker_node(hit[0])

    def seen(self, node: ir.Node) -> ir.Node:
        """What a lookahead accepts (``node``: the rests of the input), as seen from inside the
        pattern: through the lexeme's end marker when ``boundary``."""
        return marker_transparent(node, self.max_states) if self.boundary else node

    def unseen(self, node: ir.Node) -> ir.Node:
        """The complement of :meth:`seen` (a negative lookahead, a possessive part's stop)."""
        return marker_complement(node, self.max_states) if self.boundary else ir.Not(node)

    # anchors: split a tree into (start kind, end kind, anchor-free tree) variants
    def variants(self, node: Tree) -> list:
        if node.anchor is None:
            return [(None, None, node)]
        k = node.kind
        if k == ANCHOR:
            return [(node.b, None, EMPTY_SEQ)] if node.a == "start" else [(None, node.b, EMPTY_SEQ)]
        if k == ALT:
            out = []
            for b in node.a:
                out.extend(self.variants(b))
            return self.merge(out, node.pos)
        if k == SEQ:
            items = node.a
            for mid in items[1:-1]:
                if mid.anchor is not None:
                    raise self.anchor_error(mid.anchor)
            head = self.variants(items[0])
            tail = self.variants(items[-1])
            out = []
            for sk, ek, h in head:
                if ek is not None:
                    raise self.anchor_error(self.first_end_anchor(items[0]))
                for sk2, ek2, t in tail:
                    if sk2 is not None:
                        raise self.anchor_error(self.first_start_anchor(items[-1]))
                    out.append((sk, ek2, Tree(SEQ, node.pos, [h, *items[1:-1], t])))
            return self.merge(out, node.pos)
        raise self.anchor_error(node.anchor)

    @staticmethod
    def merge(vs, pos):
        by: dict = {}
        for sk, ek, n in vs:
            by.setdefault((sk, ek), []).append(n)
        return [(sk, ek, ns[0] if len(ns) == 1 else Tree(ALT, pos, ns)) for (sk, ek), ns in by.items()]

    def anchor_error(self, pos):
        return self.parser.unsupported("an anchor that is not at the start or end of the pattern", pos)

    def _find_anchor(self, node, side):
        if node.kind == ANCHOR:
            return node.pos if node.a == side else None
        if node.kind in (SEQ, ALT):
            for x in node.a:
                r = self._find_anchor(x, side)
                if r is not None:
                    return r
        if node.kind in (REP, ATOMIC):
            return self._find_anchor(node.a, side)
        return None

    def first_end_anchor(self, node):
        pos = self._find_anchor(node, "end")
        return node.anchor if pos is None else pos

    def first_start_anchor(self, node):
        pos = self._find_anchor(node, "start")
        return node.anchor if pos is None else pos

    # possessive-free, anchor-free tree -> IR
    def plain(self, node: Tree) -> ir.Node:
        """The IR of a tree without anchors, possessive parts or atomic groups (children first, on
        an explicit stack: trees nest as deep as the parser's ``max_depth``)."""
        done: dict = {}  # id(tree) -> its IR (the trees stay alive meanwhile)
        todo = [(node, False)]
        while todo:
            x, expanded = todo.pop()
            k = x.kind
            if k == SET:
                done[id(x)] = x.a
            elif k == LIT:
                done[id(x)] = ir.literal(x.a)
            elif k not in (SEQ, ALT, REP):
                raise AssertionError(k)  # pragma: no cover
            elif not expanded:
                todo.append((x, True))
                todo.extend((c, False) for c in (x.a if k != REP else (x.a,)))
            elif k == SEQ:
                done[id(x)] = ir.seq(*(done[id(c)] for c in x.a)) if x.a else ir.EMPTY
            elif k == ALT:
                done[id(x)] = ir.alt(*(done[id(c)] for c in x.a))
            else:
                done[id(x)] = ir.repeat(done[id(x.a)], x.b, x.c)
        return done[id(node)]

    # tree followed by continuation k -> IR (continuation passing only where needed)
    def lower(self, node: Tree, k: ir.Node) -> ir.Node:
        if not node.poss:
            return ir.seq(self.plain(node), k)
        kind = node.kind
        if kind == SEQ:
            for x in reversed(node.a):
                k = self.lower(x, k)
            return k
        if kind == ALT:
            return ir.alt(*(self.lower(x, k) for x in node.a))
        if kind == ATOMIC:
            body = node.a
            if not body.poss and self.prefix_free(self.plain(body)):
                return ir.seq(self.plain(body), k)
            if body.kind == REP and not body.a.poss and body.d != "lazy":
                return self.possessive(body, k, node.pos)
            raise self.parser.unsupported("an atomic group whose body can match in several ways",
                                          node.pos)
        if kind == LOOK:
            if node.c:  # a lookbehind: its condition is checked on the built language
                return ir.seq(self.behind_marker(node), k)
            seen = self.look_language(node.a, node.pos)
            return ir.And((k, self.unseen(seen) if node.b else self.seen(seen)))
        if kind == REP:
            if node.d == "possessive" and not node.a.poss:
                return self.possessive(node, k, node.pos)
            if node.look and node.d != "possessive" and node.c is not None and node.c <= LOOK_UNROLL:
                copies = [Tree(SEQ, node.pos, [node.a] * n) for n in range(node.b, node.c + 1)]
                return self.lower(Tree(ALT, node.pos, copies), k)
            if node.look:
                raise self.parser.unsupported("a lookahead inside a repetition", node.pos)
            raise self.parser.unsupported("a possessive quantifier or atomic group inside a "
                                          "repetition", node.pos)
        raise AssertionError(kind)  # pragma: no cover

    def look_language(self, body: Tree, pos: int) -> ir.Node:
        """The remainders of the input a lookahead with ``body`` accepts: ``body`` then anything
        (or, where ``body`` ends with an end anchor, the end of the input there)."""
        out = []
        for sk, ek, b in self.variants(body):
            if sk is not None or ek not in _LOOK_TAIL:
                raise self.parser.unsupported("a start or multiline anchor inside a lookahead", pos)
            out.append(self.lower(b, _LOOK_TAIL[ek]))
        return ir.alt(*out)

    def possessive(self, node: Tree, k: ir.Node, pos: int) -> ir.Node:
        x = self.plain(node.a)
        lo, hi = node.b, node.c
        if hi is not None and hi == lo:
            return ir.seq(ir.repeat(x, lo, lo), k)
        if not self.prefix_free(x):
            raise self.parser.unsupported(
                "a possessive quantifier over a sub-pattern that can match in several ways", pos)
        stop = ir.And((k, self.unseen(ir.seq(x, ANY_STAR))))  # continuation not starting with x
        if hi is None:
            return ir.seq(ir.repeat(x, lo, None), stop)
        return ir.alt(ir.seq(ir.repeat(x, lo, hi - 1), stop), ir.seq(ir.repeat(x, hi, hi), k))

    def prefix_free(self, x: ir.Node) -> bool:
        """Non-empty and no match is a proper prefix of another (so X matches in at most
        one way at any position)."""
        d = build_dfa(x, max_states=self.max_states)
        acc = d.accepting
        if d.is_empty() or acc[0]:
            return False
        return not bool((d.transitions[acc] >= 0).any())

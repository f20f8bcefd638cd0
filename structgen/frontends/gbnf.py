"""llama.cpp GBNF grammars -> :class:`~structgen.cfg.grammar.CFG`.

Syntax (as llama.cpp's ``grammar-parser``): ``name ::= alternatives`` rules
(names ``[A-Za-z0-9-]+``), string literals ``"..."`` and character classes
``[...]``/``[^...]`` with escapes ``\\n \\r \\t \\\\ \\" \\] \\xHH \\uHHHH
\\UHHHHHHHH``, ``.`` (any character), groups ``( )``, alternation ``|``, postfix
``* + ?`` and ``{m}``, ``{m,}``, ``{m,n}``; ``#`` comments.  A rule ends at a
newline outside parentheses.  There is no ``%ignore``: the grammar describes
characters exactly.

Translation: regular sub-expressions (anything without a reference to a
recursive or non-regular rule) are folded into single terminals, so the parser
works on lexemes rather than single characters.  Errors carry line/column.
"""
from __future__ import annotations

from ..automaton import ir
from ..errors import GrammarError
from ..cfg.grammar import CFG


MAX_NESTING = 200  # parentheses nested deeper raise GrammarError (the front end recurses per level)


class _P:
    def __init__(self, text: str):
        self.t = text
        self.i = 0
        self.depth = 0

    def lc(self, i=None):
        i = self.i if i is None else i
        line = self.t.count("\n", 0, i) + 1
        return line, i - (self.t.rfind("\n", 0, i) + 1) + 1

    def err(self, msg, i=None):
        return GrammarError(f"GBNF: {msg}", *self.lc(i))

    def peek(self, k=0):
        j = self.i + k
        return self.t[j] if j < len(self.t) else ""

    def space(self, newline_ok: bool):
        t = self.t
        while self.i < len(t):
            c = t[self.i]
            if c in " \t" or (newline_ok and c in "\r\n"):
                self.i += 1
            elif c == "#":
                while self.i < len(t) and t[self.i] not in "\r\n":
                    self.i += 1
            else:
                break

    def name(self):
        j = self.i
        while self.i < len(self.t) and (self.t[self.i].isalnum() and self.t[self.i].isascii() or self.t[self.i] in "-_"):
            self.i += 1
        if j == self.i:
            raise self.err(f"expected a rule name, found {self.peek()!r}" if self.peek() else "expected a rule name")
        return self.t[j:self.i]

    def char(self):
        """One (possibly escaped) character inside a literal or class."""
        c = self.peek()
        if not c:
            raise self.err("unexpected end of input")
        if c != "\\":
            self.i += 1
            return ord(c)
        e = self.peek(1)
        simple = {"n": 10, "r": 13, "t": 9, "\\": 92, '"': 34, "[": 91, "]": 93, "-": 45, "^": 94, "/": 47}
        if e in simple:
            self.i += 2
            return simple[e]
        width = {"x": 2, "u": 4, "U": 8}.get(e)
        if width:
            h = self.t[self.i + 2:self.i + 2 + width]
            if len(h) != width or any(x not in "0123456789abcdefABCDEF" for x in h):
                raise self.err(f"bad \\{e} escape")
            cp = int(h, 16)
            if cp > ir.MAX_CODE_POINT:
                raise self.err("code point out of range")
            if 0xD800 <= cp <= 0xDFFF:
                raise self.err(f"\\{e}{h} is a surrogate, not a Unicode scalar value (no UTF-8 encoding)")
            self.i += 2 + width
            return cp
        raise self.err(f"unknown escape \\{e}")

    # -- expressions: ('lit', node) | ('ref', name, pos) | ('seq', [..]) | ('alt', [..]) | ('rep', x, lo, hi)
    def alternates(self, nested: bool):
        alts = [self.sequence(nested)]
        while self.peek() == "|":
            self.i += 1
            self.space(True)
            alts.append(self.sequence(nested))
        return alts[0] if len(alts) == 1 else ("alt", alts)

    def sequence(self, nested: bool):
        items = []
        while True:
            c = self.peek()
            start = self.i
            if c == '"':
                self.i += 1
                chars = []
                while self.peek() != '"':
                    if not self.peek():
                        raise self.err("unterminated string literal", start)
                    chars.append(self.char())
                self.i += 1
                items.append(("lit", ir.seq(*[ir.CharSet(((x, x),)) for x in chars]) if chars else ir.EMPTY))
            elif c == "[":
                self.i += 1
                neg = False
                if self.peek() == "^":
                    neg, self.i = True, self.i + 1
                ranges = []
                while self.peek() != "]":
                    if not self.peek():
                        raise self.err("unterminated character class", start)
                    lo = self.char()
                    hi = lo
                    if self.peek() == "-" and self.peek(1) not in ("]", ""):
                        self.i += 1
                        hi = self.char()
                        if hi < lo:
                            raise self.err("character range out of order", start)
                    ranges.append((lo, hi))
                self.i += 1
                cs = _no_surrogates(ir.CharSet.of(ranges))
                if neg:
                    cs = ir.CharSet.of(cs.negate().ranges)
                    cs = ir.CharSet(tuple(r for r in ir.CharSet.of(cs.ranges).ranges))
                    cs = _no_surrogates(cs)
                items.append(("lit", cs if cs.ranges else ir.NOTHING))
            elif c == ".":
                self.i += 1
                items.append(("lit", ir.ANY_CHAR))
            elif c == "(":
                if self.depth >= MAX_NESTING:
                    raise self.err(f"parentheses nested more than {MAX_NESTING} deep", start)
                self.i += 1
                self.space(True)
                self.depth += 1
                inner = self.alternates(True)
                self.depth -= 1
                if self.peek() != ")":
                    raise self.err("expected ')'", self.i)
                self.i += 1
                items.append(inner)
            elif c and (c.isalnum() and c.isascii() or c in "-_"):
                name = self.name()
                save = self.i
                self.space(False)
                if self.t.startswith("::=", self.i):
                    self.i = start  # the next rule begins: this sequence is over
                    break
                self.i = save
                items.append(("ref", name, start))
            elif c and c in "*+?":
                if not items:
                    raise self.err(f"'{c}' with nothing to repeat")
                self.i += 1
                lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
                items[-1] = ("rep", items[-1], lo, hi)
            elif c == "{":
                if not items:
                    raise self.err("'{' with nothing to repeat")
                self.i += 1
                self.space(False)
                lo = self.number()
                hi = lo
                self.space(False)
                if self.peek() == ",":
                    self.i += 1
                    self.space(False)
                    hi = self.number() if self.peek().isdigit() else None
                    self.space(False)
                if self.peek() != "}":
                    raise self.err("expected '}'")
                self.i += 1
                if hi is not None and hi < lo:
                    raise self.err("repetition {m,n} with n < m", start)
                items[-1] = ("rep", items[-1], lo, hi)
            else:
                break
            self.space(nested)
        return ("seq", items)

    def number(self):
        j = self.i
        while self.peek().isdigit():
            self.i += 1
        if j == self.i:
            raise self.err("expected a number")
        return int(self.t[j:self.i])


def _no_surrogates(cs: ir.CharSet) -> ir.CharSet:
    out = []
    for a, b in cs.ranges:
        if a <= 0xDFFF and b >= 0xD800:
            if a < 0xD800:
                out.append((a, 0xD7FF))
            if b > 0xDFFF:
                out.append((0xE000, b))
        else:
            out.append((a, b))
    return ir.CharSet(tuple(out))


def parse_gbnf(text: str):
    """The rules of a GBNF text: ``{name: (expr, (line, col))}`` (raw AST)."""
    p = _P(text)
    rules = {}
    p.space(True)
    while p.i < len(p.t):
        start = p.i
        name = p.name()
        p.space(False)
        if not p.t.startswith("::=", p.i):
            raise p.err("expected '::='")
        p.i += 3
        p.space(True)
        expr = p.alternates(False)
        if p.peek() not in ("", "\n", "\r") and not _at_rule_start(p):
            raise p.err(f"unexpected {p.peek()!r}; expected newline or end of input")
        if name in rules:
            raise p.err(f"rule {name!r} defined twice", start)
        rules[name] = (expr, p.lc(start))
        p.space(True)
    return rules


def _at_rule_start(p: _P) -> bool:
    save = p.i
    try:
        p.name()
        p.space(False)
        return p.t.startswith("::=", p.i)
    except GrammarError:
        return False
    finally:
        p.i = save


def gbnf_to_cfg(text: str, start: str = "root") -> CFG:
    """Translate a GBNF grammar into a :class:`CFG` (start rule ``start``)."""
    raw = parse_gbnf(text)
    p = _P(text)
    if start not in raw:
        raise GrammarError(f"GBNF: start rule {start!r} is not defined", 1, 1)
    # undefined references
    def refs(e, out):
        if e[0] == "ref":
            out.append(e)
        elif e[0] in ("seq", "alt"):
            for x in e[1]:
                refs(x, out)
        elif e[0] == "rep":
            refs(e[1], out)
        return out

    deps = {}
    for name, (e, _) in raw.items():
        rs = refs(e, [])
        for r in rs:
            if r[1] not in raw:
                raise GrammarError(f"GBNF: undefined rule {r[1]!r}", *p.lc(r[2]))
        deps[name] = {r[1] for r in rs}
    # regular rules: no (transitive) cycle through themselves
    regular, order = _regular_rules(deps)
    live, todo = {start}, [start]  # only the rules the start rule reaches
    while todo:
        for d in deps[todo.pop()]:
            if d not in live:
                live.add(d)
                todo.append(d)

    rules: dict = {}
    terminals: dict = {}
    term_ids: dict = {}
    positions = {n: lc for n, (_, lc) in raw.items()}
    counter = [0]
    reg_ir: dict = {}

    def to_ir(e):
        k = e[0]
        if k == "lit":
            return e[1]
        if k == "ref":
            if e[1] not in reg_ir:
                reg_ir[e[1]] = to_ir(raw[e[1]][0])
            return reg_ir[e[1]]
        if k == "seq":
            return ir.seq(*[to_ir(x) for x in e[1]]) if e[1] else ir.EMPTY
        if k == "alt":
            return ir.alt(*[to_ir(x) for x in e[1]])
        return ir.repeat(to_ir(e[1]), e[2], e[3])

    for n in order:  # dependencies first: to_ir of a reference is a lookup (no recursion along chains)
        if regular[n] and n in live:
            reg_ir[n] = to_ir(raw[n][0])

    def regular_expr(e):
        return all(regular[r[1]] for r in refs(e, []))

    def term(node):
        if node not in term_ids:
            name = f"__T{len(term_ids)}"
            term_ids[node] = name
            terminals[name] = node
        return term_ids[node]

    def fresh(base):
        counter[0] += 1
        return f"{base}__{counter[0]}"

    def symbols(e, owner):
        """A tuple of symbols deriving the language of ``e``."""
        if regular_expr(e):
            return (term(to_ir(e)),)
        k = e[0]
        if k == "ref":
            if e[1] not in emitted:
                emitted.add(e[1])
                pending.append(e[1])
            return (e[1],)
        if k == "seq":
            out, run = [], []
            for x in e[1]:
                if regular_expr(x):
                    run.append(to_ir(x))
                else:
                    if run:
                        out.append(term(ir.seq(*run)))
                        run = []
                    out.extend(symbols(x, owner))
            if run:
                out.append(term(ir.seq(*run)))
            return tuple(out)
        if k == "alt":
            n = fresh(owner)
            rules[n] = [symbols(x, owner) for x in e[1]]
            return (n,)
        # repetition of a non-regular expression
        item = symbols(e[1], owner)
        lo, hi = e[2], e[3]
        out = list(item * lo)
        if hi is None:
            n = fresh(owner)
            rules[n] = [(), (n,) + item]  # left recursion: Earley handles it
            out.append(n)
        else:
            for _ in range(hi - lo):
                n = fresh(owner)
                rules[n] = [(), item]
                out.append(n)
        return tuple(out)

    emitted, pending = {start}, [start]  # the rules the CFG references, from the start rule
    while pending:
        name = pending.pop()
        e = raw[name][0]
        if e[0] == "alt":
            rules[name] = [symbols(x, name) for x in e[1]]
        else:
            rules[name] = [symbols(e, name)]
    refs = to_ir = symbols = None  # recursive closures are reference cycles: break them, so refcounting frees what they hold
    return CFG(start, rules, terminals, [], positions)


def _regular_rules(deps):
    """``(regular, order)``: ``regular[n]`` -- rule ``n`` reaches no cycle of references (so it
    is a regular language, foldable into a terminal); ``order`` -- the rules, each after the rules
    it references (where there is no cycle).  Iterative: linear in the rules and references."""
    index, low, on, stack, cyclic, order = {}, {}, set(), [], set(), []
    for root in deps:
        if root in index:
            continue
        work = [(root, iter(deps[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            n, it = work[-1]
            for d in it:
                if d not in index:
                    index[d] = low[d] = len(index)
                    stack.append(d)
                    on.add(d)
                    work.append((d, iter(deps[d])))
                    break
                if d in on:
                    low[n] = min(low[n], index[d])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[n])
                if low[n] == index[n]:
                    comp = []
                    while True:
                        x = stack.pop()
                        on.discard(x)
                        comp.append(x)
                        if x == n:
                            break
                    if len(comp) > 1 or n in deps[n]:
                        cyclic.update(comp)
                    order.extend(comp)
    # a rule is not regular iff it reaches a cyclic rule: walk the references backwards
    users = {n: [] for n in deps}
    for n, ds in deps.items():
        for d in ds:
            users[d].append(n)
    bad, todo = set(cyclic), list(cyclic)
    while todo:
        for u in users[todo.pop()]:
            if u not in bad:
                bad.add(u)
                todo.append(u)
    return {n: n not in bad for n in deps}, order

"""Regex front-end: pattern text -> regular-language IR (:mod:`structgen.automaton.ir`).

``parse_regex(pattern, syntax="python", flags=0, anchored=True)``

Semantics
---------
* ``anchored=True`` (default): the IR matches exactly the strings ``s`` with
  ``re.fullmatch(pattern, s)``.  ``anchored=False``: *search* semantics, the strings
  containing a match anywhere (``re.search``); this is what JSON Schema's ``pattern``
  means.  ``^``/``\\A`` and ``$``/``\\Z`` are honoured in both modes; in search mode a
  Python ``$`` also matches before a final newline, as in ``re``.
  :func:`search_to_full` wraps an anchor-free node with ``.*`` on both ends.
* Anchors are supported at the edges of the pattern, including at the edges of
  top-level alternatives (``^a|b$``); anywhere else they raise :class:`Unsupported`
  naming the position.  ``\\b``, ``\\B``, lookarounds, backreferences and
  conditionals raise :class:`Unsupported`; syntax errors raise :class:`RegexError`
  with the 0-based position of the offending character.
* Lazy quantifiers do not change the language.  Possessive quantifiers and atomic
  groups *can* (``a*+a`` matches nothing), so they are compiled exactly:
  ``X{m,n}+`` followed by ``K`` is ``X{m,n}(K ∩ ¬(X.*)) | X{n}K``, valid when ``X`` is
  prefix-free and not nullable (one way to match each iteration); other bodies raise
  :class:`Unsupported`.

Syntax (``syntax=``)
--------------------
``"python"`` -- Python ``re`` on ``str``: ``\\d`` = Unicode decimal digits
(``str.isdecimal``), ``\\w`` = ``str.isalnum`` or ``_``, ``\\s`` = ``str.isspace``; ``.``
is any character but ``\\n``; ``re.ASCII``/``(?a)`` restricts ``\\d\\w\\s`` and case
folding to ASCII.  ``(?i)`` folds with Python's simple case mapping.

``"ecma"`` -- ECMA-262 (what JSON Schema specifies): ``\\d`` = ``[0-9]``, ``\\w`` =
``[A-Za-z0-9_]``, ``\\s`` = the ECMA white space and line terminator set, ``.`` excludes
``\\n \\r \\u2028 \\u2029``, ``$`` is end of input only, ``[]`` matches nothing and
``[^]`` any character, ``\\cX``, ``\\u{...}``, surrogate pairs ``\\uD83D\\uDE00`` and
``\\p{..}``/``\\P{..}`` (general categories only) are accepted, ``\\A \\Z`` and ``{,n}``
are not (the latter is literal text); multiline ``^``/``$`` raise :class:`Unsupported`.
ECMA case folding (``flags="i"``) uses Python's simple case mapping, not ECMA's
Canonicalize (they differ for a handful of characters).

Both syntaxes accept ``(?P<n>..)`` and ``(?<n>..)`` named groups, inline flags
``(?aimsx)``/``(?i:..)``, and ``(?#..)`` comments.

Flags: ``flags`` is an ``re`` flag int (``re.I | re.S | re.M | re.X | re.A``) or a string
of letters ``"imsxa"``.
"""
from __future__ import annotations

import re
import unicodedata
from functools import lru_cache

from ..automaton import ir
from ..errors import RegexError, Unsupported

__all__ = ["parse_regex", "search_to_full", "dfa_from_regex"]

PYTHON = "python"
ECMA = "ecma"

_ANY_STAR = ir.Repeat(ir.ANY_CHAR, 0, None)
_NL = ir.literal("\n")
MAX_REPEAT = 4294967294  # Python's MAXREPEAT - 1
_QUANT_RE = re.compile(r"\{(\d*)(,?)(\d*)\}")
_PLAIN_RUN = re.compile(r"[^\\\[\](){}.*+?^$|]+")

# ------------------------------------------------------------------ character tables


def _ranges_where(pred, top: int = ir.MAX_CODE_POINT) -> tuple:
    out, start = [], None
    for cp in range(top + 2):
        ok = cp <= top and not 0xD800 <= cp <= 0xDFFF and pred(chr(cp))
        if ok and start is None:
            start = cp
        elif not ok and start is not None:
            out.append((start, cp - 1))
            start = None
    return tuple(out)


@lru_cache(maxsize=None)
def _py_class(name: str) -> ir.CharSet:
    """Python's Unicode ``\\d \\w \\s`` from the str predicates ``re`` itself uses."""
    pred = {"d": str.isdecimal, "w": lambda c: c.isalnum() or c == "_", "s": str.isspace}[name]
    return ir.CharSet.of(_ranges_where(pred))


_ASCII_CLASSES = {
    "d": ir.CharSet.of([(0x30, 0x39)]),
    "w": ir.CharSet.of([(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]),
    "s": ir.CharSet.of([(0x09, 0x0D), (0x20, 0x20)]),  # \t \n \v \f \r and space
}
_ECMA_SPACE = ir.CharSet.of([(0x09, 0x0D), (0x20, 0x20), (0xA0, 0xA0), (0x1680, 0x1680),
                             (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F),
                             (0x205F, 0x205F), (0x3000, 0x3000), (0xFEFF, 0xFEFF)])
_ECMA_LINE_TERMINATORS = ir.CharSet.of([(0x0A, 0x0A), (0x0D, 0x0D), (0x2028, 0x2029)])

_GC_LONG = {
    "letter": "L", "cased_letter": "LC", "uppercase_letter": "Lu", "lowercase_letter": "Ll",
    "titlecase_letter": "Lt", "modifier_letter": "Lm", "other_letter": "Lo", "mark": "M",
    "nonspacing_mark": "Mn", "spacing_mark": "Mc", "enclosing_mark": "Me", "number": "N",
    "decimal_number": "Nd", "letter_number": "Nl", "other_number": "No", "punctuation": "P",
    "connector_punctuation": "Pc", "dash_punctuation": "Pd", "open_punctuation": "Ps",
    "close_punctuation": "Pe", "initial_punctuation": "Pi", "final_punctuation": "Pf",
    "other_punctuation": "Po", "symbol": "S", "math_symbol": "Sm", "currency_symbol": "Sc",
    "modifier_symbol": "Sk", "other_symbol": "So", "separator": "Z", "space_separator": "Zs",
    "line_separator": "Zl", "paragraph_separator": "Zp", "other": "C", "control": "Cc",
    "format": "Cf", "surrogate": "Cs", "private_use": "Co", "unassigned": "Cn",
}


@lru_cache(maxsize=None)
def _all_categories() -> dict:
    cats: dict = {}
    prev, start = None, 0
    for cp in range(ir.MAX_CODE_POINT + 2):
        c = unicodedata.category(chr(cp)) if cp <= ir.MAX_CODE_POINT else None
        if c != prev:
            if prev is not None:
                cats.setdefault(prev, []).append((start, cp - 1))
            prev, start = c, cp
    return cats


@lru_cache(maxsize=None)
def _general_category(short: str) -> ir.CharSet:
    cats = _all_categories()
    if short == "LC":
        names = ["Lu", "Ll", "Lt"]
    elif len(short) == 1:
        names = [c for c in cats if c[0] == short]
    else:
        names = [short]
    return ir.CharSet.of([r for n in names for r in cats.get(n, ())])


@lru_cache(maxsize=None)
def _fold_groups():
    """Case-equivalence classes: code points related by Python's simple lower/upper
    mapping (transitively).  Returns ``(sorted members, group id per member, groups)``."""
    try:
        from _sre import unicode_tolower as lower_cp
    except ImportError:  # pragma: no cover - other Python implementations
        def lower_cp(cp):
            s = chr(cp).lower()
            return ord(s) if len(s) == 1 else cp
    parent: dict = {}

    def find(x):
        while parent.get(x, x) != x:
            parent[x] = parent.get(parent[x], parent[x])
            x = parent[x]
        return x

    def join(a, b):
        ra, rb = find(a), find(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)

    for cp in range(0x20000):  # no cased characters above U+1FFFF
        if 0xD800 <= cp <= 0xDFFF:
            continue
        lo = lower_cp(cp)
        if lo != cp:
            join(cp, lo)
        up = chr(cp).upper()
        if len(up) == 1 and ord(up) != cp:
            join(cp, ord(up))
    groups: dict = {}
    for cp in list(parent):
        groups.setdefault(find(cp), {find(cp)}).add(cp)
    members, gid, glist = [], [], []
    for i, g in enumerate(groups.values()):
        glist.append(tuple(sorted(g)))
        for cp in g:
            members.append(cp)
            gid.append(i)
    order = sorted(range(len(members)), key=members.__getitem__)
    return [members[i] for i in order], [gid[i] for i in order], glist


def _case_closure(cs: ir.CharSet, ascii_only: bool) -> ir.CharSet:
    if ascii_only:
        extra = []
        for a, b in cs.ranges:
            for lo, hi, delta in ((0x41, 0x5A, 32), (0x61, 0x7A, -32)):
                x, y = max(a, lo), min(b, hi)
                if x <= y:
                    extra.append((x + delta, y + delta))
        return cs.union(ir.CharSet.of(extra)) if extra else cs
    import bisect

    members, gid, groups = _fold_groups()
    hit = set()
    for a, b in cs.ranges:
        i = bisect.bisect_left(members, a)
        j = bisect.bisect_right(members, b)
        hit.update(gid[i:j])
    if not hit:
        return cs
    extra = [(cp, cp) for g in hit for cp in groups[g]]
    return cs.union(ir.CharSet.of(extra))


# ------------------------------------------------------------------------ parse tree

_SET, _SEQ, _ALT, _REP, _ATOMIC, _ANCHOR, _LIT = range(7)


class _N:
    """A parse-tree node.  ``kind`` selects the meaning of ``a``/``b``/``c``/``d``:
    SET: a=CharSet; LIT: a=str (a run of plain characters); SEQ/ALT: a=list of nodes;
    REP: a=node, b=min, c=max, d=mode; ATOMIC: a=node; ANCHOR: a="start"|"end",
    b=kind ("A", "m", "Z", "$")."""

    __slots__ = ("kind", "pos", "a", "b", "c", "d", "anchor", "poss")

    def __init__(self, kind, pos, a=None, b=None, c=None, d=None):
        self.kind, self.pos, self.a, self.b, self.c, self.d = kind, pos, a, b, c, d
        if kind in (_SEQ, _ALT):
            self.anchor = next((x.anchor for x in a if x.anchor is not None), None)
            self.poss = any(x.poss for x in a)
        elif kind in (_REP, _ATOMIC):
            self.anchor = a.anchor
            self.poss = kind == _ATOMIC or d == "possessive" or a.poss
        elif kind == _ANCHOR:
            self.anchor, self.poss = pos, False
        else:
            self.anchor, self.poss = None, False


_EMPTY_SEQ = _N(_SEQ, 0, [])

_I, _M, _S, _X, _A, _U, _L = (int(f) for f in (re.I, re.M, re.S, re.X, re.A, re.U, re.L))
_FLAG_LETTERS = {"i": _I, "m": _M, "s": _S, "x": _X, "a": _A, "u": _U, "L": _L}
_HEX = "0123456789abcdefABCDEF"
_PY_SIMPLE = {"n": 10, "t": 9, "r": 13, "f": 12, "v": 11, "a": 7}
_ECMA_SIMPLE = {"n": 10, "t": 9, "r": 13, "f": 12, "v": 11}


class _Parser:
    def __init__(self, pattern: str, syntax: str, flags: int):
        self.p = pattern
        self.n = len(pattern)
        self.i = 0
        self.ecma = syntax == ECMA
        self.flags = flags
        self.groups = 0
        self.names: set = set()
        self.depth = 0
        self.started = False  # something other than global flags has been parsed

    # -- errors
    def err(self, msg, pos=None):
        return RegexError(msg, self.p, self.i if pos is None else pos)

    def unsupported(self, what, pos):
        e = Unsupported(f"{what} is not supported", where=f"position {pos} in regex {self.p!r}")
        e.pos = pos
        e.pattern = self.p
        return e

    # -- helpers
    def peek(self, k=0):
        j = self.i + k
        return self.p[j] if j < self.n else ""

    def skip_verbose(self):
        if not self.flags & _X:
            return
        while self.i < self.n:
            c = self.p[self.i]
            if c in " \t\n\r\f\v":
                self.i += 1
            elif c == "#":
                while self.i < self.n and self.p[self.i] != "\n":
                    self.i += 1
            else:
                break

    def charset(self, cs: ir.CharSet) -> ir.CharSet:
        if self.flags & _I:
            return _case_closure(cs, self.ascii())
        return cs

    def ascii(self):
        return bool(self.flags & _A)

    # -- grammar
    def parse(self) -> _N:
        node = self.alternation()
        if self.i < self.n:  # only a stray ')' stops the top level early
            raise self.err("unbalanced parenthesis")
        return node

    def alternation(self) -> _N:
        start = self.i
        branches = [self.sequence()]
        while self.peek() == "|":
            self.i += 1
            self.started = True
            branches.append(self.sequence())
        return branches[0] if len(branches) == 1 else _N(_ALT, start, branches)

    def sequence(self) -> _N:
        start = self.i
        items = []
        while True:
            self.skip_verbose()
            if self.i >= self.n or self.peek() in "|)":
                break
            pos = self.i
            if not self.flags & (_X | _I):
                # Fast path: a run of ordinary characters; its last one may carry a quantifier.
                m = _PLAIN_RUN.match(self.p, pos)
                if m and m.end() - pos >= 2:
                    self.i = m.end() - 1
                    items.append(_N(_LIT, pos, self.p[pos:self.i]))
                    self.started = True
                    continue
            atom = self.atom()
            if atom is None:
                continue
            self.started = True
            items.append(self.quantified(atom, pos))
        return items[0] if len(items) == 1 else _N(_SEQ, start, items)

    def quantifier_at(self):
        """``(lo, hi, end)`` when a quantifier starts at the cursor, else None."""
        c = self.peek()
        if c == "*":
            return 0, None, self.i + 1
        if c == "+":
            return 1, None, self.i + 1
        if c == "?":
            return 0, 1, self.i + 1
        if c != "{":
            return None
        m = _QUANT_RE.match(self.p, self.i)
        if not m:
            return None
        a, comma, b = m.groups()
        if not comma:
            if not a:
                return None
            lo = hi = int(a)
        else:
            if not a and self.ecma:
                return None  # ECMA: "{,n}" is literal text
            lo = int(a) if a else 0
            hi = int(b) if b else None
        return lo, hi, m.end()

    def quantified(self, atom: _N, atom_pos: int) -> _N:
        self.skip_verbose()
        q = self.quantifier_at()
        if q is None:
            return atom
        qpos = self.i
        if atom.kind == _ANCHOR:
            raise self.err("nothing to repeat", qpos)
        lo, hi, end = q
        if hi is not None and lo > hi:
            raise self.err("min repeat greater than max repeat", qpos + 1)
        if lo > MAX_REPEAT or (hi is not None and hi > MAX_REPEAT):
            raise self.err("the repetition number is too large", qpos + 1)
        self.i = end
        mode = "greedy"
        if self.peek() == "?":
            mode = "lazy"
            self.i += 1
        elif self.peek() == "+" and not self.ecma:
            mode = "possessive"
            self.i += 1
        self.skip_verbose()
        if self.quantifier_at() is not None:
            raise self.err("multiple repeat")
        return _N(_REP, atom_pos, atom, lo, hi, mode)

    def atom(self):
        c = self.p[self.i]
        pos = self.i
        if c == "(":
            return self.group()
        if c == "[":
            return _N(_SET, pos, self.char_class())
        if c == ".":
            self.i += 1
            if self.flags & _S:
                return _N(_SET, pos, ir.ANY_CHAR)
            excluded = _ECMA_LINE_TERMINATORS if self.ecma else ir.CharSet(((10, 10),))
            return _N(_SET, pos, excluded.negate())
        if c == "^":
            self.i += 1
            if self.flags & _M and self.ecma:
                raise self.unsupported("'^' in multiline mode with ECMA syntax", pos)
            return _N(_ANCHOR, pos, "start", "m" if self.flags & _M else "A")
        if c == "$":
            self.i += 1
            if self.flags & _M:
                if self.ecma:
                    raise self.unsupported("'$' in multiline mode with ECMA syntax", pos)
                return _N(_ANCHOR, pos, "end", "m")
            return _N(_ANCHOR, pos, "end", "Z" if self.ecma else "$")
        if c in "*+?":
            raise self.err("nothing to repeat")
        if c == "{" and self.quantifier_at() is not None:
            raise self.err("nothing to repeat")
        if c == "\\":
            return self.escape()
        self.i += 1
        return _N(_SET, pos, self.charset(ir.CharSet(((ord(c), ord(c)),))))

    # -- groups
    def group(self):
        open_pos = self.i
        self.i += 1
        if self.peek() != "?":
            self.groups += 1
            return self.group_body(open_pos)
        self.i += 1
        c = self.peek()
        if c == ":":
            self.i += 1
            return self.group_body(open_pos)
        if c == "P" and self.peek(1) == "<":
            self.i += 2
            self.group_name(">")
            return self.group_body(open_pos)
        if c == "<" and self.peek(1) not in "=!":
            self.i += 1
            self.group_name(">")
            return self.group_body(open_pos)
        if c == "P" and self.peek(1) == "=":
            raise self.unsupported("a backreference (?P=name)", open_pos)
        if c in "=!" or (c == "<" and self.peek(1) in "=!"):
            raise self.unsupported("a lookaround assertion", open_pos)
        if c == "(":
            raise self.unsupported("a conditional group", open_pos)
        if c == ">":
            self.i += 1
            body = self.group_body(open_pos)
            return _N(_ATOMIC, open_pos, body)
        if c == "#":
            end = self.p.find(")", self.i)
            if end < 0:
                raise self.err("missing ), unterminated comment", open_pos)
            self.i = end + 1
            return None
        if c in _FLAG_LETTERS or c == "-":
            return self.flag_group(open_pos)
        raise self.err("unknown extension ?" + c, open_pos + 1)

    def group_name(self, close):
        start = self.i
        end = self.p.find(close, start)
        if end < 0:
            raise self.err("missing >, unterminated name", start)
        name = self.p[start:end]
        if not name.isidentifier():
            raise self.err(f"bad character in group name {name!r}", start)
        if name in self.names:
            raise self.err(f"redefinition of group name {name!r}", start)
        self.names.add(name)
        self.groups += 1
        self.i = end + 1

    def group_body(self, open_pos):
        saved = self.flags
        self.depth += 1
        node = self.alternation()
        self.depth -= 1
        self.flags = saved
        if self.peek() != ")":
            raise self.err("missing ), unterminated subpattern", open_pos)
        self.i += 1
        return node

    def flag_group(self, open_pos):
        on = off = 0
        while self.peek() in _FLAG_LETTERS and self.peek():
            on |= _FLAG_LETTERS[self.peek()]
            self.i += 1
        if self.peek() == "-":
            self.i += 1
            while self.peek() in _FLAG_LETTERS and self.peek():
                off |= _FLAG_LETTERS[self.peek()]
                self.i += 1
        c = self.peek()
        if (on | off) & _L:
            raise self.unsupported("the LOCALE flag", open_pos)
        if c == ")":
            if off:
                raise self.err("missing :", self.i)
            if self.started or self.depth:
                raise self.err("global flags not at the start of the expression", open_pos)
            self.i += 1
            self.flags |= on
            return None
        if c != ":":
            raise self.err("missing -, : or )" if c else "missing -, : or ), unterminated flags",
                           self.i)
        self.i += 1
        saved = self.flags
        self.flags = (self.flags | on) & ~off
        self.depth += 1
        node = self.alternation()
        self.depth -= 1
        self.flags = saved
        if self.peek() != ")":
            raise self.err("missing ), unterminated subpattern", open_pos)
        self.i += 1
        return node

    # -- escapes
    def class_escape_set(self, c):
        """The CharSet of ``\\d \\D \\w \\W \\s \\S`` (c is the letter)."""
        low = c.lower()
        if self.ecma:
            cs = _ECMA_SPACE if low == "s" else _ASCII_CLASSES[low]
        elif self.flags & _A:
            cs = _ASCII_CLASSES[low]
        else:
            cs = _py_class(low)
        return cs.negate() if c.isupper() else cs

    def hex_escape(self, start, digits, what):
        text = self.p[self.i:self.i + digits]
        if len(text) != digits or any(ch not in _HEX for ch in text):
            raise self.err(f"incomplete escape \\{what}{text}", start)
        self.i += digits
        cp = int(text, 16)
        if cp > ir.MAX_CODE_POINT:
            raise self.err(f"bad escape \\{what}{text}", start)
        return cp

    def char_escape(self, start, in_class):
        """A single-character escape after the backslash (cursor on the letter).

        Returns a code point, a CharSet (for class escapes) or raises."""
        c = self.peek()
        if c == "":
            raise self.err("bad escape (end of pattern)", start)
        self.i += 1
        if c in "dDwWsS":
            return self.class_escape_set(c)
        simple = _ECMA_SIMPLE if self.ecma else _PY_SIMPLE
        if c in simple:
            return simple[c]
        if c == "b" and in_class:
            return 8
        if c == "x":
            return self.hex_escape(start, 2, "x")
        if c == "u":
            if self.ecma and self.peek() == "{":
                end = self.p.find("}", self.i)
                text = self.p[self.i + 1:end] if end > 0 else ""
                if end < 0 or not text or any(ch not in _HEX for ch in text) or int(text, 16) > ir.MAX_CODE_POINT:
                    raise self.err("bad escape \\u{...}", start)
                self.i = end + 1
                return int(text, 16)
            cp = self.hex_escape(start, 4, "u")
            if (self.ecma and 0xD800 <= cp <= 0xDBFF and self.p.startswith("\\u", self.i)
                    and all(ch in _HEX for ch in self.p[self.i + 2:self.i + 6])
                    and 0xDC00 <= int(self.p[self.i + 2:self.i + 6] or "0", 16) <= 0xDFFF):
                # ECMA: a UTF-16 surrogate pair written as two escapes is one code point.
                low = int(self.p[self.i + 2:self.i + 6], 16)
                self.i += 6
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00)
            return cp
        if c == "U" and not self.ecma:
            return self.hex_escape(start, 8, "U")
        if c == "N" and not self.ecma:
            if self.peek() != "{":
                raise self.err("missing {", self.i)
            end = self.p.find("}", self.i)
            if end < 0:
                raise self.err("missing }, unterminated name", self.i)
            name = self.p[self.i + 1:end]
            try:
                cp = ord(unicodedata.lookup(name))
            except KeyError:
                raise self.err(f"undefined character name {name!r}", start) from None
            self.i = end + 1
            return cp
        if c == "c" and self.ecma:
            x = self.peek()
            if x.isascii() and x.isalpha():
                self.i += 1
                return ord(x) % 32
            raise self.err("bad escape \\c", start)
        if c in "pP" and self.ecma:
            return self.property_escape(start, c == "P")
        if c == "0" and self.ecma:
            if self.peek().isdigit():
                raise self.unsupported("an octal escape", start)
            return 0
        if c.isdigit():
            return self.digit_escape(start, c, in_class)
        if c.isascii() and c.isalpha():
            if c in "AZ" and not self.ecma and not in_class:
                return ("anchor", c)
            if c in "bB" and not in_class:
                raise self.unsupported("a word boundary \\" + c, start)
            if c == "k" and self.ecma:
                raise self.unsupported("a backreference \\k<name>", start)
            raise self.err("bad escape \\" + c, start)
        return ord(c)

    def digit_escape(self, start, c, in_class):
        p = self.p
        if c == "0" or (in_class and c in "01234567"):
            digits = c
            while len(digits) < 3 and self.peek() in "01234567" and self.peek():
                digits += self.peek()
                self.i += 1
            v = int(digits, 8)
            if v > 0o377:
                raise self.err(f"octal escape value \\{digits} outside of range 0-0o377", start)
            return v
        if in_class:
            raise self.err("bad escape \\" + c, start)
        if (c in "01234567" and self.peek() in "01234567" and self.peek(1) in "01234567"
                and self.peek() and self.peek(1)):
            digits = c + p[self.i:self.i + 2]
            self.i += 2
            v = int(digits, 8)
            if v > 0o377:
                raise self.err(f"octal escape value \\{digits} outside of range 0-0o377", start)
            return v
        num = c
        if self.peek().isdigit() and self.peek().isascii():
            num += self.peek()
            self.i += 1
        if int(num) <= self.groups:
            raise self.unsupported(f"a backreference \\{num}", start)
        raise self.err(f"invalid group reference {num}", start + 1)

    def property_escape(self, start, negate):
        if self.peek() != "{":
            raise self.err("bad escape \\p (expected {)", start)
        end = self.p.find("}", self.i)
        if end < 0:
            raise self.err("bad escape \\p{...}: missing }", start)
        name = self.p[self.i + 1:end]
        self.i = end + 1
        key = name
        if "=" in name:
            prop, key = name.split("=", 1)
            if prop not in ("General_Category", "gc"):
                raise self.unsupported(f"the Unicode property {name!r}", start)
        short = _GC_LONG.get(key.lower(), key)
        if short not in _GC_SHORT:
            raise self.unsupported(f"the Unicode property {name!r}", start)
        cs = _general_category(short)
        return cs.negate() if negate else cs

    def escape(self):
        start = self.i
        self.i += 1
        v = self.char_escape(start, in_class=False)
        if isinstance(v, tuple):
            return _N(_ANCHOR, start, "start" if v[1] == "A" else "end", "A" if v[1] == "A" else "Z")
        if isinstance(v, ir.CharSet):
            return _N(_SET, start, v)
        return _N(_SET, start, self.charset(ir.CharSet(((v, v),))))

    # -- character classes
    def class_item(self):
        """One class member: ``(code point or None, CharSet or None)``."""
        c = self.p[self.i]
        if c == "\\":
            start = self.i
            self.i += 1
            v = self.char_escape(start, in_class=True)
            if isinstance(v, ir.CharSet):
                return None, v
            return v, None
        self.i += 1
        return ord(c), None

    def char_class(self) -> ir.CharSet:
        open_pos = self.i
        self.i += 1
        negate = False
        if self.peek() == "^":
            negate = True
            self.i += 1
        ranges: list = []   # folded under IGNORECASE
        sets: list = []     # class escapes: not folded (as in re)
        first = True
        while True:
            if self.i >= self.n:
                raise self.err("unterminated character set", open_pos)
            c = self.p[self.i]
            if c == "]" and (not first or self.ecma):
                self.i += 1
                break
            first = False
            item_pos = self.i
            lo, cs = self.class_item()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                hi, cs2 = self.class_item()
                if cs is not None or cs2 is not None:
                    raise self.err(f"bad character range {self.p[item_pos:self.i]}", item_pos)
                if hi < lo:
                    raise self.err(f"bad character range {self.p[item_pos:self.i]}", item_pos)
                ranges.append((lo, hi))
            elif cs is not None:
                sets.append(cs)
            else:
                ranges.append((lo, lo))
        out = self.charset(ir.CharSet.of(ranges))
        for cs in sets:
            out = out.union(cs)
        return out.negate() if negate else out


_GC_SHORT = {"L", "LC", "Lu", "Ll", "Lt", "Lm", "Lo", "M", "Mn", "Mc", "Me", "N", "Nd", "Nl", "No",
             "P", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "S", "Sm", "Sc", "Sk", "So", "Z", "Zs",
             "Zl", "Zp", "C", "Cc", "Cf", "Cs", "Co", "Cn"}


# ------------------------------------------------------------------------- lowering


class _Lowering:
    def __init__(self, parser: _Parser):
        self.parser = parser

    # anchors: split a tree into (start kind, end kind, anchor-free tree) variants
    def variants(self, node: _N) -> list:
        if node.anchor is None:
            return [(None, None, node)]
        k = node.kind
        if k == _ANCHOR:
            return [(node.b, None, _EMPTY_SEQ)] if node.a == "start" else [(None, node.b, _EMPTY_SEQ)]
        if k == _ALT:
            out = []
            for b in node.a:
                out.extend(self.variants(b))
            return self.merge(out, node.pos)
        if k == _SEQ:
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
                    out.append((sk, ek2, _N(_SEQ, node.pos, [h, *items[1:-1], t])))
            return self.merge(out, node.pos)
        raise self.anchor_error(node.anchor)

    @staticmethod
    def merge(vs, pos):
        by: dict = {}
        for sk, ek, n in vs:
            by.setdefault((sk, ek), []).append(n)
        return [(sk, ek, ns[0] if len(ns) == 1 else _N(_ALT, pos, ns)) for (sk, ek), ns in by.items()]

    def anchor_error(self, pos):
        return self.parser.unsupported("an anchor that is not at the start or end of the pattern", pos)

    def _find_anchor(self, node, side):
        if node.kind == _ANCHOR:
            return node.pos if node.a == side else None
        if node.kind in (_SEQ, _ALT):
            for x in node.a:
                r = self._find_anchor(x, side)
                if r is not None:
                    return r
        if node.kind in (_REP, _ATOMIC):
            return self._find_anchor(node.a, side)
        return None

    def first_end_anchor(self, node):
        pos = self._find_anchor(node, "end")
        return node.anchor if pos is None else pos

    def first_start_anchor(self, node):
        pos = self._find_anchor(node, "start")
        return node.anchor if pos is None else pos

    # possessive-free, anchor-free tree -> IR
    def plain(self, node: _N) -> ir.Node:
        k = node.kind
        if k == _SET:
            return node.a
        if k == _LIT:
            return ir.literal(node.a)
        if k == _SEQ:
            return ir.seq(*(self.plain(x) for x in node.a)) if node.a else ir.EMPTY
        if k == _ALT:
            return ir.alt(*(self.plain(x) for x in node.a))
        if k == _REP:
            return ir.repeat(self.plain(node.a), node.b, node.c)
        raise AssertionError(k)  # pragma: no cover

    # tree followed by continuation k -> IR (continuation passing only where needed)
    def lower(self, node: _N, k: ir.Node) -> ir.Node:
        if not node.poss:
            return ir.seq(self.plain(node), k)
        kind = node.kind
        if kind == _SEQ:
            for x in reversed(node.a):
                k = self.lower(x, k)
            return k
        if kind == _ALT:
            return ir.alt(*(self.lower(x, k) for x in node.a))
        if kind == _ATOMIC:
            body = node.a
            if not body.poss and self.prefix_free(self.plain(body)):
                return ir.seq(self.plain(body), k)
            if body.kind == _REP and not body.a.poss and body.d != "lazy":
                return self.possessive(body, k, node.pos)
            raise self.parser.unsupported("an atomic group whose body can match in several ways",
                                          node.pos)
        if kind == _REP:
            if node.d == "possessive" and not node.a.poss:
                return self.possessive(node, k, node.pos)
            raise self.parser.unsupported("a possessive quantifier or atomic group inside a "
                                          "repetition", node.pos)
        raise AssertionError(kind)  # pragma: no cover

    def possessive(self, node: _N, k: ir.Node, pos: int) -> ir.Node:
        x = self.plain(node.a)
        lo, hi = node.b, node.c
        if hi is not None and hi == lo:
            return ir.seq(ir.repeat(x, lo, lo), k)
        if not self.prefix_free(x):
            raise self.parser.unsupported(
                "a possessive quantifier over a sub-pattern that can match in several ways", pos)
        stop = ir.And((k, ir.Not(ir.seq(x, _ANY_STAR))))  # continuation not starting with x
        if hi is None:
            return ir.seq(ir.repeat(x, lo, None), stop)
        return ir.alt(ir.seq(ir.repeat(x, lo, hi - 1), stop), ir.seq(ir.repeat(x, hi, hi), k))

    @staticmethod
    def prefix_free(x: ir.Node) -> bool:
        """Non-empty and no match is a proper prefix of another (so X matches in at most
        one way at any position)."""
        from ..automaton.build import build_dfa

        d = build_dfa(x)
        acc = d.accepting
        if d.is_empty() or acc[0]:
            return False
        return not bool((d.transitions[acc] >= 0).any())


def _parse_flags(flags) -> int:
    if isinstance(flags, str):
        out = 0
        for ch in flags:
            if ch not in _FLAG_LETTERS:
                raise ValueError(f"unknown regex flag {ch!r}")
            out |= _FLAG_LETTERS[ch]
        return out
    return int(flags)


def parse_regex(pattern: str, flags=0, *, syntax: str = PYTHON, anchored: bool = True) -> ir.Node:
    """Parse ``pattern`` into IR.  See the module docstring for the exact semantics.

    Raises :class:`RegexError` (with ``pos``) on syntax errors and :class:`Unsupported`
    (``where`` names the position; ``.pos`` holds it) on non-regular constructs.
    """
    if syntax not in (PYTHON, ECMA):
        raise ValueError(f"syntax must be {PYTHON!r} or {ECMA!r}, not {syntax!r}")
    if not isinstance(pattern, str):
        raise TypeError("parse_regex expects a str pattern")
    parser = _Parser(pattern, syntax, _parse_flags(flags))
    tree = parser.parse()
    low = _Lowering(parser)
    out = []
    for sk, ek, body in low.variants(tree):
        if anchored:
            prefix, suffix = ir.EMPTY, ir.EMPTY
        else:
            prefix = {None: _ANY_STAR, "A": ir.EMPTY,
                      "m": ir.alt(ir.EMPTY, ir.seq(_ANY_STAR, _NL))}[sk]
            suffix = {None: _ANY_STAR, "Z": ir.EMPTY, "$": ir.repeat(_NL, 0, 1),
                      "m": ir.alt(ir.EMPTY, ir.seq(_NL, _ANY_STAR))}[ek]
        out.append(ir.seq(prefix, low.lower(body, suffix)))
    return ir.alt(*out)


def search_to_full(node: ir.Node) -> ir.Node:
    """Search semantics for an anchor-free node: any text, a match, any text."""
    return ir.seq(_ANY_STAR, node, _ANY_STAR)


def dfa_from_regex(pattern: str, flags=0, *, syntax: str = PYTHON, anchored: bool = True, **build_kw):
    """``build_dfa(parse_regex(pattern, ...), **build_kw)``."""
    from ..automaton.build import build_dfa

    return build_dfa(parse_regex(pattern, flags, syntax=syntax, anchored=anchored), **build_kw)

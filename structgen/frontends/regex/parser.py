"""The regex parser: pattern text -> a parse tree (:class:`Tree`) of character sets, literal runs,
sequences, alternations, repetitions, atomic groups and anchors, with the positions errors name.

:class:`Parser` reads both syntaxes (``PYTHON``, ``ECMA``; see :mod:`structgen.frontends.regex`
for what differs) and inline flags; it raises :class:`RegexError` with the 0-based position of a
syntax error and :class:`Unsupported` (``.pos``, ``.pattern``) for constructs that are not
regular.  Character sets come out final (case folding applied); anchors and possessive parts are
marked on every node (``anchor``, ``poss``) for :mod:`.lower`.
"""
from __future__ import annotations

import re
import unicodedata

from ...automaton import ir
from ...errors import LimitExceeded, RegexError, Unsupported
from .charclass import (ASCII_CLASSES, ECMA_LINE_TERMINATORS, ECMA_SPACE, GC_LONG, GC_SHORT, POSIX_CLASSES,
                        RUST_CLASS_BODIES, case_closure, general_category, property_class, py_class)

PYTHON = "python"
ECMA = "ecma"
RUST = "rust"

DEFAULT_MAX_DEPTH = 2000  # nested groups (Python's re takes a few hundred)
MAX_REPEAT = 4294967294  # Python's MAXREPEAT - 1
_QUANT_RE = re.compile(r"\{(\d*)(,?)(\d*)\}")
_PLAIN_RUN = re.compile(r"[^\\\[\](){}.*+?^$|]+")


# ------------------------------------------------------------------------ parse tree

SET, SEQ, ALT, REP, ATOMIC, ANCHOR, LIT, LOOK = range(8)


class Tree:
    """A parse-tree node.  ``kind`` selects the meaning of ``a``/``b``/``c``/``d``:
    SET: a=CharSet; LIT: a=str (a run of plain characters); SEQ/ALT: a=list of nodes;
    REP: a=node, b=min, c=max, d=mode; ATOMIC: a=node; ANCHOR: a="start"|"end",
    b=kind ("A", "m", "Z", "$"); LOOK (a lookaround): a=node, b=negative, c=behind (a lookbehind).
    ``poss`` marks trees lowered with their continuation (possessive parts, atomic groups,
    lookarounds), ``look`` those holding a lookaround."""

    __slots__ = ("kind", "pos", "a", "b", "c", "d", "anchor", "poss", "look")

    def __init__(self, kind, pos, a=None, b=None, c=None, d=None):
        self.kind, self.pos, self.a, self.b, self.c, self.d = kind, pos, a, b, c, d
        self.look = False
        if kind in (SEQ, ALT):
            self.anchor = next((x.anchor for x in a if x.anchor is not None), None)
            self.poss = any(x.poss for x in a)
            self.look = any(x.look for x in a)
        elif kind in (REP, ATOMIC):
            self.anchor = a.anchor
            self.poss = kind == ATOMIC or d == "possessive" or a.poss
            self.look = a.look
        elif kind == LOOK:  # its anchors are its own (lowered with the body)
            self.anchor, self.poss, self.look = None, True, True
        elif kind == ANCHOR:
            self.anchor, self.poss = pos, False
        else:
            self.anchor, self.poss = None, False


EMPTY_SEQ = Tree(SEQ, 0, [])

_I, _M, _S, _X, _A, _U, _L = (int(f) for f in (re.I, re.M, re.S, re.X, re.A, re.U, re.L))
FLAG_LETTERS = {"i": _I, "m": _M, "s": _S, "x": _X, "a": _A, "u": _U, "L": _L}
_HEX = "0123456789abcdefABCDEF"
_PY_SIMPLE = {"n": 10, "t": 9, "r": 13, "f": 12, "v": 11, "a": 7}
_ECMA_SIMPLE = {"n": 10, "t": 9, "r": 13, "f": 12, "v": 11}
_POSIX = re.compile(r"\[:(\^?)([a-z]+):\]")


def _seq(items, start) -> Tree:
    return items[0] if len(items) == 1 else Tree(SEQ, start, items)


def _intersection(a: ir.CharSet, b: ir.CharSet) -> ir.CharSet:
    return a.negate().union(b.negate()).negate()


def _clip(p: str, n: int = 60) -> str:
    return repr(p) if len(p) <= n else repr(p[:n]) + f"... ({len(p)} characters)"


class Parser:
    def __init__(self, pattern: str, syntax: str, flags: int, max_depth: int = DEFAULT_MAX_DEPTH,
                 lookahead: bool = False):
        self.lookahead = lookahead and syntax != RUST  # Rust's regex crate has no lookarounds
        self.has_behind = False
        self.p = pattern
        self.n = len(pattern)
        self.i = 0
        self.ecma = syntax == ECMA
        self.rust = syntax == RUST
        self.flags = flags
        self.groups = 0
        self.names: set = set()
        self.depth = 0
        self.max_depth = max_depth
        self.max_depth_seen = 0
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
            return case_closure(cs, self.ascii())
        return cs

    def ascii(self):
        return bool(self.flags & _A)

    # -- grammar
    def parse(self) -> Tree:
        node = self.alternation()
        if self.i < self.n:  # only a stray ')' stops the top level early
            raise self.err("unbalanced parenthesis")
        return node

    def alternation(self) -> Tree:
        """The alternation from the cursor up to an unmatched ``)`` or the end of the pattern.

        Groups nest on an explicit stack, not on Python's: a pattern of ``max_depth`` nested groups
        parses in constant stack depth, and one nested deeper raises :class:`LimitExceeded`
        (``limit="max_depth"``) naming the position of the group that opens too deep."""
        stack = []  # open groups: (open_pos, atomic, saved flags, parent's start, branches, items, seq start)
        start = seq_start = self.i
        branches, items = [], []
        while True:
            self.skip_verbose()
            c = self.peek()
            if c == "|":
                branches.append(_seq(items, seq_start))
                self.i += 1
                self.started = True
                items, seq_start = [], self.i
                continue
            if c in (")", ""):
                branches.append(_seq(items, seq_start))
                body = branches[0] if len(branches) == 1 else Tree(ALT, start, branches)
                if not stack:
                    return body
                open_pos, atomic, saved, start, branches, items, seq_start = stack.pop()
                if c == "":
                    raise self.err("missing ), unterminated subpattern", open_pos)
                self.i += 1
                self.depth -= 1
                self.flags = saved
                node = (Tree(ATOMIC, open_pos, body) if atomic is True else
                        Tree(LOOK, open_pos, body, atomic[-1] == "!", atomic[0] == "<") if atomic else body)
                self.started = True
                items.append(self.quantified(node, open_pos))
                continue
            pos = self.i
            if c == "(":
                g = self.group_open()
                if g is None:
                    continue  # a comment or global flags
                atomic, flags = g
                if self.depth >= self.max_depth:
                    raise LimitExceeded(f"groups nested more than {self.max_depth} deep at position {pos} in regex "
                                        f"{_clip(self.p)}", "max_depth", self.max_depth)
                stack.append((pos, atomic, self.flags, start, branches, items, seq_start))
                if flags is not None:
                    self.flags = flags
                self.depth += 1
                self.max_depth_seen = max(self.max_depth_seen, self.depth)
                start = seq_start = self.i
                branches, items = [], []
                continue
            if not self.flags & (_X | _I):
                # Fast path: a run of ordinary characters; its last one may carry a quantifier.
                m = _PLAIN_RUN.match(self.p, pos)
                if m and m.end() - pos >= 2:
                    self.i = m.end() - 1
                    items.append(Tree(LIT, pos, self.p[pos:self.i]))
                    self.started = True
                    continue
            atom = self.atom()
            if atom is None:
                continue
            self.started = True
            items.append(self.quantified(atom, pos))

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

    def quantified(self, atom: Tree, atom_pos: int) -> Tree:
        self.skip_verbose()
        q = self.quantifier_at()
        if q is None:
            return atom
        qpos = self.i
        if atom.kind == ANCHOR:
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
        elif self.peek() == "+" and not (self.ecma or self.rust):
            mode = "possessive"
            self.i += 1
        self.skip_verbose()
        if self.quantifier_at() is not None:
            raise self.err("multiple repeat")
        return Tree(REP, atom_pos, atom, lo, hi, mode)

    def atom(self):
        c = self.p[self.i]
        pos = self.i
        if c == "[":
            return Tree(SET, pos, self.rust_class() if self.rust else self.char_class())
        if c == ".":
            self.i += 1
            if self.flags & _S:
                return Tree(SET, pos, ir.ANY_CHAR)
            excluded = ECMA_LINE_TERMINATORS if self.ecma else ir.CharSet(((10, 10),))
            return Tree(SET, pos, excluded.negate())
        if c == "^":
            self.i += 1
            if self.flags & _M and self.ecma:
                raise self.unsupported("'^' in multiline mode with ECMA syntax", pos)
            return Tree(ANCHOR, pos, "start", "m" if self.flags & _M else "A")
        if c == "$":
            self.i += 1
            if self.flags & _M:
                if self.ecma:
                    raise self.unsupported("'$' in multiline mode with ECMA syntax", pos)
                return Tree(ANCHOR, pos, "end", "m")
            return Tree(ANCHOR, pos, "end", "Z" if self.ecma or self.rust else "$")
        if c in "*+?":
            raise self.err("nothing to repeat")
        if c == "{" and self.quantifier_at() is not None:
            raise self.err("nothing to repeat")
        if c == "\\":
            return self.escape()
        self.i += 1
        return Tree(SET, pos, self.charset(ir.CharSet(((ord(c), ord(c)),))))

    # -- groups
    def group_open(self):
        """Read a group's opening (cursor on ``(``) up to its body: ``(atomic, scoped flags or
        None)``, or None when the whole construct is consumed (a comment, global flags)."""
        open_pos = self.i
        self.i += 1
        if self.peek() != "?":
            self.groups += 1
            return False, None
        self.i += 1
        c = self.peek()
        if c == "":
            raise self.err("unexpected end of pattern after '(?'", self.i)
        if c == ":":
            self.i += 1
            return False, None
        if c == "P" and self.peek(1) == "<":
            self.i += 2
            self.group_name(">")
            return False, None
        if c == "<" and self.peek(1) not in ("=", "!"):
            self.i += 1
            self.group_name(">")
            return False, None
        if c == "P" and self.peek(1) == "=":
            raise self.unsupported("a backreference (?P=name)", open_pos)
        if c in "=!" and self.lookahead:
            self.i += 1
            return c, None  # a lookahead: "=" or "!"
        if c == "<" and self.peek(1) in ("=", "!") and self.lookahead:
            self.i += 2
            self.has_behind = True
            return "<" + self.p[self.i - 1], None  # a lookbehind: "<=" or "<!"
        if c in "=!" or c == "<":
            raise self.unsupported("a lookaround assertion", open_pos)
        if c == "(":
            raise self.unsupported("a conditional group", open_pos)
        if c == ">":
            self.i += 1
            return True, None
        if c == "#":
            end = self.p.find(")", self.i)
            if end < 0:
                raise self.err("missing ), unterminated comment", open_pos)
            self.i = end + 1
            return None
        if self.rust and (c.isalpha() or c == "-"):
            flags = self.rust_flag_group(open_pos)
            return None if flags is None else (False, flags)
        if c in FLAG_LETTERS or c == "-":
            flags = self.flag_group(open_pos)
            return None if flags is None else (False, flags)
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

    def flag_group(self, open_pos):
        """Inline flags after ``(?``: None for global flags ``(?i)`` (applied), else the flags of a
        scoped group ``(?i:...)`` (cursor after the colon)."""
        on = off = 0
        while self.peek() in FLAG_LETTERS and self.peek():
            on |= FLAG_LETTERS[self.peek()]
            self.i += 1
        if self.peek() == "-":
            self.i += 1
            while self.peek() in FLAG_LETTERS and self.peek():
                off |= FLAG_LETTERS[self.peek()]
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
        return (self.flags | on) & ~off

    def rust_flag_group(self, open_pos):
        """The regex crate's inline flags after ``(?``: ``(?flags)`` applies to the rest of the
        enclosing group (returns None), ``(?flags:...)`` to its body (returns its flags).  ``u``
        off is ASCII ``\\d \\w \\s`` and case folding; ``U`` (swap greed) leaves the language
        as it is."""
        flags, on = self.flags, True
        while True:
            c = self.peek()
            if c == "-":
                if not on:
                    raise self.err("repeated negation in flags", self.i)
                on = False
            elif c == "R":
                raise self.unsupported("the CRLF flag R", open_pos)
            elif c in ("u", "U", "i", "m", "s", "x") and c:
                bit = {"i": _I, "m": _M, "s": _S, "x": _X, "u": _A, "U": 0}[c]
                if c == "u":
                    flags = flags & ~_A if on else flags | _A
                elif on:
                    flags |= bit
                else:
                    flags &= ~bit
            elif c in (")", ":") and c:
                break
            else:
                raise self.err("unrecognized flag" if c else "unexpected end of flags", self.i)
            self.i += 1
        self.i += 1
        if c == ")":
            self.flags = flags
            return None
        return flags

    # -- escapes
    def class_escape_set(self, c):
        """The CharSet of ``\\d \\D \\w \\W \\s \\S`` (c is the letter)."""
        low = c.lower()
        if self.ecma:
            cs = ECMA_SPACE if low == "s" else ASCII_CLASSES[low]
        elif self.rust and not self.flags & _A:
            cs = property_class(RUST_CLASS_BODIES[low])
        elif self.flags & _A:
            cs = ASCII_CLASSES[low]
        else:
            cs = py_class(low)
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
        if self.rust:
            return self.rust_escape(start, c, in_class)
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

    def rust_escape(self, start, c, in_class):
        """The rest of an escape in the regex crate's syntax (``c``, the letter, consumed)."""
        if c in _PY_SIMPLE:
            return _PY_SIMPLE[c]
        if c in "xuU":
            if self.peek() == "{":
                end = self.p.find("}", self.i)
                text = self.p[self.i + 1:end] if end > 0 else ""
                if end < 0 or not text or any(ch not in _HEX for ch in text) or int(text, 16) > ir.MAX_CODE_POINT \
                        or 0xD800 <= int(text, 16) <= 0xDFFF:
                    raise self.err(f"bad escape \\{c}{{...}}", start)
                self.i = end + 1
                return int(text, 16)
            cp = self.hex_escape(start, {"x": 2, "u": 4, "U": 8}[c], c)
            if 0xD800 <= cp <= 0xDFFF:
                raise self.err("a surrogate code point is not a Unicode scalar value", start)
            return cp
        if c in "pP":
            return self.rust_property(start, c == "P")
        if c in "Az" and not in_class:
            return ("anchor", "A" if c == "A" else "Z")
        if c in "bB<>" and not in_class:
            raise self.unsupported("a word boundary \\" + c, start)
        if c.isascii() and c.isalnum():
            if c.isdigit() and not in_class:
                raise self.unsupported("a backreference \\" + c, start)
            raise self.err("bad escape \\" + c, start)
        return ord(c)   # any other escaped character stands for itself

    def rust_property(self, start, negate):
        """``\\pL``, ``\\p{Greek}``, ``\\p{gc=Lu}``, ``\\P{..}``: general categories, scripts and
        binary properties (those the ``regex`` module knows, see
        :func:`~.charclass.property_class`), ``Any``, ``ASCII`` and ``Assigned``."""
        if self.peek() == "{":
            end = self.p.find("}", self.i)
            if end < 0:
                raise self.err("bad escape \\p{...}: missing }", start)
            name = self.p[self.i + 1:end].strip()
            self.i = end + 1
        else:
            name = self.peek()
            if not name.isalpha():
                raise self.err("bad escape \\p (expected a letter or {)", start)
            self.i += 1
        if name.startswith("^"):
            negate, name = not negate, name[1:]
        key = name.replace(" ", "").replace("_", "").replace("-", "").lower()
        if key == "any":
            cs = ir.ANY_CHAR
        elif key == "ascii":
            cs = ir.CharSet(((0, 0x7F),))
        elif key == "assigned":
            cs = general_category("Cn").negate()
        else:
            prop, sep, value = name.replace(":", "=").partition("=")
            value = value if sep else prop        # \p{gc=Lu}, \p{sc:Greek} or a bare name
            short = GC_LONG.get(value.strip().lower().replace(" ", "_"), value.strip())
            if short in GC_SHORT and not (sep and re.fullmatch(r"(?i)\s*(sc|scx|script|script_?extensions)\s*", prop)):
                cs = general_category(short)
            else:
                cs = property_class("\\p{" + name.replace(":", "=") + "}")
                if cs is None:
                    raise self.unsupported(f"the Unicode property {name!r}", start)
        return cs.negate() if negate else cs

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
        short = GC_LONG.get(key.lower(), key)
        if short not in GC_SHORT:
            raise self.unsupported(f"the Unicode property {name!r}", start)
        cs = general_category(short)
        return cs.negate() if negate else cs

    def escape(self):
        start = self.i
        self.i += 1
        v = self.char_escape(start, in_class=False)
        if isinstance(v, tuple):
            return Tree(ANCHOR, start, "start" if v[1] == "A" else "end", "A" if v[1] == "A" else "Z")
        if isinstance(v, ir.CharSet):
            return Tree(SET, start, v)
        return Tree(SET, start, self.charset(ir.CharSet(((v, v),))))

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

    def rust_class(self) -> ir.CharSet:
        """A bracketed class in the regex crate's syntax (cursor on ``[``): items, ranges,
        ``[:name:]`` ASCII classes, nested classes (union) and the set operations ``&&``, ``--``
        and ``~~`` (lower precedence than union, left to right); a leading ``^`` negates the
        result.  Under ``(?i)`` the whole class is case-folded."""
        open_pos = self.i
        self.i += 1
        negate = self.peek() == "^"
        if negate:
            self.i += 1
        out = self.rust_union(open_pos, first=True)
        while self.p.startswith(("&&", "--", "~~"), self.i):
            op = self.p[self.i:self.i + 2]
            self.i += 2
            rhs = self.rust_union(open_pos, first=False)
            both = _intersection(out, rhs)
            out = both if op == "&&" else _intersection(out, rhs.negate()) if op == "--" else \
                _intersection(out.union(rhs), both.negate())
        if self.peek() != "]":
            raise self.err("unterminated character set", open_pos)
        self.i += 1
        out = self.charset(out)
        return out.negate() if negate else out

    def rust_union(self, open_pos, first: bool) -> ir.CharSet:
        """Class items up to ``]`` or a set operator; a ``]`` right after the opening (or its
        ``^``) is literal."""
        out = ir.CharSet(())
        while True:
            if self.flags & _X:
                while self.peek() in (" ", "\t", "\n", "\r", "\f", "\v") and self.peek():
                    self.i += 1
            if self.i >= self.n:
                raise self.err("unterminated character set", open_pos)
            c = self.p[self.i]
            if c == "]" and not first:
                return out
            if not first and self.p.startswith(("&&", "--", "~~"), self.i):
                return out
            first = False
            if c == "[":
                m = _POSIX.match(self.p, self.i)
                if m:
                    if m.group(2) not in POSIX_CLASSES:
                        raise self.err(f"unknown ASCII class {m.group(2)!r}", self.i)
                    cs = ir.CharSet.of(list(POSIX_CLASSES[m.group(2)]))
                    self.i = m.end()
                    out = out.union(cs.negate() if m.group(1) else cs)
                else:
                    out = out.union(self.rust_class())
                continue
            item_pos = self.i
            lo, cs = self.class_item()
            if cs is not None:
                out = out.union(cs)
                continue
            if self.peek() == "-" and self.peek(1) not in ("]", "", "-"):
                self.i += 1
                hi, cs2 = self.class_item()
                if cs2 is not None or hi < lo:
                    raise self.err(f"bad character range {self.p[item_pos:self.i]}", item_pos)
                out = out.union(ir.CharSet(((lo, hi),)))
            else:
                out = out.union(ir.CharSet(((lo, lo),)))

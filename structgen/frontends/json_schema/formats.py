"""String formats (``format`` keyword) as decoded-text IR.

Each format is written in a small, fixed regex notation read by :func:`_rx` (literals, escapes,
classes, groups, ``| ? * + {m,n}``), so this module does not depend on the full regex front-end.

How close each is to the test oracle (``jsonschema`` 4.26 with ``FormatChecker``; ``EXACT`` lists
the ones that match it exactly, which ``not``/``oneOf``/``if`` may then negate):

- ``date``: exact (``YYYY-MM-DD``, real calendar days, leap years, year >= 1 as ``date.fromisoformat``).
- ``date-time``: exact except that the oracle also takes a trailing ``\\n`` (a ``$`` quirk): RFC 3339
  with ``T``/``t``, ``Z``/``z``, offsets, fractions, no leap second -- as ``rfc3339_validator``.
- ``time``: the time part of ``date-time`` with a mandatory offset, as the oracle checks it.
- ``email``: RFC 5321 mailbox (dot-atom or quoted local part; host name or ``[IPv4]``/``[IPv6:..]``
  domain), a subset of the oracle (which only asks for an ``@``).
- ``idn-email``: the oracle only asks for an ``@``; so do we (exact).
- ``ipv4``: dotted quad without leading zeros (exact, as ``ipaddress``).
- ``ipv6``: RFC 4291 text forms incl. ``::`` and an embedded IPv4 tail, no zone (exact, as ``ipaddress``).
- ``uuid``: the canonical 8-4-4-4-12 hex form (a subset: the oracle also takes braces, ``urn:``).
- ``json-pointer``: exact (RFC 6901); ``relative-json-pointer``: ASCII-digit prefix (subset).
- ``hostname``: RFC 1123 LDH labels of 1-63 characters, no leading or trailing hyphen, no ``--``
  at positions 3-4 (so no ``xn--`` A-labels: Punycode validity is not checked, they are left out),
  no trailing dot, at most 253 characters -- a subset: the 253 bound needs a counter crossed with
  the label position (a 180,000-state JSON string automaton, 50 s to compile), so a name is taken
  when *n* labels of the longest label's length would fit, ``n * (longest + 1) - 1 <= 253``, for
  (n, longest) up to (3, 63), (4, 62), (8, 30), (16, 14), (31, 7), (63, 3), (127, 1)
  (:data:`HOSTNAME_SHAPES`). Every name taken is valid; the ones left out are long names of many
  labels of uneven length.
- ``uri``, ``uri-reference``, ``iri``, ``iri-reference``, ``uri-template``,
  ``duration``: RFC-shaped regexes; the oracle does not check them without optional packages, so
  we are stricter than it (never looser than the RFCs' syntax).
- ``idn-hostname``: the ``hostname`` subset with ``.``, ``\u3002``, ``\uff0e`` or ``\uff61`` between
  labels (RFC 3490 3.1); ASCII labels only (U-labels need IDNA 2008's tables and Punycode).
- ``regex``: ECMA-262 pattern syntax (the suite's oracle: a ``u``-flag ``RegExp``) is not a regular
  language (nested groups, group names, ``{n,m}`` with ``n <= m``); :func:`_ecma_regex` is a sound
  subset: groups nested at most ``REGEX_DEPTH`` deep, at most one named group, no backreferences
  (``\\1``, ``\\k<name>``), no ``\\p{...}`` / ``\\0``, no ``\\-`` in a class (QuickJS refuses it), class ranges only of digits, of lower or of upper
  case letters starting at the first or ending at the last of them (``0-7``, ``a-f``, ``5-9``), ``{n,m}`` with single-digit ``n <= m`` or ``m`` of more digits than ``n``.  Every pattern taken
  compiles in a JavaScript engine (tests/test_format_regex.py checks it against QuickJS).
Any other format name is an annotation and constrains nothing, as the specification says.
"""
from __future__ import annotations

from functools import lru_cache

from structgen import caching
from structgen.automaton import ir

EXACT = frozenset({"date", "date-time", "time", "idn-email", "ipv4", "ipv6", "json-pointer"})
NOT_REGULAR: frozenset = frozenset()
REGEX_DEPTH = 3

_CLASS_ESC = {"d": [(0x30, 0x39)], "w": [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)],
              "s": [(0x09, 0x0D), (0x20, 0x20)]}


class _Reader:
    def __init__(self, text: str):
        self.t, self.i = text, 0

    def peek(self):
        return self.t[self.i] if self.i < len(self.t) else None

    def take(self):
        c = self.t[self.i]
        self.i += 1
        return c


def _rx(text: str) -> ir.Node:
    """Read a format pattern (full-match semantics) into IR."""
    r = _Reader(text)
    node = _alt(r)
    if r.peek() is not None:
        raise ValueError(f"bad format pattern {text!r} at {r.i}")
    return node


def _alt(r):
    items = [_seq(r)]
    while r.peek() == "|":
        r.take()
        items.append(_seq(r))
    return ir.alt(*items)


def _seq(r):
    items = []
    while r.peek() not in (None, "|", ")"):
        items.append(_quant(r, _atom(r)))
    return ir.seq(*items) if items else ir.EMPTY


def _quant(r, node):
    while True:
        c = r.peek()
        if c == "?":
            r.take(); node = ir.repeat(node, 0, 1)
        elif c == "*":
            r.take(); node = ir.repeat(node, 0, None)
        elif c == "+":
            r.take(); node = ir.repeat(node, 1, None)
        elif c == "{":
            r.take()
            body = ""
            while r.peek() != "}":
                body += r.take()
            r.take()
            lo, _, hi = body.partition(",")
            node = ir.repeat(node, int(lo), int(lo) if "," not in body else (int(hi) if hi else None))
        else:
            return node


def _esc(c, r=None):
    if c == "x" and r is not None:
        v = int(r.take() + r.take(), 16)
        return [(v, v)]
    if c in _CLASS_ESC:
        return _CLASS_ESC[c]
    return [(ord(c), ord(c))]


def _atom(r):
    c = r.take()
    if c == "(":
        if r.t.startswith("?:", r.i):
            r.i += 2
        node = _alt(r)
        assert r.take() == ")"
        return node
    if c == ".":
        return ir.ANY_CHAR
    if c == "\\":
        return ir.CharSet.of(_esc(r.take(), r))
    if c == "[":
        neg = r.peek() == "^"
        if neg:
            r.take()
        ranges = []
        while r.peek() != "]":
            a = r.take()
            if a == "\\":
                e = _esc(r.take(), r)
                if len(e) > 1 or e[0][0] != e[0][1]:
                    ranges += e
                    continue
                a = chr(e[0][0])
            if r.peek() == "-" and r.t[r.i + 1] != "]":
                r.take()
                b = r.take()
                if b == "\\":
                    b = chr(_esc(r.take(), r)[0][0])
                ranges.append((ord(a), ord(b)))
            else:
                ranges.append((ord(a), ord(a)))
        r.take()
        cs = ir.CharSet.of(ranges)
        if neg:
            cs = ir.CharSet.of([x for x in cs.negate().ranges if not (x[0] >= 0xD800 and x[1] <= 0xDFFF)])
            cs = ir.CharSet.of([rr for a, b in cs.ranges for rr in ((a, min(b, 0xD7FF)), (max(a, 0xE000), b))
                                if rr[0] <= rr[1]])
        return cs
    return ir.CharSet(((ord(c), ord(c)),))


# --- calendar dates: day-of-month validity with leap years, years 0001-9999 -------------------
_YEAR = r"(\d\d\d[1-9]|\d\d[1-9]\d|\d[1-9]\d\d|[1-9]\d\d\d)"
# leap years: YY % 4 == 0 and YY != 00, or YY == 00 and CC % 4 == 0 (CC != 00 as year 0 is out)
_MOD4 = r"([02468][048]|[13579][26])"
_LEAP = rf"(\d\d(0[48]|[2468][048]|[13579][26])|{_MOD4}00)"
_MD_COMMON = r"((0[13578]|1[02])-(0[1-9]|[12]\d|3[01])|(0[469]|11)-(0[1-9]|[12]\d|30)|02-(0[1-9]|1\d|2[0-8]))"
DATE = rf"({_YEAR}-{_MD_COMMON}|{_LEAP}-02-29)"
_TIME_BASE = r"([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?"
_OFFSET = r"([Zz]|[+\-]([01]\d|2[0-3]):[0-5]\d)"
TIME = _TIME_BASE + _OFFSET
DATE_TIME = DATE + "[Tt]" + TIME

_OCTET = r"(25[0-5]|2[0-4]\d|1\d\d|[1-9]\d|\d)"
IPV4 = rf"{_OCTET}(\.{_OCTET}){{3}}"


def _ipv6() -> str:
    h = "[0-9A-Fa-f]{1,4}"

    def groups(n):  # n hextets joined by ':'
        return "" if n == 0 else f"{h}(:{h}){{{n - 1}}}" if n > 1 else h

    alts = [f"{groups(8)}", f"({h}:){{6}}{IPV4}"]
    for a in range(0, 8):
        for b in range(0, 8 - a):
            alts.append(f"{groups(a)}::{groups(b)}")
    for a in range(0, 6):
        for b in range(0, 6 - a):
            alts.append(f"{groups(a)}::({h}:){{{b}}}{IPV4}")
    return "(" + "|".join(alts) + ")"


IPV6 = _ipv6()
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9\-]{0,61}[A-Za-z0-9])?"
HOSTNAME = rf"{_LABEL}(\.{_LABEL})*"
_HEX = "[0-9A-Fa-f]"
UUID = f"{_HEX}{{8}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{4}}-{_HEX}{{12}}"
JSON_POINTER = r"(/([^/~]|~[01])*)*"
RELATIVE_JSON_POINTER = rf"(0|[1-9]\d*)(#|{JSON_POINTER})"
# RFC 3986 (ASCII): scheme ":" hier-part ["?" query] ["#" fragment]
_UNRES = r"[A-Za-z0-9\-._~]"
_PCT = f"%{_HEX}{_HEX}"
_SUB = r"[!$&'()*+,;=]"
_PCHAR = f"({_UNRES}|{_PCT}|{_SUB}|[:@])"
_QF = f"({_PCHAR}|[/?])*"
_IP_LITERAL = f"\\[({IPV6}|[vV]{_HEX}+\\.({_UNRES}|{_SUB}|:)+)\\]"
_AUTH = f"(({_UNRES}|{_PCT}|{_SUB}|:)*@)?({_IP_LITERAL}|({_UNRES}|{_PCT}|{_SUB})*)(:\\d*)?"
_PATH_ABEMPTY = f"(/{_PCHAR}*)*"
_HIER = f"(//{_AUTH}{_PATH_ABEMPTY}|/({_PCHAR}+{_PATH_ABEMPTY})?|{_PCHAR}+{_PATH_ABEMPTY}|)"
URI = f"[A-Za-z][A-Za-z0-9+\\-.]*:{_HIER}(\\?{_QF})?(#{_QF})?"
_SEG_NZ_NC = f"({_UNRES}|{_PCT}|{_SUB}|@)+"
_RELPART = f"(//{_AUTH}{_PATH_ABEMPTY}|/({_PCHAR}+{_PATH_ABEMPTY})?|{_SEG_NZ_NC}{_PATH_ABEMPTY}|)"
URI_REFERENCE = f"({URI}|{_RELPART}(\\?{_QF})?(#{_QF})?)"
_IRI_CHARS = "[\u00a0-\ud7ff\uf900-\ufdcf\ufdf0-\uffef\U00010000-\U000efffd]"
IRI = URI.replace(_UNRES, f"([A-Za-z0-9\\-._~]|{_IRI_CHARS})")
IRI_REFERENCE = URI_REFERENCE.replace(_UNRES, f"([A-Za-z0-9\\-._~]|{_IRI_CHARS})")
# RFC 6570 level 4: literals, and expressions {op? varspec(,varspec)*} with varname (.varchar)* and
# an optional prefix (:1-9999) or explode (*) modifier
_VARCHAR = f"([A-Za-z0-9_]|%{_HEX}{_HEX})"
_VARSPEC = f"{_VARCHAR}+(\\.{_VARCHAR}+)*(:[1-9]\\d{{0,3}}|\\*)?"
URI_TEMPLATE = (f"([^\\x00-\\x20\"%<>\\\\^`{{|}}\\x7f]|%{_HEX}{_HEX}"
                f"|\\{{[+#./;?&=,!@|]?{_VARSPEC}(,{_VARSPEC})*\\}})*")
# RFC 3339 appendix A: dur-year = nY [nM [nD]], dur-hour = nH [nM [nS]], or weeks alone
_DUR_TIME = r"T(\d+H(\d+M(\d+S)?)?|\d+M(\d+S)?|\d+S)"
DURATION = rf"P((\d+Y(\d+M(\d+D)?)?|\d+M(\d+D)?|\d+D)({_DUR_TIME})?|{_DUR_TIME}|\d+W)"
_ATEXT = r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~\-]"
_LOCAL = f'({_ATEXT}+(\\.{_ATEXT}+)*|"([ !#-\\[\\]-~]|\\\\[ -~])*")'
EMAIL = f"{_LOCAL}@({HOSTNAME}|\\[{IPV4}\\]|\\[IPv6:{IPV6}\\])"
IDN_EMAIL = ".*@.*"

_PATTERNS = {
    "date": DATE, "date-time": DATE_TIME, "time": TIME, "ipv4": IPV4, "ipv6": IPV6,
    "uuid": UUID, "json-pointer": JSON_POINTER,
    "relative-json-pointer": RELATIVE_JSON_POINTER, "uri": URI, "uri-reference": URI_REFERENCE,
    "iri": IRI, "iri-reference": IRI_REFERENCE, "uri-template": URI_TEMPLATE, "duration": DURATION,
    "email": EMAIL, "idn-email": IDN_EMAIL,
}


@lru_cache(maxsize=256)
def format_ir(name: str):
    """Decoded-text IR of format ``name``, or None when the format is an unconstrained annotation."""
    if name in ("idn-hostname", "hostname"):
        return _hostname(name == "idn-hostname")
    if name == "regex":
        return _ecma_regex(REGEX_DEPTH)
    pat = _PATTERNS.get(name)
    return None if pat is None else _rx(pat)


# (labels, longest label) pairs with labels * (longest + 1) - 1 <= 253: the hostname shapes taken
HOSTNAME_SHAPES = ((3, 63), (4, 62), (8, 30), (16, 14), (31, 7), (63, 3), (127, 1))
IDN_SEPARATORS = ".\u3002\uff0e\uff61"  # RFC 3490 3.1: full stop, ideographic, fullwidth, halfwidth


@lru_cache(maxsize=None)
def _hostname(idn: bool = False) -> ir.Node:
    sep = ir.CharSet.of([(ord(c), ord(c)) for c in (IDN_SEPARATORS if idn else ".")])
    bad = _rx("..--.*")  # '--' at positions 3-4 (this covers xn-- A-labels), RFC 5891 4.2.3.1
    shapes = []
    for n, longest in HOSTNAME_SHAPES:
        label = _rx(f"[A-Za-z0-9]([A-Za-z0-9\\-]{{0,{longest - 2}}}[A-Za-z0-9])?" if longest > 1
                    else "[A-Za-z0-9]")
        if longest >= 4:
            label = ir.And((label, ir.Not(bad)))
        shapes.append(ir.seq(label, ir.Repeat(ir.seq(sep, label), 0, n - 1)))
    return ir.alt(*shapes)


caching.register_function("json_schema.formats", format_ir)
caching.register_function("json_schema.hostname", _hostname)


# --- ECMA-262 patterns (u flag), a sound regular subset -----------------------------------------
def _cs(*ranges) -> ir.CharSet:
    return ir.CharSet.of([(ord(a), ord(b)) if isinstance(a, str) else (a, b) for a, b in ranges])


def _chars(text: str) -> ir.CharSet:
    return ir.CharSet.of([(ord(c), ord(c)) for c in text])


@lru_cache(maxsize=None)
def _ecma_regex(depth: int) -> ir.Node:
    """The sound subset of ECMA-262 ``u``-flag pattern syntax described in the module docstring."""
    lit = ir.literal
    scalar = _cs((0, 0xD7FF), (0xE000, 0x10FFFF))  # no lone surrogates
    hexd = _cs(("0", "9"), ("A", "F"), ("a", "f"))
    digit = _cs(("0", "9"))
    nonzero = _cs(("1", "9"))
    syntax = "^$\\.*+?()[]{}|"
    char_escape = ir.alt(_chars("fnrtv"), ir.seq(lit("c"), _cs(("A", "Z"), ("a", "z"))),
                         ir.seq(lit("x"), hexd, hexd), ir.seq(lit("u"), ir.repeat(hexd, 4, 4)),
                         ir.seq(lit("u{"), ir.repeat(hexd, 1, 5), lit("}")), _chars(syntax + "/"))
    class_escape = _chars("dDsSwW")
    atom_escape = ir.seq(lit("\\"), ir.alt(class_escape, char_escape))
    # classes: ranges within digits, lower case or upper case letters that start at the first of
    # them or end at the last (in order whatever the other end: 0-7, a-f, 5-9; not 2-5)
    ranges = []
    for first, last in (("0", "9"), ("a", "z"), ("A", "Z")):
        ranges.append(ir.seq(lit(first + "-"), _cs((first, last))))
        ranges.append(ir.seq(_cs((first, last)), lit("-" + last)))
    class_char = scalar.difference(_chars("\\]-"))
    # (no ``\-``: the spec allows it in a u-flag class, QuickJS's RegExp refuses it)
    class_atom = ir.alt(class_char, ir.seq(lit("\\"), ir.alt(_chars("b"), class_escape, char_escape)), *ranges)
    body = ir.repeat(class_atom, 0, None)
    klass = ir.seq(lit("["), ir.optional(lit("^")), ir.alt(ir.seq(lit("-"), body), ir.seq(body, ir.optional(lit("-")))),
                   lit("]"))
    count = ir.alt(*[ir.seq(_chars(chr(a)), lit(","), _cs((chr(a), "9"))) for a in range(ord("0"), ord("9") + 1)],
                   *[ir.seq(ir.repeat(digit, k, k), lit(","), nonzero, ir.repeat(digit, k, 3)) for k in (1, 2, 3)],
                   ir.seq(ir.repeat(digit, 1, 4), ir.optional(lit(","))))
    quant = ir.seq(ir.alt(_chars("*+?"), ir.seq(lit("{"), count, lit("}"))), ir.optional(lit("?")))
    pattern_char = scalar.difference(_chars(syntax))
    name = ir.seq(_cs(("A", "Z"), ("a", "z"), ("_", "_"), ("$", "$")),
                  ir.repeat(_cs(("A", "Z"), ("a", "z"), ("0", "9"), ("_", "_"), ("$", "$")), 0, None))
    assertion = ir.alt(_chars("^$"), lit("\\b"), lit("\\B"))
    disj = None
    for _ in range(depth + 1):
        atoms = [pattern_char, lit("."), atom_escape, klass]
        terms = [assertion]
        if disj is not None:
            atoms += [ir.seq(lit("("), ir.alt(ir.EMPTY, lit("?:"), ir.seq(lit("?<"), name, lit(">"))), disj, lit(")"))]
            terms += [ir.seq(ir.alt(lit("(?="), lit("(?!"), lit("(?<="), lit("(?<!")), disj, lit(")"))]
        term = ir.alt(*terms, ir.seq(ir.alt(*atoms), ir.optional(quant)))
        alternative = ir.repeat(term, 0, None)
        disj = ir.seq(alternative, ir.repeat(ir.seq(lit("|"), alternative), 0, None))
    # at most one named group (duplicate names are an error; comparing names is not regular)
    any_text = ir.repeat(ir.ANY_CHAR, 0, None)
    named = ir.seq(lit("(?<"), _cs(("A", "Z"), ("a", "z"), ("_", "_"), ("$", "$")))
    two_named = ir.seq(any_text, named, any_text, named, any_text)
    return ir.And((disj, ir.Not(two_named)))

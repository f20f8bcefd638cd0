"""Generation hygiene: JSON texts a language model can finish, inside the exact language.

The exact language of a schema holds texts no model should write and a weak model writes all
the time: ``23.000...`` for ``type: integer`` (an integral numeral is an integer since
draft-06), fractions and exponents of any length, whitespace runs in flexible layouts, strings
as long as ``maxLength`` (or unbounded), extra keys before the required ones.  A model that
picks among the allowed tokens almost uniformly (a small or random one) never closes such a
value.  :class:`JsonHygiene` is the set of restrictions generation applies by default
(``sg.generate``, ``Generator``, ``@sg.function``, ``structgen generate``); validation and the
benchmarks that measure coverage (the JSON-Schema-Test-Suite, MaskBench) use the exact language.

The compiled language is *exactly* ``exact language ∩ H`` where ``H`` is the set of JSON texts
whose lexemes obey the restrictions below; ``H`` is regular and does not depend on where a
lexeme sits, so the intersection is taken on the whole document (one-automaton engine) or on
every value terminal (grammar engine) -- under ``not``, ``oneOf`` and ``if`` too, after their
complements, so every output still validates.  Object layout and whitespace are layout
choices of the compilers (``extra_properties``, ``max_whitespace``), not part of ``H``.

- ``trailing_zeros=False``: a fraction never ends in ``0`` (``1.5``, not ``1.50``; ``2``, not
  ``2.0``), so integral values -- every ``type: integer`` -- are integer literals;
- ``integer_range=(-2**63, 2**63 - 1)``: integer literals (no fraction, no exponent) lie in
  the signed 64-bit range.  The schema's own numbers widen it: with a ``const`` / ``enum``
  number, ``multipleOf``, a positive lower bound or a negative upper bound of magnitude ``A``,
  literals of one digit more than ``A`` are allowed (``minimum: 1e20`` keeps its instances);
- ``number_digits=15``: a number with a fraction or an exponent has at most 15 digits before
  the exponent (``0.5`` has 2), or one more than the longest non-integral number in the schema;
- ``exponent_digits=2``: an exponent has at most 2 digits (``1e-07``, ``1.5E+30``);
- ``max_string_length=None``: with a number, every string value (not keys) has at most that
  many code points, or the schema's largest ``minLength`` (off by default: ``maxLength`` is the schema's own bound and Pydantic's
  ``max_length``; a cap above 256 is counted by grammar rules, below it inside the automaton);
- ``max_whitespace=4``: the longest whitespace run in the flexible layout (when the caller does
  not pass ``max_whitespace``; the exact compilers default to 16);
- ``extra_properties="end"``: in declared property order, undeclared members
  (``additionalProperties`` / ``patternProperties``) come after every declared one, as
  llguidance writes them ("anywhere": in any gap, the exact layout).  Objects compiled as
  member automata (under ``not`` / ``oneOf`` / counted properties) and ``property_order="any"``
  keep their members in any order.

When the restrictions leave a schema with no value at all, the schema is compiled exactly and
``report.notes`` says so.  ``report.hygiene`` lists the settings a compilation used (the widened
ones included); None: exact semantics.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from decimal import Decimal

from structgen import caching
from structgen.automaton import ir
from structgen.automaton.build import build_dfa, embedded
from structgen.errors import OptionError

from .language import WS_CHARS, any_string
from .numbers import DIGIT, DIGITS, DOT, INT, MINUS, NONZERO, PLAIN_INTEGER, FRAC, number_interval
from .strings import encode

INT64 = (-(2 ** 63), 2 ** 63 - 1)


@dataclass(frozen=True)
class JsonHygiene:
    """The generation restrictions of the module docstring (``None`` turns one off)."""

    trailing_zeros: bool = False
    integer_range: tuple | None = INT64
    number_digits: int | None = 15
    exponent_digits: int | None = 2
    max_string_length: int | None = None
    max_whitespace: int | None = 4
    extra_properties: str = "end"

    def __post_init__(self):
        for name in ("number_digits", "exponent_digits", "max_string_length", "max_whitespace"):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < (0 if name in (
                    "max_string_length", "max_whitespace") else 1)):
                raise OptionError(f"JsonHygiene({name}=...) must be a positive integer or None, not {v!r}")
        r = self.integer_range
        if r is not None:
            if not (isinstance(r, (tuple, list)) and len(r) == 2 and all(isinstance(x, int) and not isinstance(x, bool)
                                                                          for x in r) and r[0] <= 0 <= r[1]):
                raise OptionError(f"JsonHygiene(integer_range=...) must be (lo, hi) integers with lo <= 0 <= hi, "
                                  f"not {r!r}")
            object.__setattr__(self, "integer_range", (int(r[0]), int(r[1])))
        if self.extra_properties not in ("end", "anywhere"):
            raise OptionError(f"JsonHygiene(extra_properties=...) must be 'end' or 'anywhere', "
                              f"not {self.extra_properties!r}")
        if not isinstance(self.trailing_zeros, bool):
            raise OptionError("JsonHygiene(trailing_zeros=...) must be True or False")

    def for_schema(self, schema) -> "JsonHygiene":
        """These settings with the integer range and digit bound widened for ``schema``'s own
        numbers (see the module docstring)."""
        big, frac_digits, min_length = _anchors(schema)
        h = self
        if h.max_string_length is not None and min_length > h.max_string_length:
            h = replace(h, max_string_length=min_length)
        if h.integer_range is not None and big:
            w = 10 ** (len(str(int(big))) + 1) - 1
            lo, hi = h.integer_range
            if w > hi or -w < lo:
                h = replace(h, integer_range=(min(lo, -w), max(hi, w)))
        if h.number_digits is not None and frac_digits + 1 > h.number_digits:
            h = replace(h, number_digits=frac_digits + 1)
        return h

    def describe(self) -> dict:
        """The settings as a plain dict (the compile report's ``hygiene``)."""
        d = asdict(self)
        if d["integer_range"] is not None:
            d["integer_range"] = list(d["integer_range"])
        return d


def resolve_hygiene(value) -> JsonHygiene | None:
    """The :class:`JsonHygiene` an option value stands for: ``None``/``False`` (exact
    semantics), ``True`` (the defaults), a dict of its fields, or an instance."""
    if value is None or value is False:
        return None
    if value is True:
        return DEFAULT
    if isinstance(value, JsonHygiene):
        return value
    if isinstance(value, dict):
        names = {f.name for f in fields(JsonHygiene)}
        bad = sorted(k for k in value if k not in names)
        if bad:
            raise OptionError(f"hygiene has no setting{'s' if len(bad) > 1 else ''} {', '.join(map(repr, bad))} "
                              f"(it takes {', '.join(sorted(names))})")
        return JsonHygiene(**value)
    raise OptionError(f"hygiene= takes True, False, None, a dict or a JsonHygiene, not {type(value).__name__}")


DEFAULT = JsonHygiene()

_BOUND_LOW = ("minimum", "exclusiveMinimum")
_BOUND_HIGH = ("maximum", "exclusiveMaximum")


def _anchors(schema) -> tuple:
    """(largest magnitude of a number the schema asks for -- ``const``/``enum`` values,
    ``multipleOf``, positive lower and negative upper bounds --, most digits of a non-integral
    number in a numeric keyword or value, largest ``minLength``), scanning the whole document."""
    big = Decimal(0)
    frac = 0
    min_length = 0
    stack = [(schema, False)]
    while stack:
        node, data = stack.pop()
        if isinstance(node, dict):
            for k, v in node.items():
                if data or k in ("const", "enum"):
                    stack.append((v, True))
                    continue
                if _is_num(v):
                    d = _dec(v)
                    if (k in _BOUND_LOW and d > 0) or (k in _BOUND_HIGH and d < 0) or k == "multipleOf":
                        big = max(big, abs(d))
                    if k in _BOUND_LOW + _BOUND_HIGH + ("multipleOf",):
                        frac = max(frac, _frac_digits(d))
                    if k == "minLength":
                        min_length = max(min_length, int(d))
                elif isinstance(v, (dict, list)):
                    stack.append((v, False))
        elif isinstance(node, list):
            stack.extend((x, data) for x in node)
        elif data and _is_num(node):
            d = _dec(node)
            big = max(big, abs(d))
            frac = max(frac, _frac_digits(d))
    return big, frac, min_length


def _is_num(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and (not isinstance(v, float) or v == v and
                                                                         abs(v) != float("inf"))


def _dec(v) -> Decimal:
    return Decimal(repr(v)) if isinstance(v, float) else Decimal(v)


def _frac_digits(d: Decimal) -> int:
    """Digits of ``d`` written without exponent when it has a fraction part, else 0."""
    s = format(abs(d), "f")
    if "." not in s:
        return 0
    i, f = s.split(".")
    f = f.rstrip("0")
    return len(i) + len(f) if f else 0


# ----------------------------------------------------------------------------- the language H
_ECHAR = ir.CharSet.of([(ord("e"), ord("e")), (ord("E"), ord("E"))])
_SIGN = ir.CharSet.of([(ord("+"), ord("+")), (ord("-"), ord("-"))])
_PUNCT = ir.CharSet.of([(ord(c), ord(c)) for c in "{}[],:"])
_LEXICAL = caching.LRU(64, name="json_schema.hygiene")  # settings -> embedded DFA of H


def number_node(h: JsonHygiene) -> ir.Node:
    """The numerals ``h`` allows (the RFC 8259 grammar within the bounds)."""
    frac = FRAC if h.trailing_zeros else ir.seq(DOT, DIGITS, NONZERO)
    if h.integer_range is None:
        literal = PLAIN_INTEGER
    else:
        lo, hi = h.integer_range
        literal = ir.And((PLAIN_INTEGER, number_interval(Decimal(lo), False, Decimal(hi), False, integer=True)))
    exp = ir.seq(_ECHAR, ir.optional(_SIGN), ir.Repeat(DIGIT, 1, h.exponent_digits))
    with_frac = ir.seq(ir.optional(MINUS), INT, frac)
    plain = ir.seq(ir.optional(MINUS), INT)
    if h.number_digits is not None:
        d = h.number_digits
        counted = ir.alt(ir.Repeat(DIGIT, 1, d),
                         *[ir.seq(ir.Repeat(DIGIT, a, a), DOT, ir.Repeat(DIGIT, 1, d - a)) for a in range(1, d)])
        cap = ir.seq(ir.optional(MINUS), counted)
        with_frac, plain = ir.And((with_frac, cap)), ir.And((plain, cap))
    return ir.alt(literal, ir.seq(with_frac, ir.optional(exp)), ir.seq(plain, exp))


def lexical_node(h: JsonHygiene) -> ir.Node:
    """``H``: sequences of JSON lexemes (whitespace, punctuation, ``true``/``false``/``null``,
    strings, numbers) in which every number and string value obeys ``h``.  A number is followed
    by a lexeme that cannot continue it (or ends the text), so texts split into lexemes exactly
    as JSON splits them; a string followed by ``:`` (a key) is not capped.  Also applies to a
    sequence of whole lexemes inside a document (a grammar terminal)."""
    key = (h.trailing_zeros, h.integer_range, h.number_digits, h.exponent_digits, h.max_string_length)
    hit = _LEXICAL.get(key)
    if hit is not None:
        return hit
    string = any_string("value")
    if h.max_string_length is not None:
        capped = ir.seq(ir.literal('"'), encode(ir.Repeat(ir.ANY_CHAR, 0, h.max_string_length), "value"),
                        ir.literal('"'))
        string = ir.alt(ir.seq(string, ir.Repeat(WS_CHARS, 0, None), ir.literal(":")), capped)
    other = ir.alt(WS_CHARS, _PUNCT, ir.literal("true"), ir.literal("false"), ir.literal("null"), string)
    num = number_node(h)
    node = embedded(build_dfa(ir.seq(ir.Repeat(ir.alt(other, ir.seq(num, other)), 0, None), ir.optional(num))))
    _LEXICAL.put(key, node)
    return node


def with_hygiene(options: dict) -> dict:
    """``options`` with ``hygiene`` resolved to a :class:`JsonHygiene` (or removed: exact
    semantics) and, under hygiene, its whitespace bound as ``max_whitespace`` unless the caller
    gave one."""
    h = resolve_hygiene(options.get("hygiene"))
    out = {k: v for k, v in options.items() if k != "hygiene"}
    if h is not None:
        out["hygiene"] = h
        if h.max_whitespace is not None:
            out.setdefault("max_whitespace", h.max_whitespace)
    return out

"""Regex front-end: pattern text -> regular-language IR (:mod:`structgen.automaton.ir`).

``parse_regex(pattern, syntax="python", flags=0, anchored=True)``; ``parse_terminal(pattern)`` for a
grammar terminal whose lookaheads see past the lexeme (:mod:`.boundary`).

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
  naming the position.  ``\\b``, ``\\B``, backreferences and conditionals raise
  :class:`Unsupported`, and so do lookarounds unless ``lookahead=True`` (then compiled exactly:
  ``(?=X)K`` is ``K ∩ X.*``, ``(?!X)K`` is ``K ∩ ¬(X.*)``; a lookbehind, at most four per
  pattern, with no lookaround or anchor inside, is a marker byte resolved on the built automaton,
  :mod:`.boundary`); syntax errors raise :class:`RegexError`
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

``"rust"`` -- the Rust ``regex`` crate's syntax (what llguidance's Lark grammars use): Unicode
``\\d`` = ``\\p{Nd}``, ``\\s`` = ``\\p{White_Space}``, ``\\w`` = Alphabetic, marks, ``Nd``,
``Pc`` and Join_Control (UTS #18 Annex C; ASCII under ``(?-u)``); ``\\p{..}``/``\\P{..}``/``\\pL``
with general categories, scripts and binary properties (as the ``regex`` module knows them);
``[[:alpha:]]`` ASCII classes, nested classes and the class operators ``&&`` ``--`` ``~~``;
``\\x{..}`` ``\\u{..}`` ``\\U{..}``; ``\\A``, ``\\z``, ``$`` = end of text; inline flags
``imsxuU`` anywhere, applying to the rest of their group; no possessive quantifiers, no
backreferences, no ``\\N{..}``; word boundaries and the CRLF flag ``R`` raise
:class:`Unsupported`.

The syntaxes accept ``(?P<n>..)`` and ``(?<n>..)`` named groups; Python and ECMA inline flags
``(?aimsx)``/``(?i:..)``, and ``(?#..)`` comments.

Flags: ``flags`` is an ``re`` flag int (``re.I | re.S | re.M | re.X | re.A``) or a string
of letters ``"imsxa"``.
"""
from __future__ import annotations

from ...automaton import ir
from ...automaton.build import DEFAULT_MAX_STATES, build_dfa, embedded
from ...errors import OptionError
from .boundary import MARK, behind_width, resolve_behind, shortest_before, split_at_marker
from .lower import ANY_STAR, Lowering
from .parser import ALT, ATOMIC, DEFAULT_MAX_DEPTH, ECMA, FLAG_LETTERS, LOOK, PYTHON, REP, RUST, SEQ, Parser

__all__ = ["parse_regex", "parse_terminal", "search_to_full", "dfa_from_regex", "PYTHON", "ECMA", "RUST",
           "DEFAULT_MAX_DEPTH"]

_NL = ir.literal("\n")
#: what may follow a match that ends with an end anchor of this kind (None: no anchor), up to the
#: end of the input
_AFTER_END = {None: ANY_STAR, "Z": ir.EMPTY, "$": ir.repeat(_NL, 0, 1), "m": ir.alt(ir.EMPTY, ir.seq(_NL, ANY_STAR))}


def _parse_flags(flags) -> int:
    if isinstance(flags, str):
        out = 0
        for ch in flags:
            if ch not in FLAG_LETTERS:
                raise OptionError(f"unknown regex flag {ch!r}")
            out |= FLAG_LETTERS[ch]
        return out
    return int(flags)


def parse_regex(pattern: str, flags=0, *, syntax: str = PYTHON, anchored: bool = True,
                max_depth: int = DEFAULT_MAX_DEPTH, max_states: int = DEFAULT_MAX_STATES,
                lookahead: bool = False) -> ir.Node:
    """Parse ``pattern`` into IR.  See the module docstring for the exact semantics.

    Raises :class:`RegexError` (with ``pos``) on syntax errors and :class:`Unsupported`
    (``where`` names the position; ``.pos`` holds it) on non-regular constructs; groups nested
    deeper than ``max_depth`` raise :class:`LimitExceeded` (``limit="max_depth"``, the position in
    the message).  ``max_states`` bounds the DFAs built while lowering possessive quantifiers and
    atomic groups (and a :func:`~structgen.automaton.build.limit_scope` their time).
    ``lookahead=True`` compiles lookaheads ``(?=..)`` / ``(?!..)`` exactly, for patterns that
    describe a whole input (a JSON Schema ``pattern``, ``Grammar.from_regex``): they see the
    rest of it.  Off (the default, and always for ``syntax="rust"``) they raise
    :class:`Unsupported` (a grammar terminal's lookahead sees text beyond the terminal:
    :func:`parse_terminal` reads those).  ``lookahead=True`` takes lookbehinds too.
    """
    if not isinstance(pattern, str):
        raise TypeError("parse_regex expects a str pattern")
    if syntax not in (PYTHON, ECMA, RUST):
        raise OptionError(f"syntax must be {PYTHON!r}, {ECMA!r} or {RUST!r}, not {syntax!r}")
    parser = Parser(pattern, syntax, _parse_flags(flags), max_depth, lookahead)
    tree = parser.parse()
    low = Lowering(parser, max_states, boundary=parser.has_behind)
    with ir.recursion_room(parser.max_depth_seen):  # anchors and possessive parts are walked recursively
        node = _lowered(low, tree, anchored)
        if not low.behind:
            return node
        return embedded(_resolved(low, build_dfa(node, max_states), max_states, terminal=False))


def _lazy_at(tree):
    """The position of a lazy quantifier in ``tree``, or None."""
    todo = [tree]
    while todo:
        x = todo.pop()
        if x.kind == REP and x.d == "lazy":
            return x.pos
        if x.kind in (SEQ, ALT):
            todo.extend(x.a)
        elif x.kind in (REP, ATOMIC, LOOK):
            todo.append(x.a)
    return None


def _resolved(low, d, max_states: int, terminal: bool):
    """``d`` with the lookbehind markers of ``low`` resolved (:func:`.boundary.resolve_behind`); in
    a ``terminal`` a lookbehind that could see before the lexeme raises :class:`Unsupported`."""
    for byte, body, negative, pos, _ in low.behind.values():
        if terminal:
            width = behind_width(body, max_states)
            if width is None or shortest_before(d, byte) < width:
                raise low.parser.unsupported("a lookbehind that can see before the lexeme", pos)
        d = resolve_behind(d, byte, body, negative, max_states)
    return d


def parse_terminal(pattern: str, flags=0, *, syntax: str = PYTHON, max_depth: int = DEFAULT_MAX_DEPTH,
                   max_states: int = DEFAULT_MAX_STATES) -> list:
    """A grammar terminal's pattern whose lookaheads may see past the lexeme: ``[(lexemes,
    rests)]``, ``lexemes`` an IR node and ``rests`` None (any text may follow) or the ByteDFA of
    the rests of the input allowed after those lexemes (up to the end of the input).  The
    lexemes of different entries are disjoint.  A lookahead sees the text after the lexeme as
    Python's ``re`` does when it matches the pattern inside the whole text; an end anchor at the
    pattern's end is a rest condition too (start anchors are ignored, as by :func:`parse_regex`).
    A lookbehind must look back inside the lexeme (it does not see the text before it), and not in
    a pattern with a lazy quantifier (whose lexeme in Lark is the first match): else
    :class:`Unsupported`.
    Without a lookahead: ``[(parse_regex(pattern), None)]``.  See :mod:`.boundary`."""
    if syntax == RUST:
        return [(parse_regex(pattern, flags, syntax=syntax, max_depth=max_depth, max_states=max_states), None)]
    parser = Parser(pattern, syntax, _parse_flags(flags), max_depth, True)
    tree = parser.parse()
    low = Lowering(parser, max_states, boundary=tree.look)
    with ir.recursion_room(parser.max_depth_seen):
        if not tree.look:
            return [(_lowered(low, tree, True), None)]
        lazy = _lazy_at(tree) if parser.has_behind else None
        if lazy is not None:
            # the idiom ".*?(?<!\\)..." means Lark's first match, which every lexing does not model
            raise parser.unsupported("a lookbehind in a pattern with a lazy quantifier", lazy)
        node = ir.alt(*[low.lower(body, ir.seq(MARK, _AFTER_END[ek])) for _, ek, body in low.variants(tree)])
        d = _resolved(low, build_dfa(node, max_states), max_states, terminal=True)
        return [(embedded(lexemes), rest) for lexemes, rest in split_at_marker(d)]


def _lowered(low, tree, anchored: bool) -> ir.Node:
    out = []
    for sk, ek, body in low.variants(tree):
        if anchored:
            prefix, suffix = ir.EMPTY, ir.EMPTY
        else:
            prefix = {None: ANY_STAR, "A": ir.EMPTY,
                      "m": ir.alt(ir.EMPTY, ir.seq(ANY_STAR, _NL))}[sk]
            suffix = _AFTER_END[ek]
        out.append(ir.seq(prefix, low.lower(body, suffix)))
    return ir.alt(*out)


def search_to_full(node: ir.Node) -> ir.Node:
    """Search semantics for an anchor-free node: any text, a match, any text."""
    return ir.seq(ANY_STAR, node, ANY_STAR)


def dfa_from_regex(pattern: str, flags=0, *, syntax: str = PYTHON, anchored: bool = True, **build_kw):
    """``build_dfa(parse_regex(pattern, ...), **build_kw)``."""
    return build_dfa(parse_regex(pattern, flags, syntax=syntax, anchored=anchored), **build_kw)

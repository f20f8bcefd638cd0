"""Grammar composition: sequences, alternatives, repetitions, literals and special tokens.

``Grammar`` gets these from :class:`GrammarAlgebra` (a mixin, so this module needs no import of
:mod:`structgen.grammar`):

    g = sg.Grammar.sequence("Answer: ", sg.Grammar.from_regex(r"\\d+"), sg.Grammar.optional("."))
    g = a | b                  # Grammar.alternatives(a, b); a string is a literal
    g = a + b                  # Grammar.sequence(a, b)
    g = sg.Grammar.repeat(a, 1, 3)
    sg.Grammar.special("<|python_tag|>")   # exactly that special token (by text, or an int id)
    sg.Grammar.marker("<tool_call>\\n")    # text in which the vocabulary's special tokens are tokens

Languages are exact: concatenation, union and repetition of the parts' languages (each part's
Lark ``%ignore`` applies inside that part only; see :mod:`structgen.cfg.compose`).  Regular
composed with regular stays regular (one IR node, one DFA); anything with a context-free part
becomes a grammar for the grammar engine in which each run of neighbouring regular parts is one
terminal (a DFA).

Special tokens.  A constraint never produces a special token's text (see
:class:`~structgen.vocab.Vocabulary`); a grammar that names one is compiled against
:meth:`Vocabulary.with_special_tokens`, where the token is spelled by reserved bytes
(``0xFF`` and its id, never in UTF-8) and the grammar holds exactly those bytes, so the mask
allows that token id where the grammar names it and nowhere else, and the text spelled by
ordinary tokens stays text.  A grammar naming a token by its text needs the vocabulary to know
its id: it is *deferred* (``kind == "deferred"``), resolved by :meth:`GrammarAlgebra.resolve`
when compiled (cached per vocabulary).  EOS tokens cannot be named (a sentence ends where EOS is
allowed), nor ordinary tokens by id (a token id is not text: the grammar would also take other
spellings of its bytes).
"""
from __future__ import annotations

import re
from typing import Callable

from . import caching
from .automaton import ir
from .cfg.compose import CFGBuilder
from .cfg.grammar import CFG
from .errors import GrammarError, Unsupported
from .vocab.vocabulary import special_token_bytes

__all__ = ["GrammarAlgebra", "special_node", "check_specials"]

_RESOLVED = caching.LRU(128, name="grammar.resolved")  # (grammar key, vocabulary fingerprint) -> Grammar
_TOKEN_ID = re.compile(r"<\[(\d+)\]>")


def special_node(token_id: int) -> ir.Node:
    """The IR of the reserved spelling of special token ``token_id``."""
    return ir.seq(*(ir.ByteSet(((b, b),)) for b in special_token_bytes(token_id)))


def _special_id(vocab, token: str) -> int:
    i = vocab.special_token_id(token)
    if i is None:
        eos = [int(e) for e in vocab.eos_ids if vocab.special_tokens.get(int(e)) == token]
        if eos:
            raise GrammarError(f"special token {token!r} is an end-of-sequence token of this vocabulary: a grammar "
                               f"ends where EOS is allowed, so leave it out")
        raise GrammarError(f"unknown special token {token!r}: the vocabulary has no special token with this text")
    return i


def check_specials(grammar, vocab) -> None:
    """Raise unless every special token id ``grammar`` names is a special, non-EOS token of ``vocab``."""
    special = set(vocab.special_ids.tolist())
    eos = set(vocab.eos_ids.tolist())
    for i in sorted(grammar.specials):
        if i in eos:
            raise GrammarError(f"token <[{i}]> is an end-of-sequence token of this vocabulary: a grammar ends where "
                               f"EOS is allowed, so leave it out")
        if i not in special:
            if 0 <= i < vocab.size and vocab.is_normal[i]:
                raise Unsupported(f"token <[{i}]> ({vocab.token_bytes(i)!r}) is an ordinary token: only special "
                                  f"tokens can be named by id (a grammar matches text, and an ordinary token's text "
                                  f"has other spellings)", f"<[{i}]>")
            raise GrammarError(f"token <[{i}]> is not a special token of this vocabulary")


class GrammarAlgebra:
    """Composition for :class:`~structgen.Grammar` (see the module docstring)."""

    __slots__ = ()

    # -- atoms ---------------------------------------------------------------------
    @classmethod
    def literal(cls, text: str):
        """Exactly ``text`` (as text: special tokens' texts included, spelled by ordinary tokens)."""
        if not isinstance(text, str):
            raise TypeError(f"Grammar.literal() takes a string, not {type(text).__name__}")
        return cls("regular", node=ir.literal(text) if text else ir.EMPTY, key=("literal", text),
                   source=f"literal {text[:40]!r}")

    @classmethod
    def special(cls, token):
        """Exactly one special token: an id (``128010``), ``"<[128010]>"``, or its text
        (``"<|python_tag|>"``, resolved against the vocabulary at compile time; a vocabulary
        without it raises :class:`~structgen.errors.GrammarError` there)."""
        if isinstance(token, str):
            m = _TOKEN_ID.fullmatch(token)
            if m is None:
                return cls.deferred(lambda vocab: cls.special(_special_id(vocab, token)), ("special", token),
                                    f"special token {token!r}")
            token = int(m.group(1))
        if isinstance(token, bool) or not isinstance(token, int):
            raise TypeError(f"Grammar.special() takes a token id or a token's text, not {type(token).__name__}")
        return cls("regular", node=special_node(token), key=("special", token), source=f"special token <[{token}]>",
                   specials=frozenset([token]))

    @classmethod
    def marker(cls, text: str):
        """``text``, with every special token of the vocabulary whose text occurs in it taken as that
        token (leftmost, longest first) and the rest as text: on Qwen ``"<tool_call>\\n"`` is the
        token ``<tool_call>`` and a newline, on a vocabulary without that token it is text.  Resolved
        at compile time.  Tags, triggers and the reasoning delimiters are markers."""
        if isinstance(text, GrammarAlgebra):
            return text
        if not isinstance(text, str):
            raise TypeError(f"a marker is a string or a Grammar, not {type(text).__name__}")
        if not text:
            return cls.literal("")

        def build(vocab):
            return cls.sequence(*[cls.special(p) if is_token else cls.literal(p)
                                  for p, is_token in split_specials(text, vocab)])

        return cls.deferred(build, ("marker", text), f"marker {text[:40]!r}")

    @classmethod
    def deferred(cls, builder: Callable, key, source: str = "deferred grammar"):
        """A grammar that needs the vocabulary: ``builder(vocab)`` returns the Grammar to compile
        (called once per vocabulary, by :meth:`resolve`)."""
        return cls("deferred", builder=builder, key=("deferred", key), source=source)

    def resolve(self, vocab):
        """The grammar to compile for ``vocab``: ``self`` unless deferred (then built, and cached
        per vocabulary)."""
        if self.kind != "deferred":
            return self
        k = (self.key, vocab.base.fingerprint)
        hit = _RESOLVED.get(k)
        if hit is None:
            hit = self.builder(vocab.base)
            while hit.kind == "deferred":
                hit = hit.builder(vocab.base)
            _RESOLVED.put(k, hit)
        return hit

    # -- operators -----------------------------------------------------------------
    @classmethod
    def sequence(cls, *parts):
        """The parts one after another (strings are literals)."""
        return cls._combine("seq", [cls._part(p) for p in parts])

    @classmethod
    def alternatives(cls, *parts):
        """Any one of the parts (strings are literals); at least one part."""
        if not parts:
            raise GrammarError("Grammar.alternatives() needs at least one part")
        return cls._combine("alt", [cls._part(p) for p in parts])

    @classmethod
    def optional(cls, part):
        """``part`` or nothing."""
        return cls.repeat(part, 0, 1)

    @classmethod
    def repeat(cls, part, min: int = 0, max: int | None = None):
        """``part`` from ``min`` to ``max`` times (``None``: no upper bound)."""
        if isinstance(min, bool) or not isinstance(min, int) or min < 0 or (
                max is not None and (isinstance(max, bool) or not isinstance(max, int) or max < min)):
            raise GrammarError(f"Grammar.repeat(): need integers 0 <= min <= max, got min={min!r}, max={max!r}")
        return cls._combine("rep", [cls._part(part)], min, max)

    def __or__(self, other):
        return type(self).alternatives(self, other)

    def __ror__(self, other):
        return type(self).alternatives(other, self)

    def __add__(self, other):
        return type(self).sequence(self, other)

    def __radd__(self, other):
        return type(self).sequence(other, self)

    @classmethod
    def embedding(cls, cfg, parts: dict, key, source: str = "grammar with embedded parts"):
        """A grammar-engine grammar: ``cfg`` in which each terminal named in ``parts`` stands for
        that Grammar's whole language (a Lark grammar's ``%json`` and special tokens).  The
        outer grammar's ``%ignore`` applies around the parts, not inside them."""
        parts = {n: p for n, p in parts.items() if n in cfg.terminals}
        if any(p.kind == "deferred" for p in parts.values()):
            return cls.deferred(lambda vocab: cls.embedding(cfg, {n: p.resolve(vocab) for n, p in parts.items()},
                                                            key, source), key, source)
        for p in parts.values():
            if getattr(p.report, "unique_keys", False):
                raise Unsupported(f"{p.source} with property_order='any' cannot be embedded in a grammar", p.source)
            if getattr(p.report, "unique_items", None) is not None:
                raise Unsupported(f"{p.source}: uniqueItems over an open item set cannot be embedded in a grammar "
                                  f"(its guard watches a whole JSON document)", p.source)
        terminals = dict(cfg.terminals)
        terminals.update({n: p.node for n, p in parts.items() if p.kind == "regular"})
        out = CFG(cfg.start, cfg.rules, terminals, list(cfg.ignore), dict(cfg.positions))
        sub = {n: p for n, p in parts.items() if p.kind != "regular"}
        if sub:
            b = CFGBuilder()
            out = b.grammar(b.embed(out, {n: b.embed(p.cfg, hint="part") for n, p in sub.items()}))
        sl = next((p.slicing for p in parts.values() if p.slicing is not None), None)
        return cls("cfg", cfg=out, key=key, source=source,
                   specials=frozenset().union(*(p.specials for p in parts.values())),
                   slicing=sl)

    @classmethod
    def _part(cls, p):
        if isinstance(p, cls):
            return p
        if isinstance(p, str):
            return cls.literal(p)
        raise TypeError(f"a grammar part is a Grammar or a string (a literal), not {type(p).__name__}")

    @classmethod
    def _combine(cls, op: str, parts: list, lo: int = 0, hi: int | None = None):
        key = (op, lo, hi, tuple(p.key for p in parts))
        src = {"seq": "sequence", "alt": "alternatives", "rep": "repetition"}[op] + f" of {len(parts)} parts"
        if any(p.kind == "deferred" for p in parts):
            return cls.deferred(lambda vocab: cls._combine(op, [p.resolve(vocab) for p in parts], lo, hi), key, src)
        for p in parts:
            if getattr(p.report, "unique_keys", False):
                raise Unsupported(f"{p.source} with property_order='any' cannot be part of a composed grammar (its "
                                  f"duplicate-key guard watches a whole JSON document)", p.source)
            if getattr(p.report, "unique_items", None) is not None:
                raise Unsupported(f"{p.source}: uniqueItems over an open item set cannot be part of a composed "
                                  f"grammar (its guard watches a whole JSON document)", p.source)
        specials = frozenset().union(*(p.specials for p in parts))
        sl = next((p.slicing for p in parts if p.slicing is not None), None)
        if all(p.kind == "regular" for p in parts):
            nodes = [p.node for p in parts]
            node = (ir.seq(*nodes) if nodes else ir.EMPTY) if op == "seq" else ir.alt(*nodes) if op == "alt" \
                else ir.repeat(nodes[0], lo, hi)
            return cls("regular", node=node, key=key, source=src, specials=specials, slicing=sl)
        b = CFGBuilder()
        if op == "seq":
            syms, run = [], []
            for p in parts + [None]:
                if p is not None and p.kind == "regular":
                    run.append(p.node)
                    continue
                if run:
                    syms.append(b.terminal(ir.seq(*run)))
                    run = []
                if p is not None:
                    syms.append(b.embed(p.cfg))
            start = b.sequence(syms)
        elif op == "alt":
            regular = [p.node for p in parts if p.kind == "regular"]
            syms = ([b.terminal(ir.alt(*regular))] if regular else []) + [b.embed(p.cfg) for p in parts
                                                                           if p.kind != "regular"]
            start = b.rule([(s,) for s in syms], "alt")
        else:
            start = b.repeat(b.embed(parts[0].cfg), lo, hi)
        cfg = b.grammar(start)
        return cls("cfg", cfg=cfg, key=key, source=src, specials=specials,
                   slicing=sl)


def split_specials(text: str, vocab) -> list:
    """``[(piece, is_special_token)]``: ``text`` cut at the texts of ``vocab``'s special tokens
    (leftmost occurrence first, the longest there)."""
    names = [n for n in vocab.special_token_ids if n and n in text]
    out, pos = [], 0
    while pos < len(text):
        best = None
        for n in names:
            i = text.find(n, pos)
            if i >= 0 and (best is None or i < best[0] or (i == best[0] and len(n) > len(best[1]))):
                best = (i, n)
        if best is None:
            out.append((text[pos:], False))
            break
        if best[0] > pos:
            out.append((text[pos:best[0]], False))
        out.append((best[1], True))
        pos = best[0] + len(best[1])
    return out

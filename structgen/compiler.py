"""compile(): a Grammar meets a Vocabulary.

Regular grammars become a byte DFA and then a :class:`~structgen.index.TokenDFA`;
context-free ones go to the grammar engine; deferred ones are resolved for the vocabulary first,
and a grammar naming special tokens is compiled against
:meth:`~structgen.Vocabulary.with_special_tokens` (the matchers' ``vocab``; same ids).  Results are cached per
(grammar, vocabulary, limits) in the registered LRU ``"compile"`` (:mod:`structgen.caching`).
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

from . import caching
from .collector import pausing
from .automaton import ir
from .composition import check_specials
from .grammar import Grammar
from .index.slices import SliceDef, Slicing
from .runtime.key_guard import KeyGuardMatcher
from .runtime.unique_guard import UniqueItemsMatcher
from .runtime.matcher import TokenDFAMatcher
from .runtime.protocol import Matcher
from .automaton.build import DEFAULT_MAX_MEMORY, DEFAULT_MAX_NFA_STATES, build_dfa, limit_scope
from .automaton.limits import check_count, check_known, check_seconds
from .errors import LimitExceeded
from .cfg import compile_cfg
from .cfg.engine import PREFILL_SECONDS
from .index.token_dfa import TokenDFA

_CACHE = caching.LRU(64, name="compile")  # (grammar key, vocabulary, limits) -> CompiledGrammar

#: The slices of grammars whose front end asks for none (regexes, choices, Lark, GBNF): the body
#: of a double-quoted string with backslash escapes (every code point from U+0020 but ``"``,
#: ``\\`` and the surrogates), where free-text states loop.  (The JSON front end asks for the same
#: set plus a lexeme superset: :mod:`structgen.frontends.json_schema.slicing`.)
QUOTED_TEXT = ir.CharSet.of([(0x20, 0x21), (0x23, 0x5B), (0x5D, 0xD7FF), (0xE000, 0x10FFFF)])
DEFAULT_SLICING = Slicing((SliceDef(QUOTED_TEXT, 0.25, "quoted text"),))


def slicing_of(grammar: Grammar) -> Slicing:
    """The vocabulary slices ``grammar`` is compiled with: its front end's; else, for a grammar
    whose terminals repeat a large character set that lacks some of the default's (llama.cpp's
    name/age grammar repeats the printable characters but DEL, 1 to 100 times), that set first --
    the grammar engine counts run characters only with a set its states move alike on (its
    tables cost about 20 ms per vocabulary) -- then the default."""
    if grammar.slicing is not None:
        return grammar.slicing
    if grammar.cfg is not None:
        cs = repeated_text_charset(grammar.cfg.terminals.values())
        # a set that holds the default one already moves alike on its characters
        if cs is not None and QUOTED_TEXT.difference(cs).ranges:
            return Slicing((SliceDef(cs, 0.25, "repeated text"),) + DEFAULT_SLICING.slices)
    return DEFAULT_SLICING


#: a repeated character set counts as text when it holds this many printable ASCII characters
TEXT_ASCII = 64


def repeated_text_charset(nodes) -> ir.CharSet | None:
    """The largest character set (by printable ASCII members, then code points) that is, or is an
    alternative of, the item of a repetition in the IR ``nodes``, if it holds at least
    ``TEXT_ASCII`` printable ASCII characters; else None.  An iterative walk (no recursion)."""
    best, best_key = None, (TEXT_ASCII - 1, 0)
    todo, seen = list(nodes), set()
    while todo:
        x = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, ir.Repeat) and (x.max is None or x.max > 1):
            item = x.item
            for c in item.items if isinstance(item, ir.Alt) else (item,):
                if isinstance(c, ir.CharSet):
                    key = (sum(max(0, min(b, 0x7E) - max(a, 0x20) + 1) for a, b in c.ranges),
                           sum(b - a + 1 for a, b in c.ranges))
                    if key > best_key:
                        best, best_key = c, key
        if isinstance(x, (ir.Seq, ir.Alt)):
            todo.extend(x.items)
        elif isinstance(x, ir.Repeat):
            todo.append(x.item)
    return best


@dataclass
class CompileStats:
    """What a compilation produced and how long it took (seconds)."""

    kind: str
    states: int = 0
    byte_classes: int = 0
    dfa_seconds: float = 0.0
    index_seconds: float = 0.0
    extra: dict = field(default_factory=dict)

    @property
    def seconds(self) -> float:
        return self.dfa_seconds + self.index_seconds


class CompiledGrammar:
    """A grammar compiled against one vocabulary; hands out matchers."""

    def __init__(self, grammar: Grammar, vocab, *, token_dfa=None, engine=None, stats: CompileStats):
        self.grammar = grammar
        self.vocab = vocab
        self.token_dfa = token_dfa   # regular grammars
        self.engine = engine         # context-free grammars (structgen.cfg)
        self.stats = stats

    @property
    def is_regular(self) -> bool:
        return self.token_dfa is not None

    def matcher(self) -> Matcher:
        """A fresh :class:`~structgen.Matcher` at the start of the constraint."""
        m = TokenDFAMatcher(self.token_dfa) if self.token_dfa is not None else self.engine.matcher()
        if getattr(self.grammar.report, "unique_keys", False):
            # property_order="any": the grammar is exact modulo duplicate keys; the guard rejects those
            m = KeyGuardMatcher(m, self.vocab, live_keys=getattr(self.grammar.report, "live_keys", False))
        plan = getattr(self.grammar.report, "unique_items", None)
        if plan is not None:
            # uniqueItems over open item sets: the grammar is exact modulo duplicate items
            m = UniqueItemsMatcher(m, self.vocab, plan)
        return m

    def __repr__(self) -> str:
        s = self.stats
        return f"CompiledGrammar({self.grammar.source}, {s.kind}, states={s.states}, {s.seconds * 1e3:.1f} ms)"


#: compile()'s keyword options (the limits are named by LimitExceeded's advice)
COMPILE_OPTIONS = ("max_states", "time_limit", "max_nfa_states", "max_memory", "cache", "prefill")


@pausing
def compile(grammar: Grammar, vocab, *, max_states: int = 100_000, time_limit: float | None = 10.0,
            max_nfa_states: int = DEFAULT_MAX_NFA_STATES, max_memory: int = DEFAULT_MAX_MEMORY,
            cache: bool = True, prefill: float | None = None, **unknown) -> CompiledGrammar:
    """Compile ``grammar`` for ``vocab``.

    ``max_states`` bounds the byte DFA (for the grammar engine, each terminal's lexer DFA),
    ``time_limit`` (seconds, None: none) the DFA construction (for the grammar engine, building
    its terminals' lexer DFAs), ``max_nfa_states`` the NFA of each subset construction and
    ``max_memory`` (bytes) its NFA sets and DFA table; exceeding any raises
    :class:`~structgen.errors.LimitExceeded` naming the grammar and the option.  A bad option
    (unknown name, ``time_limit=nan``, ``max_states=-5``) raises :class:`~structgen.errors.OptionError`.

    ``prefill`` (seconds; grammar engine only): time spent filling the mask cache ahead of the
    first masks, at most 15 ms of it inside this call and the rest on a background thread.  None:
    ``PREFILL_SECONDS`` for Lark and GBNF grammars (compiled once, used many times), 0 for JSON
    Schemas (whose time to first mask it would lengthen).  A grammar served for long may take
    more (``prefill=2.0``): first visits of deep token boundaries (a CSV row) then find their
    mask parts computed.  Masks do not depend on it.
    """
    check_known(unknown, COMPILE_OPTIONS, "compile()")
    if not isinstance(grammar, Grammar):
        raise TypeError(f"compile() takes a structgen.Grammar, not {type(grammar).__name__}")
    max_states = check_count(max_states, "max_states")
    time_limit = check_seconds(time_limit)
    max_nfa_states = check_count(max_nfa_states, "max_nfa_states")
    max_memory = check_count(max_memory, "max_memory")
    prefill = check_seconds(prefill, "prefill")
    key = (grammar.key, vocab.fingerprint, max_states, time_limit, max_nfa_states, max_memory, prefill)
    hit = _CACHE.get(key) if cache else None
    if hit is not None:
        return hit
    try:
        concrete = grammar.resolve(vocab)
        if concrete.specials:
            check_specials(concrete, vocab)
            vocab = vocab.with_special_tokens()  # the named special tokens get spellings
        result = _compile(concrete, vocab, max_states, time_limit, max_nfa_states, max_memory, prefill)
        if concrete is not grammar:
            result.grammar = grammar
    except LimitExceeded as e:
        raise e.within(f"compiling {grammar.source}", COMPILE_OPTIONS) from e
    if cache:
        _CACHE.put(key, result)
    return result


def _compile(grammar: Grammar, vocab, max_states, time_limit, max_nfa_states, max_memory,
             prefill=None) -> CompiledGrammar:
    if grammar.is_regular:
        t0 = time.perf_counter()
        dfa = build_dfa(grammar.node, max_states=max_states, time_limit=time_limit,
                        max_nfa_states=max_nfa_states, max_memory=max_memory)
        t1 = time.perf_counter()
        tdfa = TokenDFA(dfa, vocab, slicing=slicing_of(grammar))
        t2 = time.perf_counter()
        stats = CompileStats("regular", states=dfa.n_states, byte_classes=dfa.n_classes,
                             dfa_seconds=t1 - t0, index_seconds=t2 - t1)
        return CompiledGrammar(grammar, vocab, token_dfa=tdfa, stats=stats)
    t0 = time.perf_counter()
    # grammars are compiled once and reused; a JSON Schema's time to first mask counts
    if prefill is None:
        prefill = 0.0 if grammar.key[0] == "json_schema" else PREFILL_SECONDS
    with limit_scope(max_nfa_states=max_nfa_states, max_memory=max_memory):
        engine = compile_cfg(grammar.cfg, vocab, max_states=max_states, time_limit=time_limit,
                             prefill_seconds=prefill, slicing=slicing_of(grammar))
    stats = CompileStats("cfg", index_seconds=time.perf_counter() - t0)
    return CompiledGrammar(grammar, vocab, engine=engine, stats=stats)

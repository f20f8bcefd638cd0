"""completable(): can a canvas with holes still become (a prefix of) a sentence?

A *canvas* is a 1-D sequence of token ids in which ``mask_token_id`` marks a *hole*: a
position that will hold exactly one token, EOS included.  EOS rules (those of the diffusion
decoders): after the first EOS every position is EOS, and the constraint must be in an
accepting state at the first EOS.  ``final=False`` asks whether some filling of the holes
makes the canvas a sequence the autoregressive matcher accepts token by token (a prefix of a
sentence, EOS-padded or not); ``final=True`` whether some filling makes it a whole sentence
(an EOS somewhere, or an accepting state at the end).

Both answers are exact:

- *Regular constraints* (a :class:`~structgen.index.TokenDFA`): the set of DFA states the
  canvas can be in, position by position; a fixed token maps each state through its
  transition, a hole maps it to the distinct successors of the state over all its tokens
  (computed once per state from its token row and cached).
- *Grammars* (Lark, GBNF, recursive JSON Schemas: the engine of :mod:`structgen.cfg`): the
  engine's byte-level Earley recogniser run over the lattice of fillings
  (:mod:`structgen.diffusion.lattice`): fixed tokens are stepped as the matcher steps them,
  each hole walks the token trie once and joins the points every token leaves into one chart,
  so the work grows with the number of holes, not with the number of fillings; the walk steps
  groups of tokens the lexer cannot tell apart at once (inside a name, every letter alike).  Lexing
  ambiguity and tokens straddling lexeme boundaries are handled as the matcher handles them
  (every lexing is kept).  Past ``max_nodes`` trie nodes for one hole or ``max_items`` chart
  items it raises :class:`~structgen.errors.LimitExceeded`: never a guess.
- *Other matchers* (a grammar with ``property_order="any"``, whose key guard is not part of the
  engine): a search over matcher forks, one per distinct token sequence, bounded by
  ``max_configs`` (:class:`LimitExceeded` past it).

Trailing holes with ``final=False`` cost nothing when every reachable state can take a token
(always for a TokenDFA, whose token-dead states are pruned; for grammars when every byte is a
single-byte token of the vocabulary, as in byte-level BPE and byte-fallback vocabularies):
any live point then extends by one more token or by EOS.  With ``final=True`` and such a
vocabulary, ``k`` trailing holes are enough when the shortest completion of the grammar
point is at most ``k`` bytes (:meth:`~.lattice.Chart.min_bytes`); otherwise they are walked.

Holes before a fixed token, with such a vocabulary, are first tried with single-byte tokens only
(each hole's walk one trie level deep): a filling found there is a filling of the canvas, so
True is final; otherwise every token of every hole is walked.  Runs of holes are where the full
walk grows (the points joined after one hole seed the next), and a run of ``k`` holes always has
the ``256 ** k`` single-byte fillings among its fillings.
"""
from __future__ import annotations

import numpy as np

from .. import caching
from ..errors import LimitExceeded
from ..runtime.checks import check_tokens
from ..runtime.matcher import TokenDFAMatcher
from ..runtime.protocol import Matcher
from .lattice import Chart

__all__ = ["completable", "tail_fits", "Canvas", "DEFAULT_LIMITS"]

#: default work bounds of :func:`completable` (each a keyword argument of it)
DEFAULT_LIMITS = {"max_nodes": 5_000_000, "max_total_nodes": 50_000_000, "max_items": 20_000_000,
                  "max_work": 2_000_000_000, "max_configs": 20_000}

_SUCC = caching.LRU(1 << 16, name="diffusion.successors")     # (TokenDFA, state) -> successor states
_BYTES_COVERED = caching.LRU(64, name="diffusion.single_bytes")  # vocabulary fingerprint -> bool


class Canvas:
    """A canvas read once: its ids, which positions are holes or EOS, and suffix facts.

    ``restrict`` (position -> allowed token ids) narrows some holes to a set of tokens.
    ``tail_free[i]``: every position from ``i`` on may be EOS (EOS may fill them all);
    ``tail_holes[i]``: every position from ``i`` on is an unrestricted hole."""

    __slots__ = ("ids", "hole", "eos", "tail_free", "tail_holes", "allow")

    def __init__(self, tokens, mask_token_id: int, eos_ids, restrict=None, width: int = 0):
        ids = check_tokens(tokens)
        self.ids = ids
        self.hole = ids == int(mask_token_id)
        eos = [int(e) for e in eos_ids]
        self.eos = (np.isin(ids, eos) if len(eos) > 1 else ids == (eos[0] if eos else -2)) & ~self.hole
        n = ids.shape[0]
        free = self.hole | self.eos
        open_ = self.hole.copy()
        self.allow = {}
        for i, toks in (restrict or {}).items():
            i = int(i)
            if not (0 <= i < n and self.hole[i]):
                raise ValueError(f"restrict names position {i}, which is not a hole of the canvas")
            toks = np.asarray(toks, np.int64)
            mask = np.zeros(max(width, int(toks.max()) + 1 if toks.size else 1), np.uint8)
            mask[toks[(toks >= 0) & (toks < mask.shape[0])]] = 1
            self.allow[i] = mask
            open_[i] = False
            free[i] = bool(np.isin(eos, toks).any()) if eos else False
        self.tail_free = np.ones(n + 1, bool)
        self.tail_holes = np.ones(n + 1, bool)
        if n:  # suffix ANDs
            self.tail_free[:n] = np.logical_and.accumulate(free[::-1])[::-1]
            self.tail_holes[:n] = np.logical_and.accumulate(open_[::-1])[::-1]

    def eos_may_fill(self, i: int) -> bool:
        a = self.allow.get(i)
        return True if a is None else bool(self.tail_free[i])


def completable(compiled, tokens, *, mask_token_id: int, state=None, final: bool = False,
                eos_ids=None, shortcuts: bool = True, tail_walk: bool = True, restrict=None,
                **limits) -> bool:
    """True iff some filling of the holes of ``tokens`` makes a valid canvas (module docstring).

    Args:
        compiled: a :class:`~structgen.CompiledGrammar` (regular or grammar).
        tokens: the canvas: a list, 1-D numpy array or tensor of integer ids.
        mask_token_id: the id that marks a hole (one token to come, EOS included).
        state: where the canvas starts: None (the constraint's start), a matcher of
            ``compiled`` (its current point; it is not moved), or for regular constraints a
            TokenDFA state id.
        final: False: a prefix of a sentence; True: a whole sentence.
        eos_ids: the ids that count as EOS (default: the vocabulary's EOS ids; add a model's
            pad id here when it pads with it).
        shortcuts: False walks trailing holes too instead of the tail tests of the module
            docstring (same answers, slower: for tests).
        restrict: ``{position: token ids}``: those holes take only these tokens (EOS only if listed).
        tail_walk: False: with ``final=True``, trailing holes after a grammar point are decided by
            the shortest-completion test alone (when the vocabulary spells every byte): a
            *stricter* question -- does a completion fit in single-byte tokens -- answered
            without walking the holes.  The lookahead keeps this stronger invariant, so that
            its left-to-right filling always finds a token by the tail test.
        limits: ``max_nodes`` (trie-node groups one hole may step), ``max_total_nodes`` (all holes
            together), ``max_work`` (Earley items and frontier points made by all hole walks:
            their time, about 0.1 µs each here), ``max_items`` (chart items),
            ``max_configs`` (matcher forks of the generic search); see :data:`DEFAULT_LIMITS`.
    Raises:
        LimitExceeded: a bound was passed (the answer is unknown, never guessed).
        TokenError: ``tokens`` holds non-integers.
    """
    lim = dict(DEFAULT_LIMITS)
    for k, v in limits.items():
        if k not in lim:
            raise TypeError(f"completable() got an unexpected keyword argument {k!r}")
        lim[k] = int(v)
    vocab = compiled.vocab
    eos = vocab.eos_ids if eos_ids is None else eos_ids
    canvas = Canvas(tokens, mask_token_id, eos, restrict, vocab.logits_width)
    reader = _reader(compiled, state, lim)
    if isinstance(reader, _GrammarChart) and reader.bytes_covered and shortcuts:
        # A quick witness first: the inner holes filled with single-byte tokens only (each trie walk
        # one level deep).  Its fillings are fillings of the canvas, so True is the answer; after
        # False the full walk decides.  Runs of holes are where the full walk grows.
        narrow = _single_byte_inner(canvas, vocab, restrict)
        if narrow is not None:
            if scan(reader, Canvas(tokens, mask_token_id, eos, narrow, vocab.logits_width), final,
                    tail_walk=tail_walk):
                return True
            reader = _reader(compiled, state, lim)
    return scan(reader, canvas, final, shortcuts=shortcuts, tail_walk=tail_walk)


def _single_byte_inner(canvas: Canvas, vocab, restrict) -> dict | None:
    """``restrict`` narrowed to the single-byte tokens at every hole before the last fixed token
    (None when no hole is there or none is left unrestricted)."""
    fixed = np.flatnonzero(~canvas.hole)
    if fixed.size == 0:
        return None
    inner = np.flatnonzero(canvas.hole[:int(fixed[-1])])
    if inner.size == 0:
        return None
    single = _single_byte_tokens(vocab)
    out = dict(restrict or {})
    for i in inner.tolist():
        toks = out.get(i)
        out[i] = single if toks is None else np.intersect1d(np.asarray(toks, np.int64), single)
    return out


_SINGLE_BYTES = caching.LRU(8, name="diffusion.single_byte_tokens")  # vocabulary fingerprint -> ids


def _single_byte_tokens(vocab) -> np.ndarray:
    """The ids of the normal single-byte tokens (cached per vocabulary)."""
    hit = _SINGLE_BYTES.get(vocab.fingerprint)
    if hit is None:
        lengths = np.diff(vocab.token_offsets)[:vocab.is_normal.shape[0]]
        hit = np.flatnonzero((lengths == 1) & vocab.is_normal[:lengths.shape[0]]).astype(np.int64)
        _SINGLE_BYTES.put(vocab.fingerprint, hit)
    return hit


def tail_fits(compiled, state, k: int, final: bool, **limits) -> bool:
    """A quick sufficient test that ``k`` holes after ``state`` (a matcher) can end the canvas:
    the tail tests of the module docstring only (no hole is walked; False means "not shown")."""
    lim = dict(DEFAULT_LIMITS)
    lim.update(limits)
    reader = _reader(compiled, state, lim)
    if reader is None:
        return True
    if k == 0:
        return reader.accepting() if final else reader.alive()
    if isinstance(reader, _RegularSet):
        return scan(reader, Canvas([-1] * k, -1, compiled.vocab.eos_ids), final)
    return bool(reader.alive() and (reader.free_tail() if not final else (reader.accepting() or reader.fits(k))))


def fits_decide_tails(compiled) -> bool:
    """Whether :func:`tail_fits` answers exactly what ``completable(..., tail_walk=False)`` does for
    trailing holes of ``compiled`` (grammars over a vocabulary spelling every byte) -- or, for
    regular constraints, exactly what ``completable`` does."""
    guarded = getattr(getattr(compiled.grammar, "report", None), "guarded", False)
    if guarded:
        return False
    if compiled.is_regular:
        return True
    return getattr(compiled, "engine", None) is not None and _single_bytes_covered(compiled.vocab)


def scan(reader, canvas: Canvas, final: bool, start: int = 0, shortcuts: bool = True, tail_walk: bool = True) -> bool:
    """Walk ``canvas`` from position ``start`` with ``reader`` (a point set: ``alive``,
    ``accepting``, ``step_token``, ``step_hole``, ``free_tail``) and decide completability."""
    ids, hole, eos = canvas.ids, canvas.hole, canvas.eos
    n = ids.shape[0]
    if reader is None:  # a terminated start: only EOS may follow
        return bool(canvas.tail_free[start])
    if not reader.alive():
        return False
    for i in range(start, n):
        if hole[i]:
            if canvas.tail_free[i + 1] and canvas.eos_may_fill(i) and reader.accepting():
                return True  # EOS here and in every later position
            if shortcuts and canvas.tail_holes[i] and (reader.free_tail() if not final else reader.fits(n - i)):
                return True
            if final and not tail_walk and canvas.tail_holes[i] and reader.fits_decides():
                return False
            if not reader.step_hole(canvas.allow.get(i)):
                return False
        elif eos[i]:
            return bool(canvas.tail_free[i + 1]) and reader.accepting()
        elif not reader.step_token(int(ids[i])):
            return False
    return reader.accepting() if final else True


# ---------------------------------------------------------------------------------- readers
def _reader(compiled, state, lim):
    """The point-set reader for ``compiled`` from ``state`` (None when ``state`` is terminated)."""
    guarded = getattr(getattr(compiled.grammar, "report", None), "guarded", False)
    if compiled.is_regular and not guarded:
        tdfa = compiled.token_dfa
        if state is None:
            q = tdfa.start
        elif isinstance(state, TokenDFAMatcher):
            q = state.state
        elif isinstance(state, Matcher):
            raise TypeError(f"state {state!r} is not a matcher of this regular constraint")
        else:
            q = int(state)
        if q == -2:
            return None
        return _RegularSet(tdfa, np.array([q], np.int64))
    engine = getattr(compiled, "engine", None)
    if engine is not None and not guarded:
        if state is None:
            chart = Chart.start(engine, max_nodes=lim["max_nodes"], max_items=lim["max_items"],
                                max_total_nodes=lim["max_total_nodes"], max_work=lim["max_work"])
        else:
            get = getattr(state, "chart_state", None)
            if get is None or getattr(state, "engine", None) is not engine:
                raise TypeError(f"state {state!r} is not a matcher of this grammar")
            items, set_off, n_sets, front, acc, terminated = get()
            if terminated:
                return None
            chart = Chart(engine, items, set_off, n_sets, front, acc, max_nodes=lim["max_nodes"],
                          max_items=lim["max_items"], max_total_nodes=lim["max_total_nodes"],
                          max_work=lim["max_work"])
        return _GrammarChart(chart, _single_bytes_covered(compiled.vocab))
    m = compiled.matcher() if state is None else state.fork()
    if m.is_terminated():
        return None
    return _Forks(m, lim["max_configs"])


class _RegularSet:
    """The DFA states the canvas may be in (a sorted array)."""

    def __init__(self, tdfa, states):
        self.tdfa = tdfa
        self.states = states

    def alive(self):
        return self.states.shape[0] > 0

    def accepting(self):
        return any(self.tdfa.is_accepting(int(q)) for q in self.states.tolist())

    def free_tail(self):
        return True  # token-dead states are pruned: a live state takes a token or EOS

    def fits(self, k):
        return False  # (the state sets walk the remaining holes exactly, and cheaply)

    def fits_decides(self):
        return False

    def step_token(self, t):
        nxt = {self.tdfa.next_state(int(q), t) for q in self.states.tolist()}
        nxt.discard(-1)
        if not nxt:
            return False
        self.states = np.array(sorted(nxt), np.int64)
        return True

    def step_hole(self, allow=None):
        if allow is not None:
            parts = []
            for q in self.states.tolist():
                toks, nexts = self.tdfa.row(int(q))
                ok = (nexts >= 0) & (toks < allow.shape[0])
                ok[ok] = allow[toks[ok]] > 0
                parts.append(nexts[ok].astype(np.int64))
        else:
            parts = [successors(self.tdfa, int(q)) for q in self.states.tolist()]
        nxt = np.unique(np.concatenate(parts)) if parts else np.zeros(0, np.int64)
        if nxt.shape[0] == 0:
            return False
        self.states = nxt
        return True


def successors(tdfa, state: int) -> np.ndarray:
    """The distinct states the normal tokens allowed in ``state`` lead to (sorted, cached)."""
    key = (tdfa, state)
    hit = _SUCC.get(key)
    if hit is None:
        _, nexts = tdfa.row(state)
        hit = np.unique(nexts[nexts >= 0]).astype(np.int64)
        hit.flags.writeable = False
        _SUCC.put(key, hit)
    return hit


def _single_bytes_covered(vocab) -> bool:
    """Every byte value is a normal single-byte token (then a live grammar point always has a token)."""
    key = vocab.fingerprint
    hit = _BYTES_COVERED.get(key)
    if hit is None:
        covered = np.zeros(256, bool)
        covered[vocab.token_data[vocab.token_offsets[_single_byte_tokens(vocab)]]] = True
        hit = bool(covered.all())
        _BYTES_COVERED.put(key, hit)
    return hit


class _GrammarChart:
    """The grammar engine's chart over the lattice of fillings (:class:`~.lattice.Chart`)."""

    def __init__(self, chart: Chart, bytes_covered: bool):
        self.chart = chart
        self.vocab = chart.engine.vocab
        self.bytes_covered = bytes_covered

    def alive(self):
        return self.chart.alive

    def accepting(self):
        return self.chart.acc

    def free_tail(self):
        return self.bytes_covered

    def fits(self, k):
        """Some sentence follows within ``k`` tokens (a sufficient test: the shortest completion
        in bytes, one single-byte token each)."""
        return self.bytes_covered and self.chart.min_bytes() <= k

    def fits_decides(self):
        return self.bytes_covered

    def step_token(self, t):
        v = self.vocab
        if not 0 <= t < v.logits_width or not v.is_normal[t]:
            return False
        return self.chart.step_bytes(v.token_data[v.token_offsets[t]:v.token_offsets[t + 1]])

    def step_hole(self, allow=None):
        return self.chart.step_hole(allow)


class _Forks:
    """A set of matcher forks, one per distinct accepted token sequence (no state merging:
    the generic fallback for matchers outside the two exact engines)."""

    def __init__(self, matcher, max_configs: int):
        self.ms = [matcher]
        self.max_configs = max_configs
        self.eos = set(int(e) for e in matcher.vocab.eos_ids)

    def alive(self):
        return bool(self.ms)

    def accepting(self):
        return any(m.is_accepting() for m in self.ms)

    def free_tail(self):
        return False

    def fits(self, k):
        return False

    def fits_decides(self):
        return False

    def step_token(self, t):
        self.ms = [m for m in self.ms if m.advance(t)]
        return bool(self.ms)

    def step_hole(self, allow=None):
        out = []
        for m in self.ms:
            words = np.asarray(m.mask_words(), np.uint32)
            bits = np.unpackbits(words.view(np.uint8), bitorder="little")
            for t in np.flatnonzero(bits).tolist():
                if t in self.eos or (allow is not None and (t >= allow.shape[0] or not allow[t])):
                    continue
                f = m.fork()
                if f.advance(t):
                    out.append(f)
                    if len(out) > self.max_configs:
                        raise LimitExceeded(f"more than {self.max_configs} partial fillings to follow",
                                            "max_configs", self.max_configs)
        self.ms = out
        return bool(out)


"""Vocabulary slices: precomputed masks for states that loop on a whole character set.

A *slice* is the set of normal tokens whose bytes are whole UTF-8 characters from one character
set X, with its bitmask precomputed once per vocabulary and a trie of the remaining tokens.  A
state that returns to itself on every character of a large X (inside a quoted string, roughly
120k of Llama-3's 128k tokens are allowed and all lead back to it) would cost a walk of the
whole trie (about 2 ms on first visit); when it maps every character of X back to itself
(checked exactly on the byte DFA: a product walk of the state with the UTF-8 automaton of X),
its mask is the slice's bits OR a walk of the much smaller remaining trie -- the same set,
exactly, at a tenth of the cost.  The idea is llguidance's "slicer".

Which slices exist is not decided here: whoever compiles hands a :class:`Slicing` (a list of
:class:`SliceDef`, each a character set, plus an optional lexeme superset for the grammar
engine's free lexer) to :class:`~structgen.index.token_dfa.TokenDFA` and to the grammar engine;
the JSON front end configures one (:mod:`structgen.frontends.json_schema.slicing`), the compiler
a default.  Results are cached per (vocabulary, character set).

:class:`CharRuns` is the grammar engine's form of a slice: the same tokens indexed by character
count, for lexer states that count characters of X (a string with a maximum length).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numba import njit

from ..automaton import ir
from ..automaton.build import build_dfa
from ..kernels.bitmask import bitmask_words, set_bits
from ..vocab.trie import TokenTrie


@dataclass(frozen=True)
class SliceDef:
    """One slice: the tokens made of whole characters of ``charset``.  Kept for a vocabulary only
    when it holds at least ``min_share`` of the normal tokens (a small slice does not pay off)."""

    charset: ir.CharSet
    min_share: float = 0.25
    name: str = ""


@dataclass(frozen=True)
class Slicing:
    """The vocabulary slices a compilation may use (tried in order; the first is also the grammar
    engine's run character set, see :class:`CharRuns`).  They change no mask, only how fast it
    is computed."""

    slices: tuple = ()


NO_SLICING = Slicing()

_SLICES: dict = {}


@njit(cache=True, nogil=True)
def _tokens_in_charset(token_data, token_offsets, usable, los, his, out):
    """out[t] = token t is usable and its bytes are whole UTF-8 chars, each in one
    of the ranges [los[k], his[k]] (sorted, disjoint)."""
    n = out.shape[0]
    for t in range(n):
        out[t] = False
        if not usable[t]:
            continue
        p = token_offsets[t]
        end = token_offsets[t + 1]
        ok = p < end
        while p < end and ok:
            b = token_data[p]
            if b < 0x80:
                cp = b
                k = 0
            elif b >= 0xC2 and b < 0xE0:
                cp = b & 0x1F
                k = 1
            elif b >= 0xE0 and b < 0xF0:
                cp = b & 0x0F
                k = 2
            elif b >= 0xF0 and b < 0xF5:
                cp = b & 0x07
                k = 3
            else:
                ok = False
                break
            if p + k >= end:
                ok = False
                break
            for j in range(1, k + 1):
                c = token_data[p + j]
                if (c & 0xC0) != 0x80:
                    ok = False
                    break
                cp = (cp << 6) | (c & 0x3F)
            if not ok:
                break
            # reject overlong and surrogate encodings
            if (k == 2 and cp < 0x800) or (k == 3 and (cp < 0x10000 or cp > 0x10FFFF)) or (0xD800 <= cp <= 0xDFFF):
                ok = False
                break
            lo, hi = 0, los.shape[0] - 1
            inside = False
            while lo <= hi:
                mid = (lo + hi) // 2
                if cp < los[mid]:
                    hi = mid - 1
                elif cp > his[mid]:
                    lo = mid + 1
                else:
                    inside = True
                    break
            if not inside:
                ok = False
                break
            p += k + 1
        out[t] = ok


@njit(cache=True, nogil=True)
def loops_on_charset(trans, byte_class, s, u_trans, u_class, u_accept, u_start):
    """True when every character of the char automaton ``u`` (one character,
    its accepting states final) leads the DFA from ``s`` back to ``s``."""
    cap = 4096
    pd = np.empty(cap, dtype=np.int32)
    pu = np.empty(cap, dtype=np.int32)
    pd[0] = s
    pu[0] = u_start
    n = 1
    head = 0
    while head < n:
        ds = pd[head]
        us = pu[head]
        head += 1
        for b in range(256):
            un = u_trans[us, u_class[b]]
            if un < 0:
                continue
            dn = trans[ds, byte_class[b]]
            if dn < 0:
                return False
            if u_accept[un]:
                if dn != s:
                    return False
                continue
            seen = False
            for q in range(n):
                if pd[q] == dn and pu[q] == un:
                    seen = True
                    break
            if not seen:
                if n == cap:
                    return False
                pd[n] = dn
                pu[n] = un
                n += 1
    return True


class VocabSlice:
    """The tokens of ``vocab`` made of whole characters of ``charset`` (see module doc)."""

    def __init__(self, vocab, charset: ir.CharSet):
        self.charset = charset
        los = np.array([a for a, _ in charset.ranges], dtype=np.int64)
        his = np.array([b for _, b in charset.ranges], dtype=np.int64)
        inside = np.zeros(vocab.logits_width, dtype=np.bool_)
        _tokens_in_charset(vocab.token_data, vocab.token_offsets, vocab.is_normal, los, his, inside)
        self.tokens = np.flatnonzero(inside).astype(np.int32)
        self.bits = set_bits(np.zeros(bitmask_words(vocab.logits_width), dtype=np.uint32), self.tokens)
        self.rest_trie = TokenTrie.build(vocab.token_data, vocab.token_offsets, vocab.is_normal & ~inside)
        u = build_dfa(charset)
        self.u_trans = np.ascontiguousarray(u.transitions, dtype=np.int32)
        self.u_class = np.ascontiguousarray(u.byte_class, dtype=np.int32)
        self.u_accept = np.asarray(u.accepting, dtype=np.bool_)
        self.u_start = int(u.start)

    @property
    def size(self) -> int:
        return int(self.tokens.size)


def vocab_slice(vocab, sdef: SliceDef) -> VocabSlice | None:
    """The slice ``sdef`` of ``vocab`` (cached per vocabulary and character set), or None when
    it holds less than ``sdef.min_share`` of the normal tokens."""
    key = (vocab.fingerprint, sdef.charset)
    if key not in _SLICES:
        _SLICES[key] = VocabSlice(vocab, sdef.charset)
    sl = _SLICES[key]
    return sl if sl.size >= sdef.min_share * int(vocab.is_normal.sum()) else None


def may_loop_on(trans: np.ndarray, byte_class: np.ndarray, charset: ir.CharSet) -> bool:
    """Can some state of the DFA (``trans[state, class]``) map every character of ``charset``
    back to itself?  A necessary condition, cheap (numpy over the states): every ASCII member
    of ``charset`` loops there.  False spares building a slice that no state would use."""
    ascii_ = [b for lo, hi in charset.ranges if lo < 0x80 for b in range(lo, min(hi, 0x7F) + 1)]
    if not ascii_:
        return True
    cand = np.arange(trans.shape[0], dtype=trans.dtype)
    for c in np.unique(np.asarray(byte_class)[ascii_]):  # candidates shrink column by column
        cand = cand[trans[cand, c] == cand]
        if cand.size == 0:
            return False
    return True


@njit(cache=True, nogil=True)
def _char_counts(token_data, token_offsets, tokens, out):
    """out[t] = number of UTF-8 characters of token t (for the listed tokens)."""
    for i in range(tokens.shape[0]):
        t = tokens[i]
        n = 0
        for p in range(token_offsets[t], token_offsets[t + 1]):
            if (token_data[p] & 0xC0) != 0x80:
                n += 1
        out[t] = n


class CharRuns:
    """The tokens of ``vocab`` made of whole characters of ``charset``, indexed for states
    that count such characters (a quoted string with a maximum length): ``cum[k]`` is the bitmask of
    those of at most ``k`` characters, ``impure[node]`` says whether the subtree of a node of
    ``vocab.trie`` holds any other token (a trie walk skips the subtrees that do not), and
    ``u_*`` is the byte automaton of one character of the set."""

    def __init__(self, vocab, charset: ir.CharSet):
        los = np.array([a for a, _ in charset.ranges], dtype=np.int64)
        his = np.array([b for _, b in charset.ranges], dtype=np.int64)
        trie = vocab.trie
        in_trie = np.zeros(vocab.logits_width, dtype=np.bool_)
        in_trie[trie.tok_ids] = True
        inside = np.zeros(vocab.logits_width, dtype=np.bool_)
        _tokens_in_charset(vocab.token_data, vocab.token_offsets, vocab.is_normal & in_trie, los, his, inside)
        tokens = np.flatnonzero(inside).astype(np.int32)
        clen = np.zeros(vocab.logits_width, dtype=np.int64)
        _char_counts(vocab.token_data, vocab.token_offsets, tokens, clen)
        self.max_chars = int(clen.max()) if tokens.size else 0
        words = bitmask_words(vocab.logits_width)
        cum = np.zeros((self.max_chars + 1, words), dtype=np.uint32)
        lens = clen[tokens]
        order = np.argsort(lens, kind="stable")   # the tokens by length, once (not a scan per length)
        at = np.searchsorted(lens[order], np.arange(self.max_chars + 2))
        for k in range(1, self.max_chars + 1):
            cum[k] = cum[k - 1]
            set_bits(cum[k], tokens[order[at[k]:at[k + 1]]])
        self.cum = cum
        # impure[i]: some token in [i, node_end[i]) is not one of them (tok_ids is in DFS order)
        bad = np.concatenate([[0], np.cumsum(~inside[trie.tok_ids])]).astype(np.int64)
        lo = trie.tok_ptr[:-1].astype(np.int64)
        hi = trie.tok_ptr[trie.node_end].astype(np.int64)
        self.impure = (bad[hi] - bad[lo] > 0).astype(np.uint8)
        u = build_dfa(charset)
        self.u_trans = np.ascontiguousarray(np.asarray(u.transitions)[:, np.asarray(u.byte_class)], dtype=np.int32)
        self.u_accept = np.asarray(u.accepting, dtype=np.uint8)
        self.u_start = int(u.start)


_RUNS: dict = {}


def char_runs(vocab, charset: ir.CharSet | None) -> CharRuns:
    """:class:`CharRuns` of ``charset`` over ``vocab`` (cached per vocabulary and set); None:
    an empty table (``cum`` of one row: the mask kernel never takes run tokens from it)."""
    key = (vocab.fingerprint, charset)
    if key not in _RUNS:
        _RUNS[key] = CharRuns(vocab, charset) if charset is not None else _NoRuns(vocab)
    return _RUNS[key]


class _NoRuns:
    """The empty :class:`CharRuns` (same array types, so the kernels compile once)."""

    def __init__(self, vocab):
        self.max_chars = 0
        self.cum = np.zeros((1, bitmask_words(vocab.logits_width)), dtype=np.uint32)
        self.impure = np.zeros(1, dtype=np.uint8)  # read only where run tokens are skipped
        self.u_trans = np.full((1, 256), -1, dtype=np.int32)
        self.u_accept = np.zeros(1, dtype=np.uint8)
        self.u_start = 0

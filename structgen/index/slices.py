"""Vocabulary slices: precomputed masks for states that loop on a whole character set.

Inside a free JSON string a DFA state returns to itself on every character
except ``"``, ``\\`` and control characters, so roughly 120k of Llama-3's 128k
tokens are allowed there and all lead back to the same state.  Walking the
whole trie for such a state costs about 2 ms on first visit.  A *slice* is
the set of normal tokens whose bytes are whole UTF-8 characters from one
character set X, with its bitmask precomputed once per vocabulary and a trie
of the remaining tokens.  For a state that maps every character of X back to
itself (checked exactly on the byte DFA), the mask is the slice's bits OR a
walk of the much smaller remaining trie — the same set, exactly, at a tenth of
the cost.  The idea is llguidance's "slicer"; the exactness test here is a
product walk of the state with the UTF-8 automaton of X.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ..automaton import ir
from ..kernels.bitmask import bitmask_words, set_bits
from ..vocab.trie import TokenTrie

#: Characters a JSON string holds without escaping.
JSON_STRING_CHARS = ir.CharSet.of([(0x20, 0x21), (0x23, 0x5B), (0x5D, 0xD7FF), (0xE000, 0x10FFFF)])

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
        from ..automaton.build import build_dfa

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


def json_string_slice(vocab) -> VocabSlice | None:
    """The JSON-string-body slice of ``vocab`` (cached per vocabulary), or None when
    it is too small to pay off."""
    key = vocab.fingerprint
    if key not in _SLICES:
        sl = VocabSlice(vocab, JSON_STRING_CHARS)
        _SLICES[key] = sl if sl.size * 4 >= int(vocab.is_normal.sum()) else None
    return _SLICES[key]


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
    that count such characters (a JSON string with ``maxLength``): ``cum[k]`` is the bitmask of
    those of at most ``k`` characters, ``impure[node]`` says whether the subtree of a node of
    ``vocab.trie`` holds any other token (a trie walk skips the subtrees that do not), and
    ``u_*`` is the byte automaton of one character of the set."""

    def __init__(self, vocab, charset: ir.CharSet):
        from ..automaton.build import build_dfa

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
        for k in range(1, self.max_chars + 1):
            cum[k] = cum[k - 1]
            set_bits(cum[k], tokens[clen[tokens] == k])
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


def json_string_runs(vocab) -> CharRuns:
    """:class:`CharRuns` of the characters a JSON string holds unescaped (cached per vocabulary)."""
    key = vocab.fingerprint
    if key not in _RUNS:
        _RUNS[key] = CharRuns(vocab, JSON_STRING_CHARS)
    return _RUNS[key]

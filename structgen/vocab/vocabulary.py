"""The vocabulary: token id -> the exact bytes the token stands for, plus EOS and special ids.

Contract (other modules code against these names):

* ``size`` = len(tokenizer), ``logits_width`` >= size (the model's logits rows; Qwen has
  151,936 rows for 151,665 tokens); ids in ``[size, logits_width)`` have no bytes.
* ``token_data`` uint8 (all bytes concatenated) and ``token_offsets`` int64[logits_width+1]:
  token i is ``token_data[token_offsets[i]:token_offsets[i+1]]``; ``token_lengths`` int32.
* Special tokens (BOS, PAD, UNK, ``<|...|>`` control tokens, ``<think>``...) and EOS have
  **empty** bytes here: a constraint can never produce them; their text is in
  ``special_tokens`` for display.  ``special_ids`` excludes EOS, ``eos_ids`` is separate.
* ``is_normal[i]`` <=> token i has non-empty bytes and is neither special nor EOS.

How the bytes are found (from the backend's decoder/model, never from a class name):

* byte-level BPE (decoder ``ByteLevel``: GPT-2, Llama-3, Qwen): invert GPT-2's byte<->unicode
  alphabet; a character outside it is an error.
* SentencePiece style (decoder ``Replace(▁→" ")``/``Metaspace``, ``ByteFallback``: Llama-2,
  Mistral): ``▁`` -> space, pieces ``<0xNN>`` -> that raw byte (with byte fallback).  A slow
  tokenizer with an ``sp_model`` uses the model's own ``is_byte``/``is_control`` flags.
* added tokens: ``special`` ones are special; non-special ones that look like control markers
  (``<...>``, ``<|...|>``, ``[INST]``-style) are special too (Qwen's ``<think>``,
  ``<tool_call>``, ``<|fim_prefix|>`` are ``special: false`` upstream); any other added token
  is normal text and keeps the UTF-8 of its content.

EOS ids (documented choice): the tokenizer's ``eos_token_id`` ∪ the ``eos_token_id`` of a
``generation_config.json`` next to a tokenizer folder ∪ the ``eos_ids=`` argument ∪ (with
``auto_eos=True``) every special added token named one of :data:`EOS_MARKERS`.  So Llama-3
instruct gets ``<|eot_id|>`` 128009 and ``<|end_of_text|>`` 128001, and Qwen gets
``<|im_end|>`` and ``<|endoftext|>`` (as their generation configs say).

Only the special bytes of a SentencePiece tokenizer's *encoding* differ from the text: it
inserts a dummy leading ``▁``, so ``decode(encode("Hi")) == b" Hi"``.  That is the truth about
the tokens, not an artefact; strip it in the caller when you need the text.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from functools import cached_property
from typing import Any, Iterable, Sequence

import numpy as np

from ..errors import VocabularyError
from .trie import TokenTrie

__all__ = ["Vocabulary", "EOS_MARKERS", "SPECIAL_LEAD", "special_token_bytes"]

BYTE_LEVEL = "byte_level"
SENTENCEPIECE = "sentencepiece"
RAW_BYTES = "bytes"

#: Names of special tokens that end generation in common chat models (see the module docstring).
EOS_MARKERS = ("<|endoftext|>", "<|end_of_text|>", "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>")

# Added tokens that are markers rather than text, even when flagged special: false.
_CONTROL_RE = re.compile(r"<\|[^\n]*\|>|<[^<>\s]+>|\[/?[A-Z][A-Z0-9_]*\]")
_BYTE_PIECE_RE = re.compile(r"<0x([0-9A-Fa-f]{2})>")


#: The byte that starts the spelling of a special token in :meth:`Vocabulary.with_special_tokens`:
#: 0xFF never occurs in UTF-8, and every grammar front end speaks UTF-8 text.
SPECIAL_LEAD = 0xFF


def special_token_bytes(token_id: int) -> bytes:
    """The reserved spelling of special token ``token_id`` in :meth:`Vocabulary.with_special_tokens`:
    ``0xFF`` and the id in three bytes, big-endian (the same length for every id, so that no
    spelling is a prefix of another)."""
    i = int(token_id)
    if not 0 <= i < 1 << 24:
        raise VocabularyError(f"special token id {i} is outside [0, 2**24)")
    return bytes((SPECIAL_LEAD, i >> 16, (i >> 8) & 255, i & 255))


def _display(data: bytes) -> str:
    """A raw special token's name: its text when it is UTF-8, else the bytes' repr."""
    try:
        return data.decode("utf-8") if data else repr(data)
    except UnicodeDecodeError:
        return repr(data)


def _byte_level_codepoints() -> np.ndarray:
    """GPT-2's byte -> code point table: printable Latin-1 bytes keep their code point, the
    other 68 bytes get 256, 257, ... in byte order (so every byte is a visible character)."""
    visible = set(range(0x21, 0x7F)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    table = np.empty(256, dtype=np.int64)
    spare = 256
    for b in range(256):
        if b in visible:
            table[b] = b
        else:
            table[b] = spare
            spare += 1
    return table


def _inverse_lut(char_to_byte: dict[str, int] | None = None) -> np.ndarray:
    """Code point -> byte (or -1) lookup table for a byte-level alphabet."""
    if char_to_byte is None:
        cps = _byte_level_codepoints()
        lut = np.full(int(cps.max()) + 1, -1, dtype=np.int16)
        lut[cps] = np.arange(256, dtype=np.int16)
        return lut
    lut = np.full(max(ord(c) for c in char_to_byte) + 1, -1, dtype=np.int16)
    for c, b in char_to_byte.items():
        lut[ord(c)] = b
    return lut


def _utf8_lengths(cps: np.ndarray) -> np.ndarray:
    """Bytes per code point in UTF-8."""
    return 1 + (cps >= 0x80).astype(np.int64) + (cps >= 0x800) + (cps >= 0x10000)


def _pieces_to_bytes(pieces: Sequence[str], kind: str, *, replacement: str = "\u2581",
                     lut: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised conversion of token strings (in id order) to (data uint8, offsets int64).

    byte-level: each character is one byte through ``lut``; sentencepiece: ``replacement`` ->
    space, then UTF-8.  Raises VocabularyError naming the first token that cannot be mapped.
    """
    char_lens = np.fromiter(map(len, pieces), dtype=np.int64, count=len(pieces))
    char_off = np.zeros(len(pieces) + 1, dtype=np.int64)
    np.cumsum(char_lens, out=char_off[1:])
    joined = "".join(pieces)
    if kind == BYTE_LEVEL:
        cps = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32).astype(np.int64)
        assert lut is not None
        inside = cps < lut.shape[0]
        mapped = np.where(inside, lut[np.minimum(cps, lut.shape[0] - 1)], -1)
        bad = np.flatnonzero(mapped < 0)
        if bad.size:
            tid = int(np.searchsorted(char_off, bad[0], side="right") - 1)
            raise VocabularyError(
                f"token {tid} {pieces[tid]!r} has the character {joined[bad[0]]!r}, which is not in the "
                "byte-level (GPT-2) alphabet; this is not a byte-level BPE vocabulary (pass kind=...)")
        return mapped.astype(np.uint8), char_off
    text = joined.replace(replacement, " ") if replacement else joined
    data = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    byte_cum = np.zeros(cps.shape[0] + 1, dtype=np.int64)
    np.cumsum(_utf8_lengths(cps), out=byte_cum[1:])
    return data, byte_cum[char_off]


def _splice(data: np.ndarray, offsets: np.ndarray, overrides: dict[int, bytes]) -> tuple[np.ndarray, np.ndarray]:
    """Replace the bytes of a few tokens (byte pieces, added text, emptied specials)."""
    if not overrides:
        return data, offsets
    n = offsets.shape[0] - 1
    lengths = np.diff(offsets)
    ids = np.fromiter(overrides.keys(), dtype=np.int64, count=len(overrides))
    keep = np.ones(n, dtype=bool)
    keep[ids] = False
    new_lengths = lengths.copy()
    new_lengths[ids] = [len(overrides[int(i)]) for i in ids]
    new_off = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(new_lengths, out=new_off[1:])
    out = np.empty(int(new_off[-1]), dtype=np.uint8)
    # untouched tokens keep their bytes, in id order, at their new positions
    out[np.repeat(keep, new_lengths)] = data[np.repeat(keep, lengths)]
    for i in ids:
        b = overrides[int(i)]
        if b:
            out[new_off[i]:new_off[i] + len(b)] = np.frombuffer(b, dtype=np.uint8)
    return out, new_off


def _walk(spec: dict | None):
    """Yield a tokenizers component spec and, recursively, its Sequence members."""
    if not spec:
        return
    yield spec
    for key in ("decoders", "pretokenizers"):
        for sub in spec.get(key) or ():
            yield from _walk(sub)


def _state(component: Any) -> dict | None:
    if component is None:
        return None
    try:
        return json.loads(component.__getstate__())
    except Exception:  # pragma: no cover - exotic bindings
        return None


def _detect_kind(decoder: dict | None, pre_tokenizer: dict | None) -> tuple[str, str]:
    """(kind, ▁ replacement) from the decoder spec, falling back to the pre-tokenizer."""
    types = [d.get("type") for d in _walk(decoder)]
    if "ByteLevel" in types:
        return BYTE_LEVEL, ""
    for d in _walk(decoder):
        if d.get("type") == "Metaspace":
            return SENTENCEPIECE, d.get("replacement", "\u2581")
        if d.get("type") == "Replace" and d.get("content") == " " and "String" in (d.get("pattern") or {}):
            return SENTENCEPIECE, d["pattern"]["String"]
    if decoder is None or types == ["Sequence"]:
        for d in _walk(pre_tokenizer):
            if d.get("type") == "ByteLevel":
                return BYTE_LEVEL, ""
            if d.get("type") == "Metaspace":
                return SENTENCEPIECE, d.get("replacement", "\u2581")
    raise VocabularyError(
        f"cannot tell how tokens map to bytes from the tokenizer's decoder {types or None} "
        f"(pre-tokenizer {[d.get('type') for d in _walk(pre_tokenizer)] or None}); supported: ByteLevel "
        "(GPT-2 style) and SentencePiece style (Replace ▁→' ' / Metaspace, ByteFallback); pass kind=... to force one")


class _Source:
    """What a tokenizer reader extracts before conversion to bytes."""

    def __init__(self, pieces, added, kind, replacement, byte_fallback, size, hf_special, eos,
                 lut=None, byte_ids=None):
        self.pieces = pieces              # list[str] by id ('' for holes and added tokens)
        self.added = added                # {id: (content, special flag)}
        self.kind = kind
        self.replacement = replacement
        self.byte_fallback = byte_fallback
        self.size = size
        self.hf_special = hf_special      # ids the tokenizer calls special (bos, pad, unk, ...)
        self.eos = eos                    # the tokenizer's own EOS id(s)
        self.lut = lut
        self.byte_ids = byte_ids          # {id: byte} when the reader knows the byte pieces


def _eos_of(tok: Any) -> list[int]:
    e = getattr(tok, "eos_token_id", None)
    if e is None:
        return []
    return [int(x) for x in e] if isinstance(e, (list, tuple)) else [int(e)]


def _read_backend(bt: Any, hf: Any, kind: str | None) -> _Source:
    """Fast tokenizers (transformers' TokenizersBackend / *Fast, or a bare tokenizers.Tokenizer)."""
    vocab = bt.get_vocab(with_added_tokens=False)
    added = {int(i): (a.content, bool(a.special)) for i, a in bt.get_added_tokens_decoder().items()}
    for i, a in (getattr(hf, "added_tokens_decoder", None) or {}).items():
        added.setdefault(int(i), (str(a), bool(getattr(a, "special", False))))
    top = max(max(vocab.values(), default=-1), max(added, default=-1)) + 1
    size = max(len(hf) if hf is not None else bt.get_vocab_size(with_added_tokens=True), top)
    pieces = np.full(size, "", dtype=object)
    pieces[np.fromiter(vocab.values(), dtype=np.int64, count=len(vocab))] = np.array(list(vocab.keys()), dtype=object)
    replacement = "\u2581"
    if kind is None:
        kind, replacement = _detect_kind(_state(bt.decoder), _state(bt.pre_tokenizer))
    dec_types = [d.get("type") for d in _walk(_state(bt.decoder))]
    byte_fallback = bool(getattr(bt.model, "byte_fallback", False)) or "ByteFallback" in dec_types
    hf_special = [int(i) for i in (getattr(hf, "all_special_ids", None) or [])]
    return _Source(pieces.tolist(), added, kind, replacement, byte_fallback, size, hf_special,
                   _eos_of(hf), lut=_inverse_lut() if kind == BYTE_LEVEL else None)


def _read_sentencepiece(tok: Any) -> _Source:
    """Slow tokenizers holding a sentencepiece model: use the model's own piece types."""
    sp = tok.sp_model
    n = sp.get_piece_size()
    pieces, byte_ids, special = [], {}, []
    for i in range(n):
        p = sp.id_to_piece(i)
        if sp.is_byte(i):
            byte_ids[i] = int(_BYTE_PIECE_RE.fullmatch(p).group(1), 16)
            p = ""
        elif sp.is_control(i) or sp.is_unknown(i) or sp.is_unused(i):
            special.append(i)
            p = ""
        pieces.append(p)
    added = {int(i): (str(a), bool(getattr(a, "special", True)))
             for i, a in (getattr(tok, "added_tokens_decoder", None) or {}).items()}
    size = max(len(tok), n, max(added, default=-1) + 1)
    pieces += [""] * (size - n)
    hf_special = special + [int(i) for i in (getattr(tok, "all_special_ids", None) or [])]
    return _Source(pieces, added, SENTENCEPIECE, "\u2581", True, size, hf_special, _eos_of(tok),
                   byte_ids=byte_ids)


def _read_slow_byte_level(tok: Any) -> _Source:
    """Slow GPT-2 style tokenizers (``encoder`` + ``byte_decoder`` dicts)."""
    added = {int(i): (str(a), bool(getattr(a, "special", True)))
             for i, a in (getattr(tok, "added_tokens_decoder", None) or {}).items()}
    size = max(len(tok), max(tok.encoder.values()) + 1, max(added, default=-1) + 1)
    pieces = [""] * size
    for s, i in tok.encoder.items():
        pieces[i] = s
    return _Source(pieces, added, BYTE_LEVEL, "", False, size,
                   [int(i) for i in (getattr(tok, "all_special_ids", None) or [])], _eos_of(tok),
                   lut=_inverse_lut(tok.byte_decoder))


def _generation_config_eos(path: str) -> list[int]:
    f = os.path.join(path, "generation_config.json")
    if not os.path.isfile(f):
        return []
    with open(f, encoding="utf-8") as fh:
        e = json.load(fh).get("eos_token_id")
    if e is None:
        return []
    return [int(x) for x in e] if isinstance(e, list) else [int(e)]


class Vocabulary:
    """Token id -> exact bytes, with EOS/special ids and the model's logits width.

    Build with :meth:`from_tokenizer` (a Hugging Face tokenizer or folder) or :meth:`from_bytes`
    (tiny hand-made vocabularies).  See the module docstring for the contract.
    ``len()`` is deliberately undefined: use ``size`` or ``logits_width``.
    """

    def __init__(self, token_data: np.ndarray, token_offsets: np.ndarray, size: int,
                 eos_ids: Iterable[int], special_ids: Iterable[int] = (), *, logits_width: int | None = None,
                 kind: str = RAW_BYTES, tokenizer: Any = None, special_tokens: dict[int, str] | None = None):
        size = int(size)
        width = size if logits_width is None else int(logits_width)
        if width < size:
            raise VocabularyError(f"logits_width={width} is smaller than the tokenizer's {size} tokens")
        eos = sorted({int(i) for i in eos_ids})
        if not eos:
            raise VocabularyError("the tokenizer has no EOS token and none was given: pass eos_ids=[...]")
        for what, ids in (("EOS", eos), ("special", special_ids)):
            for i in ids:
                if not 0 <= int(i) < size:
                    raise VocabularyError(f"{what} id {int(i)} is outside the vocabulary [0, {size})")
        special = sorted({int(i) for i in special_ids} - set(eos))
        offsets = np.asarray(token_offsets, dtype=np.int64)
        if offsets.shape[0] != size + 1:
            raise VocabularyError(f"token_offsets has {offsets.shape[0]} entries, expected size+1 = {size + 1}")
        # specials and EOS carry no bytes: no constraint can ever spell them
        blank = {i: b"" for i in eos + special if offsets[i + 1] > offsets[i]}
        data, offsets = _splice(np.asarray(token_data, dtype=np.uint8), offsets, blank)
        self.size = size
        self.logits_width = width
        self.kind = kind
        self.tokenizer = tokenizer
        self.token_data = np.ascontiguousarray(data, dtype=np.uint8)
        self.token_offsets = np.concatenate([offsets, np.full(width - size, offsets[-1], dtype=np.int64)])
        self.token_lengths = np.diff(self.token_offsets).astype(np.int32)
        self.eos_ids = np.asarray(eos, dtype=np.int32)
        self.special_ids = np.asarray(special, dtype=np.int32)
        self.is_normal = self.token_lengths > 0
        self.special_tokens = dict(special_tokens or {})
        self.base = self          # the vocabulary this one was derived from (itself here)
        self.spelled_specials = np.zeros(0, np.int32)  # ids spelled by special_token_bytes (none here)

    # ------------------------------------------------------------------ constructors
    @classmethod
    def from_bytes(cls, tokens: Sequence[bytes | None], eos_ids: Iterable[int], special_ids: Iterable[int] = (),
                   logits_width: int | None = None) -> "Vocabulary":
        """A vocabulary from raw token bytes (token i = ``tokens[i]``; None or b"" = no token).

        The bytes given for EOS/special ids are ignored (those tokens carry none).
        """
        chunks = [bytes(t) if t is not None else b"" for t in tokens]
        offsets = np.zeros(len(chunks) + 1, dtype=np.int64)
        np.cumsum([len(c) for c in chunks], out=offsets[1:])
        data = np.frombuffer(b"".join(chunks), dtype=np.uint8)
        eos_ids, special_ids = list(eos_ids), list(special_ids)
        names = {int(i): _display(chunks[int(i)]) for i in eos_ids + special_ids if 0 <= int(i) < len(chunks)}
        return cls(data, offsets, len(chunks), eos_ids, special_ids, logits_width=logits_width,
                   kind=RAW_BYTES, special_tokens=names)

    @classmethod
    def from_tokenizer(cls, tokenizer_or_path: Any, logits_width: int | None = None,
                       eos_ids: Iterable[int] | None = None, *, special_ids: Iterable[int] = (),
                       auto_eos: bool = True, kind: str | None = None) -> "Vocabulary":
        """The vocabulary of a Hugging Face tokenizer (fast or slow), a ``tokenizers.Tokenizer``,
        or a tokenizer folder (loaded offline with AutoTokenizer).

        ``logits_width``: the model's logits rows (default len(tokenizer)); ``eos_ids``: extra
        EOS ids (e.g. a generation config's); ``special_ids``: extra ids never to produce;
        ``auto_eos``: also treat the special tokens named in :data:`EOS_MARKERS` as EOS;
        ``kind``: force "byte_level" or "sentencepiece" when the decoder does not tell.
        """
        extra_eos = [int(i) for i in (eos_ids or ())]
        tok = tokenizer_or_path
        if isinstance(tok, (str, os.PathLike)):
            path = os.fspath(tok)
            os.environ.setdefault("HF_HUB_OFFLINE", "1")
            from transformers import AutoTokenizer  # heavy import: only when asked to load a folder
            try:
                tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
            except Exception as e:
                raise VocabularyError(f"cannot load a tokenizer from {path!r}: {e}") from e
            if os.path.isdir(path):
                extra_eos += _generation_config_eos(path)
        if kind not in (None, BYTE_LEVEL, SENTENCEPIECE):
            raise VocabularyError(f"kind must be None, {BYTE_LEVEL!r} or {SENTENCEPIECE!r}, not {kind!r}")

        from tokenizers import Tokenizer as _RawTokenizer

        if isinstance(tok, _RawTokenizer):
            src = _read_backend(tok, None, kind)
        elif getattr(tok, "backend_tokenizer", None) is not None:
            src = _read_backend(tok.backend_tokenizer, tok, kind)
        elif getattr(tok, "sp_model", None) is not None:
            src = _read_sentencepiece(tok)
        elif hasattr(tok, "byte_decoder") and hasattr(tok, "encoder"):
            src = _read_slow_byte_level(tok)
        else:
            raise VocabularyError(f"unsupported tokenizer object {type(tok).__name__}: expected a Hugging Face "
                                  "tokenizer (fast or slow), a tokenizers.Tokenizer or a folder path")
        return cls._from_source(src, tok, logits_width, extra_eos, special_ids, auto_eos)

    @classmethod
    def _from_source(cls, src: _Source, tok: Any, logits_width, extra_eos, extra_special, auto_eos) -> "Vocabulary":
        pieces = list(src.pieces)
        overrides: dict[int, bytes] = {}
        special = set(src.hf_special) | {int(i) for i in extra_special}
        names: dict[int, str] = {}
        for i, (content, is_special) in src.added.items():
            pieces[i] = ""
            if is_special or _CONTROL_RE.fullmatch(content):
                special.add(i)
                names[i] = content
            else:
                overrides[i] = content.encode("utf-8")  # added plain text: its own UTF-8
        if src.byte_ids is not None:
            overrides.update({i: bytes([b]) for i, b in src.byte_ids.items()})
        elif src.kind == SENTENCEPIECE and src.byte_fallback:
            for i, p in enumerate(pieces):
                if len(p) == 6 and p.startswith("<0x"):
                    m = _BYTE_PIECE_RE.fullmatch(p)
                    if m:
                        overrides[i] = bytes([int(m.group(1), 16)])
                        pieces[i] = ""
        data, offsets = _pieces_to_bytes(pieces, src.kind, replacement=src.replacement, lut=src.lut)
        data, offsets = _splice(data, offsets, overrides)

        eos = set(src.eos) | set(extra_eos)
        if auto_eos:
            by_name = {c: i for i, (c, s) in src.added.items() if i in special}
            eos |= {by_name[m] for m in EOS_MARKERS if m in by_name}
        for i in special | eos:
            if i not in names and 0 <= i < len(src.pieces):
                names[i] = src.added.get(i, (src.pieces[i], True))[0]
        if not eos:
            raise VocabularyError(f"tokenizer {type(tok).__name__} defines no EOS token and none of "
                                  f"{list(EOS_MARKERS)} is among its special tokens: pass eos_ids=[...]")
        return cls(data, offsets, src.size, eos, special, logits_width=logits_width, kind=src.kind,
                   tokenizer=tok, special_tokens=names)

    def with_special_tokens(self) -> "Vocabulary":
        """The same vocabulary in which every special token that is not EOS is spelled
        :func:`special_token_bytes` (``0xFF`` and its id) instead of nothing, and every ordinary
        token holding a byte ``0xFF`` has no bytes (no UTF-8 text holds one).  A grammar that
        names special tokens is compiled against it with those spellings as terminals: a mask
        then allows the special token exactly where the grammar names it, and its text spelled
        out by ordinary tokens stays text.  Ids, EOS, logits width and tokenizer are the same;
        ``base`` is this vocabulary.  Built once per vocabulary."""
        if self.base is not self:
            return self
        return self._with_special_tokens

    @cached_property
    def _with_special_tokens(self) -> "Vocabulary":
        spell = [int(i) for i in self.special_ids if 0 <= int(i) < self.size]
        ff = self.token_data == SPECIAL_LEAD
        lead_tokens = np.unique(np.searchsorted(self.token_offsets, np.flatnonzero(ff), side="right") - 1)
        overrides = {int(t): b"" for t in lead_tokens if int(t) < self.size}
        overrides.update({i: special_token_bytes(i) for i in spell})
        data, offsets = _splice(self.token_data, self.token_offsets[:self.size + 1], overrides)
        v = Vocabulary(data, offsets, self.size, self.eos_ids.tolist(), (), logits_width=self.logits_width,
                       kind=self.kind, tokenizer=self.tokenizer, special_tokens=self.special_tokens)
        v.special_ids = self.special_ids  # still the specials (now spelled), for whoever asks
        v.spelled_specials = np.asarray(spell, np.int32)
        v.base = self
        return v

    def special_token_id(self, text: str):
        """The id of the special (non-EOS) token whose text is ``text``, or None."""
        return self.special_token_ids.get(text)

    @cached_property
    def special_token_ids(self) -> dict:
        """``{text: id}`` of the special tokens that are not EOS (the first id of a repeated text)."""
        out: dict = {}
        eos = set(self.eos_ids.tolist())
        for i in self.special_ids.tolist():
            name = self.special_tokens.get(int(i))
            if name and int(i) not in eos:
                out.setdefault(name, int(i))
        return out

    # ------------------------------------------------------------------ queries
    @cached_property
    def _bytes_list(self) -> list[bytes]:
        raw = self.token_data.tobytes()
        off = self.token_offsets.tolist()
        return [raw[a:b] for a, b in zip(off[:-1], off[1:])]

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes of a token (b"" for specials, EOS and ids without a token)."""
        i = int(token_id)
        if not 0 <= i < self.logits_width:
            raise VocabularyError(f"token id {i} is outside [0, logits_width={self.logits_width})")
        return self._bytes_list[i]

    def decode(self, ids: Iterable[int]) -> bytes:
        """Concatenated bytes of the tokens (specials and EOS contribute nothing)."""
        return b"".join(self.token_bytes(i) for i in ids)

    def encode(self, text: str) -> list[int]:
        """The tokenizer's own encoding of ``text``, without BOS/EOS added.

        SentencePiece tokenizers insert their dummy leading ``▁`` (so the bytes start with a space).
        """
        tok = self.tokenizer
        if tok is None:
            raise VocabularyError("this vocabulary has no tokenizer (built from raw bytes): encode() is unavailable")
        out = tok.encode(text, add_special_tokens=False)
        return list(out.ids) if hasattr(out, "ids") else list(out)

    @cached_property
    def trie(self) -> TokenTrie:
        """The DFS-flattened trie of the normal tokens' bytes (built on first access)."""
        return TokenTrie.build(self.token_data, self.token_offsets, self.is_normal)

    @cached_property
    def fingerprint(self) -> str:
        """A stable hash of the token bytes, EOS, specials, size and width (for caches)."""
        h = hashlib.sha256(b"structgen-vocabulary-v1")
        h.update(np.array([self.size, self.logits_width, len(self.eos_ids), len(self.special_ids)], dtype="<i8").tobytes())
        h.update(self.token_offsets.astype("<i8").tobytes())
        h.update(self.token_data.tobytes())
        h.update(self.eos_ids.astype("<i4").tobytes())
        h.update(self.special_ids.astype("<i4").tobytes())
        return h.hexdigest()

    def __repr__(self) -> str:
        eos = ", ".join(f"{i}:{self.special_tokens.get(int(i), '?')}" for i in self.eos_ids)
        return (f"Vocabulary(kind={self.kind!r}, size={self.size}, logits_width={self.logits_width}, "
                f"normal={int(self.is_normal.sum())}, special={len(self.special_ids)}, eos=[{eos}])")

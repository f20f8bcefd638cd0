"""Vocabulary and TokenTrie against independent oracles, on all six fixture tokenizers.

Oracles used:
* golden-mixed.json ids come from independent reference encoders (tiktoken, sentencepiece,
  mistral-tokenizer-js): our bytes for those ids must spell the text (NFC for Qwen; with the
  SentencePiece dummy leading space for llama2/mistral);
* llama.cpp's vectors (ids from the real upstream HF tokenizers) and the local tokenizer's own
  encode, compared with the UTF-8 of the text and with ``tokenizer.decode(...,
  clean_up_tokenization_spaces=False)``;
* per token: transformers' own GPT-2 byte<->unicode table and the `tokenizers` decoders
  (ByteLevel; Replace+ByteFallback+Fuse for SentencePiece);
* the trie: a brute-force Python dict trie, and sorted-prefix semantics on the full vocabularies.
"""
from __future__ import annotations

import json
import re
import shutil
import unicodedata

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from structgen.errors import VocabularyError
from structgen.vocab import TokenTrie, Vocabulary
from tests.helpers import (ALL_TOKENIZERS, BYTE_LEVEL_TOKENIZERS, SENTENCEPIECE_TOKENIZERS, TOKENIZERS_DIR,
                           load_golden, load_llamacpp_vectors, load_tokenizer, load_vocab)

EXPECTED_EOS = {"gpt2": [50256], "llama3": [128001, 128009], "qwen2.5": [151643, 151645],
                "qwen3": [151643, 151645], "llama2": [2], "mistral": [2]}

EXTRA_TEXTS = ["", " ", "a", "  leading and trailing  ", "\n\n\t\r\n", "x" * 300, " " * 17,
               "ünïcödé 日本語 한국어 🦙👨‍👩‍👧", "\x00\x01\x1f\x7f", '{"a": [1, 2.5e-3, null, true]}',
               "NFD: e\u0301 A\u030a", "def f(x):\n\treturn x  # ok\n"]


def expected_bytes(name: str, text: str) -> bytes:
    """What the tokens of ``text`` must spell: Qwen normalises to NFC; SentencePiece inserts a
    dummy ``▁`` (a space) before non-empty text."""
    if name.startswith("qwen"):
        text = unicodedata.normalize("NFC", text)
    out = text.encode("utf-8")
    if name in SENTENCEPIECE_TOKENIZERS and text:
        out = b" " + out
    return out


def model_vocab(name: str) -> dict[str, int]:
    return load_tokenizer(name).backend_tokenizer.get_vocab(with_added_tokens=False)


# ---------------------------------------------------------------------------- bytes of tokens

@pytest.mark.parametrize("name", ALL_TOKENIZERS)
def test_reference_encoder_ids_spell_the_text(name):
    text, ids = load_golden(name)
    assert load_vocab(name).decode(ids) == expected_bytes(name, text)


@pytest.mark.parametrize("name", ALL_TOKENIZERS)
def test_llamacpp_vectors_spell_the_text(name):
    vectors = load_llamacpp_vectors(name)
    if name != "mistral":
        assert len(vectors) == 46
    v = load_vocab(name)
    for text, ids in vectors:
        assert v.decode(ids) == expected_bytes(name, text), text


@pytest.mark.parametrize("name", ALL_TOKENIZERS)
def test_own_encoding_round_trips(name):
    v, tok = load_vocab(name), load_tokenizer(name)
    texts = [load_golden(name)[0]] + [t for t, _ in load_llamacpp_vectors(name)] + EXTRA_TEXTS
    for text in texts:
        ids = v.encode(text)
        ours = v.decode(ids)
        assert ours == expected_bytes(name, text), text
        # the tokenizer's own decode is exact here (whole texts are valid UTF-8); for
        # SentencePiece its Strip step removes the dummy space again
        theirs = tok.decode(ids, clean_up_tokenization_spaces=False).encode("utf-8")
        assert (b" " + theirs if name in SENTENCEPIECE_TOKENIZERS and text else theirs) == ours, text


@pytest.mark.parametrize("name", BYTE_LEVEL_TOKENIZERS)
def test_each_byte_level_token_independently(name):
    from tokenizers import decoders
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    unicode_to_byte = {u: b for b, u in bytes_to_unicode().items()}
    decoder = decoders.ByteLevel()
    v = load_vocab(name)
    added = set(load_tokenizer(name).added_tokens_decoder)
    checked = 0
    for piece, i in model_vocab(name).items():
        if i in added:
            continue
        ours = v.token_bytes(i)
        assert ours == bytes(unicode_to_byte[c] for c in piece), (i, piece)
        try:
            text = ours.decode("utf-8")
        except UnicodeDecodeError:
            continue
        assert decoder.decode([piece]) == text, (i, piece)
        checked += 1
    assert checked > 0.95 * v.size


@pytest.mark.parametrize("name", SENTENCEPIECE_TOKENIZERS)
def test_each_sentencepiece_token_independently(name):
    from tokenizers import decoders

    # the tokenizer's decoder minus its final Strip (which only drops a text's dummy space)
    decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()])
    v = load_vocab(name)
    n_bytes = 0
    for piece, i in model_vocab(name).items():
        if i in (0, 1, 2):
            continue
        m = re.fullmatch(r"<0x([0-9A-F]{2})>", piece)
        if m:
            assert v.token_bytes(i) == bytes([int(m.group(1), 16)])
            n_bytes += 1
        else:
            assert decoder.decode([piece]).encode("utf-8") == v.token_bytes(i), (i, piece)
    assert n_bytes == 256


@pytest.mark.parametrize("name", ALL_TOKENIZERS)
def test_every_byte_is_a_single_token(name):
    v = load_vocab(name)
    ones = np.flatnonzero(v.is_normal & (v.token_lengths == 1))
    assert set(v.token_data[v.token_offsets[ones]].tolist()) == set(range(256))


# ---------------------------------------------------------------------------- specials, EOS, width

@pytest.mark.parametrize("name", ALL_TOKENIZERS)
def test_specials_and_eos(name):
    v, tok = load_vocab(name), load_tokenizer(name)
    assert v.eos_ids.dtype == np.int32 and v.special_ids.dtype == np.int32
    assert v.eos_ids.tolist() == EXPECTED_EOS[name]
    assert tok.eos_token_id in v.eos_ids.tolist()
    special, eos = set(v.special_ids.tolist()), set(v.eos_ids.tolist())
    assert not special & eos
    # every added token of these six is a control marker (Qwen's <think>, <tool_call>,
    # <|fim_prefix|> are special: false upstream, yet never text for a constraint)
    assert special | eos == set(tok.added_tokens_decoder) | set(tok.all_special_ids)
    for i in special | eos:
        assert not v.is_normal[i] and v.token_bytes(i) == b""
    assert v.is_normal.sum() == v.size - len(special | eos)
    assert v.is_normal.sum() == np.count_nonzero(v.token_lengths)
    assert v.decode([int(v.eos_ids[0]), *v.special_ids[:3].tolist()]) == b""
    if name == "qwen3":
        assert {151657, 151667, 151668} <= special
        assert v.special_tokens[151667] == "<think>"


def test_logits_width_beyond_tokenizer():
    tok = load_tokenizer("qwen3")
    v = load_vocab("qwen3", logits_width=151936)
    assert v.size == len(tok) == 151669 and v.logits_width == 151936
    assert v.token_offsets.shape == (151937,) and v.token_offsets.dtype == np.int64
    assert v.is_normal.shape == v.token_lengths.shape == (151936,)
    assert not v.is_normal[v.size:].any() and not v.token_lengths[v.size:].any()
    assert v.token_bytes(151935) == b"" and v.token_bytes(151668) == b""
    assert v.trie.token_node[v.size:].max() == -1
    for bad in (151936, -1):
        with pytest.raises(VocabularyError):
            v.token_bytes(bad)
    with pytest.raises(VocabularyError, match="logits_width"):
        Vocabulary.from_tokenizer(tok, logits_width=1000)
    narrow = load_vocab("qwen3", logits_width=None)
    assert narrow.logits_width == narrow.size
    assert narrow.fingerprint != v.fingerprint
    assert np.array_equal(narrow.token_data, v.token_data)


def test_missing_eos_is_an_error():
    from tokenizers import Tokenizer

    with pytest.raises(VocabularyError, match="eos_ids"):
        Vocabulary.from_bytes([b"a", b"b"], eos_ids=[])
    with pytest.raises(VocabularyError, match="outside"):
        Vocabulary.from_bytes([b"a", b"b"], eos_ids=[2])
    raw = Tokenizer.from_file(str(TOKENIZERS_DIR / "llama2" / "tokenizer.json"))  # no eos attribute
    with pytest.raises(VocabularyError, match="eos_ids"):
        Vocabulary.from_tokenizer(raw)
    v = Vocabulary.from_tokenizer(raw, eos_ids=[2])
    assert v.fingerprint == load_vocab("llama2").fingerprint
    raw_gpt2 = Tokenizer.from_file(str(TOKENIZERS_DIR / "gpt2" / "tokenizer.json"))
    assert Vocabulary.from_tokenizer(raw_gpt2).eos_ids.tolist() == [50256]  # found by name
    with pytest.raises(VocabularyError, match="eos_ids"):
        Vocabulary.from_tokenizer(raw_gpt2, auto_eos=False)


def test_folder_path_and_generation_config(tmp_path):
    for f in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
        shutil.copy(TOKENIZERS_DIR / "gpt2" / f, tmp_path / f)
    assert Vocabulary.from_tokenizer(str(tmp_path)).fingerprint == load_vocab("gpt2").fingerprint
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [50256, 198]}))
    v = Vocabulary.from_tokenizer(tmp_path, eos_ids=[13])
    assert v.eos_ids.tolist() == [13, 198, 50256]
    assert not v.is_normal[[13, 198]].any() and v.token_bytes(198) == b""
    with pytest.raises(VocabularyError, match="cannot load"):
        Vocabulary.from_tokenizer(tmp_path / "missing")


def test_added_tokens_text_or_control():
    from tokenizers import Tokenizer

    raw = Tokenizer.from_file(str(TOKENIZERS_DIR / "gpt2" / "tokenizer.json"))
    raw.add_tokens(["hello world", "<think>", "[INST]", "<|fim_x|>"])
    raw.add_special_tokens(["plain but special"])
    v = Vocabulary.from_tokenizer(raw, special_ids=[30])
    tid = raw.token_to_id
    assert v.token_bytes(tid("hello world")) == b"hello world" and v.is_normal[tid("hello world")]
    for marker in ("<think>", "[INST]", "<|fim_x|>", "plain but special"):
        assert tid(marker) in v.special_ids and v.token_bytes(tid(marker)) == b""
    assert 30 in v.special_ids and not v.is_normal[30]   # extra special_ids= honoured
    ids = v.encode("x hello world")
    assert tid("hello world") in ids and v.decode(ids) == b"x hello world"


def test_kind_comes_from_the_backend_not_the_class():
    import transformers
    from tokenizers import Tokenizer, decoders

    # transformers 5 rebuilds LlamaTokenizer with a Metaspace pipeline: encodings differ, bytes do
    # not.  (transformers 4.x's LlamaTokenizer is the slow class and needs sentencepiece.)
    if int(transformers.__version__.split(".")[0]) >= 5:
        slow_class = transformers.LlamaTokenizer.from_pretrained(str(TOKENIZERS_DIR / "llama2"))
        assert Vocabulary.from_tokenizer(slow_class).fingerprint == load_vocab("llama2").fingerprint
    raw = Tokenizer.from_file(str(TOKENIZERS_DIR / "mistral" / "tokenizer.json"))
    raw.decoder = decoders.Metaspace()
    assert Vocabulary.from_tokenizer(raw, eos_ids=[2]).fingerprint == load_vocab("mistral").fingerprint
    raw.decoder = decoders.WordPiece()
    with pytest.raises(VocabularyError, match="WordPiece"):
        Vocabulary.from_tokenizer(raw, eos_ids=[2])
    forced = Vocabulary.from_tokenizer(raw, eos_ids=[2], kind="sentencepiece")
    assert forced.fingerprint == load_vocab("mistral").fingerprint
    with pytest.raises(VocabularyError, match="byte-level"):
        Vocabulary.from_tokenizer(raw, eos_ids=[2], kind="byte_level")


def test_slow_sentencepiece_reader_matches_fast():
    fast, tok = load_vocab("llama2"), load_tokenizer("llama2")
    pieces = tok.convert_ids_to_tokens(list(range(32000)))

    class FakeSP:  # the sentencepiece.SentencePieceProcessor calls the reader uses
        def get_piece_size(self): return len(pieces)
        def id_to_piece(self, i): return pieces[i]
        def is_byte(self, i): return re.fullmatch(r"<0x[0-9A-F]{2}>", pieces[i]) is not None
        def is_control(self, i): return i in (1, 2)
        def is_unknown(self, i): return i == 0
        def is_unused(self, i): return False

    class SlowTokenizer:
        sp_model, eos_token_id, all_special_ids, added_tokens_decoder = FakeSP(), 2, [1, 2, 0], {}
        def __len__(self): return 32000

    slow = Vocabulary.from_tokenizer(SlowTokenizer())
    assert slow.kind == "sentencepiece"
    assert slow.fingerprint == fast.fingerprint


def test_slow_byte_level_reader_matches_fast():
    from tokenizers import AddedToken
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    fast = load_vocab("gpt2")

    class SlowTokenizer:
        encoder = model_vocab("gpt2")
        byte_decoder = {u: b for b, u in bytes_to_unicode().items()}   # transformers' own table
        eos_token_id, all_special_ids = 50256, [50256]
        added_tokens_decoder = {50256: AddedToken("<|endoftext|>", special=True)}
        def __len__(self): return 50257

    assert Vocabulary.from_tokenizer(SlowTokenizer()).fingerprint == fast.fingerprint


def test_from_bytes_api():
    v = Vocabulary.from_bytes([b"a", b"ab", None, b"<eos>", b"<s>", b"b"], eos_ids=[3], special_ids=[4],
                              logits_width=8)
    assert v.size == 6 and v.logits_width == 8 and v.tokenizer is None
    assert v.is_normal.tolist() == [True, True, False, False, False, True, False, False]
    assert v.token_offsets.tolist() == [0, 1, 3, 3, 3, 3, 4, 4, 4]
    assert v.decode([1, 3, 4, 0, 7]) == b"aba"
    assert v.eos_ids.tolist() == [3] and v.special_ids.tolist() == [4]
    with pytest.raises(VocabularyError, match="no tokenizer"):
        v.encode("a")
    with pytest.raises(TypeError):
        len(v)
    r = repr(v)
    assert "bytes" in r and "size=6" in r and "logits_width=8" in r and "3:" in r
    same = Vocabulary.from_bytes([b"a", b"ab", b"", b"x", b"y", b"b"], eos_ids=[3], special_ids=[4], logits_width=8)
    assert same.fingerprint == v.fingerprint
    for other in (Vocabulary.from_bytes([b"a", b"ab", b"", b"", b"", b"c"], eos_ids=[3], special_ids=[4], logits_width=8),
                  Vocabulary.from_bytes([b"a", b"ab", b"", b"", b"", b"b"], eos_ids=[3], special_ids=[4], logits_width=9),
                  Vocabulary.from_bytes([b"a", b"ab", b"", b"", b"", b"b"], eos_ids=[4], special_ids=[3], logits_width=8),
                  Vocabulary.from_bytes([b"a", b"ab", b"", b"", b"", b"b"], eos_ids=[3], special_ids=[2, 4], logits_width=8)):
        assert other.fingerprint != v.fingerprint
    assert load_vocab("gpt2").fingerprint == Vocabulary.from_tokenizer(load_tokenizer("gpt2")).fingerprint


# ---------------------------------------------------------------------------- the trie

def dict_trie_rows(tokens: dict[int, bytes]) -> list[tuple]:
    """Brute force: a nested-dict trie walked in preorder, children by ascending byte; one row
    (byte, depth, token ids ending here, subtree size) per node."""
    root: dict = {"kids": {}, "ids": []}
    for i, b in tokens.items():
        node = root
        for c in b:
            node = node["kids"].setdefault(c, {"kids": {}, "ids": []})
        node["ids"].append(i)
    rows: list[tuple] = []

    def visit(node, byte, depth):
        at = len(rows)
        rows.append(None)
        for c in sorted(node["kids"]):
            visit(node["kids"][c], c, depth + 1)
        rows[at] = (byte, depth, tuple(sorted(node["ids"])), len(rows) - at)

    visit(root, 0, 0)
    return rows


def trie_rows(trie: TokenTrie) -> list[tuple]:
    return [(int(trie.node_byte[i]), int(trie.node_depth[i]), tuple(trie.tokens_at(i).tolist()),
             int(trie.node_end[i]) - i) for i in range(trie.n_nodes)]


def normal_tokens(v: Vocabulary, ids) -> dict[int, bytes]:
    return {int(i): v.token_bytes(int(i)) for i in ids if v.is_normal[int(i)]}


def test_trie_equals_dict_trie_on_real_samples():
    llama2 = load_vocab("llama2")
    assert trie_rows(llama2.trie) == dict_trie_rows(normal_tokens(llama2, range(llama2.size)))
    # SentencePiece has duplicate byte strings: <0x20> and ▁ are both b" "
    assert llama2.trie.tokens_at(llama2.trie.token_node[29871]).tolist() == [35, 29871]
    qwen = load_vocab("qwen3")
    sample = np.random.default_rng(0).choice(np.flatnonzero(qwen.is_normal), 4000, replace=False)
    small = Vocabulary.from_bytes([qwen.token_bytes(int(i)) for i in sample] + [b""], eos_ids=[len(sample)])
    assert trie_rows(small.trie) == dict_trie_rows(normal_tokens(small, range(small.size)))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.sampled_from([0, 1, 97, 98, 255]), max_size=5).map(bytes), min_size=1, max_size=40),
       st.data())
def test_trie_equals_dict_trie_on_random_vocabularies(tokens, data):
    eos = data.draw(st.integers(0, len(tokens) - 1))
    special = data.draw(st.lists(st.integers(0, len(tokens) - 1), max_size=3))
    v = Vocabulary.from_bytes(tokens, eos_ids=[eos], special_ids=special, logits_width=len(tokens) + 2)
    trie = v.trie
    assert trie_rows(trie) == dict_trie_rows(normal_tokens(v, range(v.size)))
    assert trie.tok_ptr.shape == (trie.n_nodes + 1,) and trie.tok_ptr[-1] == trie.tok_ids.shape[0]
    for t in range(v.logits_width):
        node = int(trie.token_node[t])
        assert (node >= 0) == bool(v.is_normal[t])
        if node >= 0:
            assert t in trie.tokens_at(node)


@pytest.mark.parametrize("name", ALL_TOKENIZERS)
def test_trie_semantics_on_full_vocabulary(name):
    v = load_vocab(name)
    trie = v.trie
    assert v.trie is trie  # cached
    n = trie.n_nodes
    for arr, dtype in ((trie.node_byte, np.uint8), (trie.node_depth, np.int32), (trie.node_end, np.int32),
                       (trie.tok_ptr, np.int32), (trie.tok_ids, np.int32)):
        assert arr.dtype == dtype
    assert sorted(trie.tok_ids.tolist()) == np.flatnonzero(v.is_normal).tolist()
    assert trie.max_depth == int(v.token_lengths.max()) == int(trie.node_depth.max())
    # rebuild each node's path from the preorder: its parent is the latest node one level up
    depth, byte = trie.node_depth.tolist(), trie.node_byte.tolist()
    paths, stack = [b""], [b""]
    for i in range(1, n):
        del stack[depth[i]:]
        stack.append(stack[-1] + bytes([byte[i]]))
        paths.append(stack[-1])
    # preorder with ascending children <=> paths strictly increasing; nodes = all token prefixes
    assert all(a < b for a, b in zip(paths, paths[1:]))
    lengths = v.token_lengths.tolist()
    prefixes = {b[:k] for t in np.flatnonzero(v.is_normal).tolist() for b in [v.token_bytes(t)]
                for k in range(1, lengths[t] + 1)}
    assert len(prefixes) == n - 1 and prefixes.issuperset(paths[1:])
    for t in np.flatnonzero(v.is_normal).tolist():
        assert paths[trie.token_node[t]] == v.token_bytes(t)
    # the skip pointer: [i, node_end[i]) is exactly the nodes whose path extends path i
    end = trie.node_end.tolist()
    for i in range(n):
        e = end[i]
        assert e > i and paths[e - 1].startswith(paths[i])
        assert e == n or not paths[e].startswith(paths[i])

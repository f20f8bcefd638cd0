"""Matcher contract: advance/rollback/fork/validate/forced_tokens, batched
bitmasks, apply_bitmask_, and the device-resident TokenDFA."""
import numpy as np
import pytest
import torch

import structgen as sg
from structgen.kernels.bitmask import bitmask_to_ids
from tests.helpers import load_vocab

DATE = r"\d{4}-\d{2}-\d{2}"


@pytest.fixture(scope="module")
def llama3():
    return load_vocab("llama3")


def test_advance_rejects_and_keeps_state(llama3):
    cg = sg.compile(sg.Grammar.from_regex(DATE), llama3)
    m = cg.matcher()
    ids = llama3.encode("2024-01-31")
    bad = llama3.encode("x")[0]
    assert not m.advance(bad)
    assert m.advance_many(ids) == len(ids)
    assert m.is_accepting()
    assert not m.advance(llama3.encode("9")[0])  # too long
    assert m.advance(int(llama3.eos_ids[0])) and m.is_terminated()
    assert not m.advance(int(llama3.eos_ids[0]))
    m.rollback(1)
    assert not m.is_terminated() and m.is_accepting()
    m.rollback(len(ids))
    assert not m.is_accepting()
    with pytest.raises(ValueError):
        m.rollback(1)


def test_rollback_fork_and_validate_agree_with_replay(llama3):
    cg = sg.compile(sg.Grammar.from_regex(r'\{"a": \d+(, "b": "[a-z]*")?\}'), llama3)
    text = '{"a": 12345, "b": "hello"}'
    ids = llama3.encode(text)
    m = cg.matcher()
    assert m.validate(ids) == len(ids)
    assert m.validate(ids + [llama3.encode("!")[0]]) == len(ids)
    rng = np.random.default_rng(0)
    for _ in range(30):
        k = int(rng.integers(0, len(ids) + 1))
        m.reset()
        m.advance_many(ids[:k])
        f = m.fork()
        j = int(rng.integers(0, k + 1))
        m.rollback(j)
        replay = cg.matcher()
        replay.advance_many(ids[:k - j])
        bm = sg.allocate_bitmask(3, llama3.logits_width)
        m.fill_bitmask(bm, 0)
        replay.fill_bitmask(bm, 1)
        assert torch.equal(bm[0], bm[1])
        f.fill_bitmask(bm, 2)
        other = cg.matcher()
        other.advance_many(ids[:k])
        other.fill_bitmask(bm, 1)
        assert torch.equal(bm[1], bm[2])  # the fork was not disturbed by the rollback


def test_forced_tokens_are_canonical_and_back_off(llama3):
    cg = sg.compile(sg.Grammar.from_regex(r'\{"name": "[a-z]+", "age": \d+\}'), llama3)
    m = cg.matcher()
    forced = m.forced_tokens()
    text = llama3.decode(forced)
    assert '{"name": "'.encode().startswith(text) and len(text) > 0
    assert llama3.encode(text.decode()) == forced  # canonical
    assert m.validate(forced) == len(forced)
    # Independent check of the boundary rule with the masks: no allowed token at
    # the position before the last forced token starts with the rest of the
    # forced text and runs past it.
    if forced:
        m2 = cg.matcher()
        m2.advance_many(forced[:-1])
        rest = llama3.token_bytes(forced[-1])
        for t in _allowed(m2, llama3.logits_width):
            tb = llama3.token_bytes(int(t))
            assert not (tb.startswith(rest) and len(tb) > len(rest)), tb


def _allowed(m, width):
    bm = sg.allocate_bitmask(1, width)
    m.fill_bitmask(bm, 0)
    return bitmask_to_ids(bm[0])


def test_forced_tokens_back_off_on_tiny_vocabulary():
    toks = [b"a", b"b", b"c", b"ab", b"abc", b"abcd", b"d", b"x", b"xy", b"y", b"z"]
    vocab = sg.Vocabulary.from_bytes(toks + [b""], eos_ids=[len(toks)])
    ids = {t: i for i, t in enumerate(toks)}
    m = sg.compile(sg.Grammar.from_regex(r"abc(d|x)"), vocab).matcher()
    assert m.forced_tokens() == []  # "abcd" straddles the end of the forced "abc"
    m = sg.compile(sg.Grammar.from_regex(r"abcx(y|z)"), vocab).matcher()
    assert m.forced_tokens() == [ids[b"abc"]]  # "xy" could straddle: stop before "x"
    m = sg.compile(sg.Grammar.from_regex(r"abcxz"), vocab).matcher()
    assert m.forced_tokens() == [ids[b"abc"], ids[b"x"], ids[b"z"]]


def test_no_forced_tokens_when_free(llama3):
    m = sg.compile(sg.Grammar.from_regex(r"[a-z]+"), llama3).matcher()
    assert m.forced_tokens() == []


def test_apply_bitmask_cpu(llama3):
    cg = sg.compile(sg.Grammar.from_regex(r"(yes|no)"), llama3)
    ms = [cg.matcher(), cg.matcher()]
    ms[1].advance(llama3.encode("yes")[0])
    bm = sg.allocate_bitmask(2, llama3.logits_width)
    sg.fill_bitmasks(ms, bm)
    logits = torch.randn(2, llama3.logits_width)
    sg.apply_bitmask_(logits, bm)
    finite0 = torch.isfinite(logits[0]).nonzero().flatten().numpy()
    assert set(finite0.tolist()) == set(bitmask_to_ids(bm[0]).tolist())
    assert set(torch.isfinite(logits[1]).nonzero().flatten().tolist()) == set(int(e) for e in llama3.eos_ids)
    # Wider logits than the mask: the extra columns are disallowed.
    wide = torch.zeros(1, llama3.logits_width + 50)
    sg.apply_bitmask_(wide, bm[:1])
    assert torch.isinf(wide[0, llama3.logits_width:]).all()


def test_device_token_dfa_matches_matcher(llama3):
    cg = sg.compile(sg.Grammar.from_regex(r"(true|false|null|\d{1,3})"), llama3)
    dev = cg.token_dfa.to("cpu")
    rng = np.random.default_rng(3)
    texts = ["true", "false", "null", "12", "999"]
    for text in texts:
        ids = llama3.encode(text) + [int(llama3.eos_ids[0])]
        m = cg.matcher()
        state = torch.tensor([cg.token_dfa.start])
        for t in ids:
            mask_dev = dev.masks(state)
            bm = sg.allocate_bitmask(1, llama3.logits_width)
            m.fill_bitmask(bm, 0)
            assert torch.equal(mask_dev[0], bm[0])
            # Random tokens: step agrees with advance.
            probe = torch.tensor(rng.integers(0, llama3.logits_width, 64).tolist() + [t])
            nxt = dev.step(state.expand(probe.numel()), probe)
            for p, n in zip(probe.tolist(), nxt.tolist()):
                f = m.fork()
                ok = f.advance(p) and not f.is_terminated()
                assert ok == (n >= 0)
                if ok:
                    assert n == f.state
            assert m.advance(t)
            state = dev.step(state, torch.tensor([t]))
        assert state.item() == -1 and m.is_terminated()
        assert (dev.masks(state)[0] != 0).sum() >= 1  # EOS-only row, never all-zero


def test_state_limit_is_reported(llama3):
    with pytest.raises(sg.LimitExceeded) as e:
        sg.compile(sg.Grammar.from_regex(r"(a|b)*a(a|b){16}"), llama3, max_states=500)
    assert "max_states" in str(e.value)


def test_bad_regex_names_position():
    with pytest.raises(sg.Unsupported) as e:
        sg.Grammar.from_regex(r"ab(?:(?!c).)*d")  # a lookahead inside an unbounded repetition
    assert "position 2" in str(e.value)
    with pytest.raises(sg.RegexError) as e:
        sg.Grammar.from_regex(r"ab[c")
    assert e.value.pos == 2
    with pytest.raises(sg.StructgenError):
        sg.Grammar.from_regex(r"(ab")


def test_set_and_clear_bits_touch_exactly_their_ids():
    """set_bits / clear_bits against a bit-by-bit reference on random rows: ids repeated, in one
    word, at word edges, none; lists and arrays."""
    from structgen.kernels.bitmask import clear_bits, set_bits

    rng = np.random.default_rng(3)
    for ids in ([], [0], [31, 32, 63, 64], [127, 127, 5], list(rng.integers(0, 32 * 50, 40))):
        row = rng.integers(0, 2 ** 32, 50, dtype=np.uint64).astype(np.uint32)
        bits = np.unpackbits(row.view(np.uint8), bitorder="little")
        for fn, value in ((set_bits, 1), (clear_bits, 0)):
            got = fn(row.copy(), ids if len(ids) % 2 else np.asarray(ids, np.int64))
            want = bits.copy()
            want[np.asarray(ids, np.int64)] = value
            assert np.array_equal(np.unpackbits(got.view(np.uint8), bitorder="little"), want), (fn, ids)


def test_write_row_into_torch_and_numpy_bitmasks():
    """Rows land in the right place whatever the bitmask: the cached numpy view of a CPU tensor
    follows the tensor (a new tensor, new storage, a strided one); other dtypes go through torch."""
    from structgen.runtime.matcher import write_row

    rng = np.random.default_rng(0)
    rows = [rng.integers(-2 ** 31, 2 ** 31 - 1, 7, dtype=np.int64).astype(np.int32) for _ in range(6)]
    a = torch.zeros((3, 7), dtype=torch.int32)
    write_row(a, 1, rows[0])
    assert np.array_equal(a[1].numpy(), rows[0]) and not a[0].any() and not a[2].any()
    b = torch.zeros((3, 7), dtype=torch.int32)  # another tensor: not the cached view
    write_row(b, 2, rows[1])
    assert np.array_equal(b[2].numpy(), rows[1]) and np.array_equal(a[1].numpy(), rows[0]) and not b[1].any()
    b.set_(torch.zeros((4, 7), dtype=torch.int32))  # same tensor, new storage and shape
    write_row(b, 3, rows[2])
    assert np.array_equal(b[3].numpy(), rows[2]) and not b[:3].any()
    s = torch.zeros((7, 3), dtype=torch.int32).t()  # strided
    write_row(s, 0, rows[3])
    assert np.array_equal(s[0].numpy(), rows[3]) and not s[1:].any()
    n = np.zeros((2, 7), np.int32)
    write_row(n, 1, rows[4])
    assert np.array_equal(n[1], rows[4]) and not n[0].any()


def test_grammar_masks_written_in_place_or_copied():
    """The grammar matcher computes its mask straight into a contiguous bitmask row (numpy, CPU
    tensor) and copies it otherwise (a strided tensor); every word is rewritten, stale bits
    included.  The cached bitmask check still notices a bitmask that changed dtype or shape."""
    from structgen.errors import BitmaskError
    from structgen.vocab import Vocabulary

    vocab = Vocabulary.from_bytes([bytes([b]) for b in range(97, 123)] * 3 + [b""], eos_ids=[78])
    cg = sg.compile(sg.Grammar.from_lark('start: "ab" | "b" NAME\nNAME: /[a-z]+/\n'), vocab, cache=False)
    m = cg.matcher()
    assert m.advance(1)  # "b"
    want = m.mask_words().view(np.int32)
    words = want.shape[0]
    for bm in [np.full((3, words), -1, np.int32), torch.full((3, words), -1, dtype=torch.int32),
               torch.full((words, 3), -1, dtype=torch.int32).t()]:
        m.fill_bitmask(bm, 1)
        got = bm[1].numpy() if isinstance(bm, torch.Tensor) else bm[1]
        assert np.array_equal(got, want), type(bm)
        assert (np.asarray(bm[0]) == -1).all() and (np.asarray(bm[2]) == -1).all()
    n = np.zeros((2, words), np.int32)
    m.fill_bitmask(n, 0)
    n.dtype = np.float32  # the same array, reinterpreted: refused although it passed before
    with pytest.raises(BitmaskError):
        m.fill_bitmask(n, 0)
    t = torch.zeros((2, words), dtype=torch.int32)
    m.fill_bitmask(t, 0)
    t.set_(torch.zeros((2, words + 1), dtype=torch.int32))  # same tensor, another shape
    with pytest.raises(BitmaskError):
        m.fill_bitmask(t, 0)

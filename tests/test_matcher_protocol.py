"""The Matcher protocol (structgen.runtime.protocol) for every matcher kind the compiler returns --
regular (TokenDFAMatcher), grammar engine (CFGMatcher), key-guarded over either, with and without
the liveness check -- checked on a tiny vocabulary against brute force: mask <=> advance on every
prefix, rollback / snapshot / restore / fork / reset / validate round trips, forced text,
advance_bytes = advancing the tokens that spell the same bytes.  Then every decoder path (the AR
loop with fast-forward on and off, token healing, generate(), the transformers LogitsProcessor)
driven through a strict proxy that offers nothing but the protocol: same outputs, all valid."""
from __future__ import annotations

import inspect
import json
import random

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

import structgen as sg
from structgen.decoding.autoregressive import Row, decode
from structgen.integrations.transformers import StructgenLogitsProcessor
from structgen.runtime.key_guard import KeyGuardMatcher
from structgen.runtime.unique_guard import UniqueItemsMatcher
from tests import helpers

PIECES = [bytes([b]) for b in range(256)] + [
    b'{"', b'":', b'": ', b'true', b'false', b', "', b',"', b'"a"', b'"a":', b'[1', b'12', b'ab', b'abc', b'"}',
    b'},', b'"b": ', b'1,', b',[', b'e,', b'"x', b'"c":', b'na', b'"na', b'me"', b'"name":', b'nap', b'],']
EOS = len(PIECES)

LARK = r'''
start: list
list: "[" [item ("," item)*] "]"
item: list | NUM
NUM: /[0-9]{1,2}/
'''
CLOSED = {"type": "object", "properties": {"a": {"type": "boolean"}, "b": {"enum": [1, 2]}, "c": {"type": "boolean"}},
          "required": ["a"], "additionalProperties": False}
UNIQUE = {"type": "object", "properties": {"u": {"type": "array", "maxItems": 4, "uniqueItems": True,
                                                "items": {"anyOf": [{"type": "string", "maxLength": 3},
                                                                    {"type": "integer", "maximum": 99},
                                                                    {"type": "boolean"},
                                                                    {"type": "array", "items": {"const": 1}}]}}},
          "required": ["u"], "additionalProperties": False}
NAMES = {"type": "object", "properties": {"name": {"type": "integer"}, "nap": {"type": "integer"},
                                          "a": {"type": "boolean"}}, "additionalProperties": False}

# kind -> (grammar factory, example value or text)
KINDS = {
    "regular": (lambda: sg.Grammar.from_regex(r'\{"a": (true|false|\d{1,2})(, "b": "[a-c]{0,3}")?\}'),
                '{"a": 12, "b": "ab"}'),
    "cfg": (lambda: sg.Grammar.from_lark(LARK), "[1,[12,[]],3]"),
    "guard-regular": (lambda: sg.Grammar.from_json_schema(CLOSED, engine="dfa", property_order="any"),
                      {"c": True, "a": False, "b": 2}),
    "guard-cfg": (lambda: sg.Grammar.from_json_schema(CLOSED, engine="cfg", property_order="any"),
                  {"b": 1, "a": True}),
    "live-regular": (lambda: sg.Grammar.from_json_schema(NAMES, engine="dfa", property_order="any",
                                                         any_order_limit=1), {"nap": 2, "a": True, "name": 1}),
    "live-cfg": (lambda: sg.Grammar.from_json_schema(NAMES, engine="cfg", property_order="any",
                                                     any_order_limit=1), {"a": False, "name": 12, "nap": 1}),
    "unique-cfg": (lambda: sg.Grammar.from_json_schema(UNIQUE, engine="cfg"), {"u": ["a", 12, [1], True]}),
    "unique-regular": (lambda: sg.Grammar.from_json_schema(UNIQUE, engine="dfa"), {"u": [1, "na", "nap"]}),
    "unique-guard": (lambda: sg.Grammar.from_json_schema(UNIQUE, engine="cfg", property_order="any"),
                     {"u": ["ab", 1, 12]}),
}
KIND_NAMES = list(KINDS)
EXPECTED_TYPE = {"regular": "TokenDFAMatcher", "cfg": "CFGMatcher"}

PROTOCOL = ["advance", "advance_many", "advance_bytes", "rollback", "accepted_tokens", "reset", "fork", "snapshot",
            "restore", "fill_bitmask", "mask_words", "allowed_tokens", "validate", "is_accepting", "is_terminated",
            "forced_bytes", "forced_tokens", "vocab"]


@pytest.fixture(scope="module")
def tiny():
    return sg.Vocabulary.from_bytes(PIECES + [b""], eos_ids=[EOS])


_COMPILED: dict = {}


def compiled(kind, vocab):
    if kind not in _COMPILED:
        _COMPILED[kind] = sg.compile(KINDS[kind][0](), vocab)
    return _COMPILED[kind]


def example_bytes(kind, vocab) -> bytes:
    """The kind's example as the grammar's layout writes it (the first rendering it accepts)."""
    value = KINDS[kind][1]
    renderings = [value] if isinstance(value, str) else [json.dumps(value), json.dumps(value, separators=(",", ":"))]
    for text in renderings:
        m = compiled(kind, vocab).matcher()
        if m.advance_bytes(text.encode()) and m.is_accepting():
            return text.encode()
    raise AssertionError(f"no rendering of {value!r} is accepted by {kind}")


def segment(data: bytes, rng) -> list[int]:
    """A random segmentation of ``data`` into PIECES (every byte is a piece)."""
    return helpers.segment(data, PIECES, rng)


def mask_ids(m, vocab) -> set:
    bm = sg.allocate_bitmask(2, vocab.logits_width)
    bm[1] = 0
    m.fill_bitmask(bm, 1)
    assert bool((bm[0] == -1).all()), "fill_bitmask wrote outside its row"
    return set(sg.bitmask_to_ids(bm[1]).tolist())


def brute(m, vocab) -> set:
    ok = set()
    for t in range(vocab.logits_width):
        before = m.accepted_tokens()
        if m.advance(t):
            assert m.accepted_tokens() == before + 1
            ok.add(t)
            m.rollback(1)
        assert m.accepted_tokens() == before
    return ok


def fingerprint(m, vocab):
    return (frozenset(mask_ids(m, vocab)), m.accepted_tokens(), m.is_accepting(), m.is_terminated())


# ----------------------------------------------------------------------------- the protocol
@pytest.mark.parametrize("kind", KIND_NAMES)
def test_every_protocol_method_is_implemented(kind, tiny):
    m = compiled(kind, tiny).matcher()
    assert isinstance(m, sg.Matcher)
    if kind.startswith("unique"):
        assert isinstance(m, UniqueItemsMatcher)
        m = m.inner
    if kind in EXPECTED_TYPE:
        assert type(m).__name__ == EXPECTED_TYPE[kind]
    elif kind.startswith("unique"):
        assert isinstance(m, KeyGuardMatcher) == (kind == "unique-guard")
    else:
        assert isinstance(m, KeyGuardMatcher)
        assert isinstance(m.inner, sg.Matcher)
        assert bool(m.live_keys) == kind.startswith("live")
        if kind.startswith("live"):
            assert isinstance(m.inner, sg.ByteStateView)
    m = compiled(kind, tiny).matcher()
    assert not getattr(type(m), "__abstractmethods__", frozenset())
    for name in sg.Matcher.__abstractmethods__:  # each abstract method overridden for real
        assert getattr(type(m), name) is not getattr(sg.Matcher, name), name
    for name in PROTOCOL:
        assert hasattr(m, name), name
    if kind in EXPECTED_TYPE:  # the regular and the grammar engine's matchers also offer ByteStateView
        assert isinstance(m, sg.ByteStateView)
    assert m.vocab is tiny


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_mask_equals_advance_on_every_prefix(kind, tiny):
    rng = random.Random(1)
    data = example_bytes(kind, tiny)
    toks = segment(data, rng)
    m = compiled(kind, tiny).matcher()
    for i, t in enumerate(toks + [EOS]):
        allowed = mask_ids(m, tiny)
        assert allowed == brute(m, tiny), (kind, tiny.decode(toks[:i]))
        assert (EOS in allowed) == m.is_accepting()
        assert set(m.allowed_tokens().tolist()) == allowed
        w = m.mask_words()
        assert w.dtype == np.uint32 and w.shape == ((tiny.logits_width + 31) // 32,)
        assert m.advance(t), (kind, i)
        assert m.accepted_tokens() == i + 1
    assert m.is_terminated() and not m.is_accepting()
    assert mask_ids(m, tiny) == {EOS}  # terminated: EOS only, never an empty row
    assert not m.advance(EOS) and not m.advance(toks[0]) and not m.advance_bytes(b"") and not m.advance_bytes(b"1")
    m.rollback(1)
    assert not m.is_terminated() and m.is_accepting()


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_rejected_steps_change_nothing(kind, tiny):
    m = compiled(kind, tiny).matcher()
    toks = segment(example_bytes(kind, tiny), random.Random(2))
    m.advance_many(toks[:3])
    before, snap = fingerprint(m, tiny), m.snapshot()
    for t in sorted(set(range(tiny.logits_width)) - mask_ids(m, tiny))[:40] + [-1, tiny.logits_width, 10 ** 6]:
        assert not m.advance(t)
    assert not m.advance_bytes(b"\x00\xff")
    assert fingerprint(m, tiny) == before and m.snapshot() == snap
    with pytest.raises(ValueError):
        m.rollback(4)
    with pytest.raises(ValueError):
        m.rollback(-1)
    assert fingerprint(m, tiny) == before


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_rollback_snapshot_restore_round_trips(kind, tiny):
    rng = random.Random(3)
    data = example_bytes(kind, tiny)
    toks = segment(data, rng) + [EOS]
    m = compiled(kind, tiny).matcher()
    snaps, prints = [m.snapshot()], [fingerprint(m, tiny)]
    for t in toks:
        assert m.advance(t)
        snaps.append(m.snapshot())
        prints.append(fingerprint(m, tiny))
    n = len(toks)
    assert prints[-1][3]  # terminated at the end
    for _ in range(25):
        op = rng.random()
        if op < 0.35 and m.accepted_tokens():
            k = m.accepted_tokens()
            j = rng.randint(1, k)
            m.rollback(j)
            assert fingerprint(m, tiny) == prints[k - j]
        elif op < 0.6:
            # wander off on another branch (an allowed token other than the example's), then come back
            here = m.accepted_tokens()
            other = sorted(mask_ids(m, tiny) - ({toks[here]} if here < n else set()))
            if other and not m.is_terminated() and m.snapshot() == snaps[here]:
                assert m.advance(rng.choice(other))
                m.fill_bitmask(sg.allocate_bitmask(1, tiny.logits_width), 0)
        x = rng.randint(0, n)
        m.restore(snaps[x])
        assert fingerprint(m, tiny) == prints[x], (kind, x)
        assert m.snapshot() == snaps[x]
        if x:
            m.rollback(1)
            assert fingerprint(m, tiny) == prints[x - 1]
            m.restore(snaps[x])
    # after reset, every snapshot is still valid
    m.reset()
    assert fingerprint(m, tiny) == prints[0]
    for x in (n, 2, 0, n - 1):
        m.restore(snaps[x])
        assert fingerprint(m, tiny) == prints[x]
        # and the history is the restored one: rolling back all of it lands at the start
        m.rollback(x)
        assert fingerprint(m, tiny) == prints[0]
    with pytest.raises(ValueError):
        m.restore(compiled(kind, tiny).matcher().snapshot())  # another lineage


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_fork_is_independent_and_shares_snapshots(kind, tiny):
    toks = segment(example_bytes(kind, tiny), random.Random(4))
    m = compiled(kind, tiny).matcher()
    m.advance_many(toks[:2])
    s2 = m.snapshot()
    p2 = fingerprint(m, tiny)
    f = m.fork()
    assert fingerprint(f, tiny) == p2
    assert f.advance_many(toks[2:]) == len(toks) - 2
    pf = fingerprint(f, tiny)
    assert fingerprint(m, tiny) == p2  # the fork's advances did not touch m
    m.rollback(2)
    m.advance(toks[0])
    assert fingerprint(f, tiny) == pf  # and m's rollback did not touch the fork
    f.rollback(len(toks) - 2)
    assert fingerprint(f, tiny) == p2  # the fork can roll back into the shared history
    f.rollback(2)
    f.restore(s2)  # a snapshot of the original restores on the fork
    assert fingerprint(f, tiny) == p2
    sf = f.snapshot()
    m.restore(sf)
    assert fingerprint(m, tiny) == p2


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_reset(kind, tiny):
    toks = segment(example_bytes(kind, tiny), random.Random(5))
    m = compiled(kind, tiny).matcher()
    fresh = fingerprint(m, tiny)
    m.advance_many(toks + [EOS])
    m.reset()
    assert fingerprint(m, tiny) == fresh and m.accepted_tokens() == 0
    with pytest.raises(ValueError):
        m.rollback(1)
    assert m.advance_many(toks) == len(toks) and m.is_accepting()


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_validate_never_changes_state(kind, tiny):
    rng = random.Random(6)
    toks = segment(example_bytes(kind, tiny), rng)
    m = compiled(kind, tiny).matcher()
    bad = next(t for t in range(256) if t not in mask_ids(m, tiny))
    for k in range(0, len(toks), 2):
        m.reset()
        m.advance_many(toks[:k])
        before, snap = fingerprint(m, tiny), m.snapshot()
        rest = toks[k:]
        for draft, want in ((rest, len(rest)), (rest + [EOS], len(rest) + 1), (rest + [EOS, EOS], len(rest) + 1),
                            ([bad] + rest, None), (rest[:1] + [bad], None)):
            got = m.validate(draft)
            assert m.snapshot() == snap and fingerprint(m, tiny) == before
            ref = m.fork()
            assert got == ref.advance_many(draft)
            if want is not None:
                assert got == want


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_forced_text_is_forced_and_consistent(kind, tiny):
    toks = segment(example_bytes(kind, tiny), random.Random(7))
    m = compiled(kind, tiny).matcher()
    seen = 0
    for k in range(len(toks) + 1):
        fb = m.forced_bytes()
        ft = m.forced_tokens()
        snap = m.snapshot()
        allowed = mask_ids(m, tiny)
        if fb:
            seen += 1
            assert EOS not in allowed
            for t in allowed:  # every allowed token agrees with the forced bytes
                b = tiny.token_bytes(t)
                assert b.startswith(fb) or fb.startswith(b), (kind, b, fb)
            f = m.fork()
            assert f.advance_bytes(fb) and f.accepted_tokens() == m.accepted_tokens() + 1
        spelled = b"".join(tiny.token_bytes(t) for t in ft)
        assert fb.startswith(spelled)
        f = m.fork()
        assert f.advance_many(ft) == len(ft)
        assert m.snapshot() == snap  # neither call moved the matcher
        if k < len(toks):
            assert m.advance(toks[k])
    assert seen, "the example never had forced text"


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_advance_bytes_equals_advancing_the_tokens(kind, tiny):
    rng = random.Random(8)
    data = example_bytes(kind, tiny)
    toks = segment(data, rng)
    ref = compiled(kind, tiny).matcher()
    offsets = np.cumsum([0] + [len(PIECES[t]) for t in toks])
    for k in range(len(toks) + 1):
        m = compiled(kind, tiny).matcher()
        assert m.advance_bytes(data[:offsets[k]])
        assert m.accepted_tokens() == 1  # one step, whatever its length
        assert fingerprint(m, tiny)[0] == fingerprint(ref, tiny)[0] and m.is_accepting() == ref.is_accepting()
        m.rollback(1)
        assert m.accepted_tokens() == 0
        # in random chunks that ignore token boundaries
        cuts = sorted(rng.sample(range(1, len(data)), 3))
        pieces = [data[a:b] for a, b in zip([0] + cuts, cuts + [len(data)])]
        m.reset()
        for p in pieces:
            assert m.advance_bytes(p)
        assert m.accepted_tokens() == len(pieces) and m.is_accepting()
        if k < len(toks):
            assert ref.advance(toks[k])
    m = compiled(kind, tiny).matcher()
    m.advance_bytes(data[:3])
    before = fingerprint(m, tiny)
    assert not m.advance_bytes(data[3:] + b"}]x")  # too long: refused whole
    assert fingerprint(m, tiny) == before


@pytest.mark.parametrize("kind", ["guard-regular", "guard-cfg", "live-regular", "live-cfg"])
def test_restore_across_branches_that_used_other_keys(kind, tiny):
    """Snapshot after one key, roll back, take another key on a new branch (the key pool reuses
    its slots), restore: the used keys are those of the snapshot again."""
    dumps = b'": ' in example_bytes(kind, tiny)
    keys = (b"nap", b"name") if kind.startswith("live") else (b"a", b"c")
    values = {b"nap": b"2", b"name": b"1", b"a": b"true", b"c": b"false"}

    def member(k):
        return b'"' + k + (b'": ' if dumps else b'":') + values[k] + (b", " if dumps else b",")

    m = compiled(kind, tiny).matcher()
    assert m.advance_bytes(b"{") and m.advance_bytes(member(keys[0]))
    snap = m.snapshot()
    ref = compiled(kind, tiny).matcher()
    ref.advance_bytes(b"{")
    ref.advance_bytes(member(keys[0]))
    m.rollback(1)
    assert m.advance_bytes(member(keys[1]))
    m.fill_bitmask(sg.allocate_bitmask(1, tiny.logits_width), 0)
    m.restore(snap)
    assert fingerprint(m, tiny) == fingerprint(ref, tiny)
    assert mask_ids(m, tiny) == brute(m, tiny)
    assert not m.advance_bytes(b'"' + keys[0] + b'"')  # used on this branch
    assert m.advance_bytes(b'"' + keys[1] + b'"')      # used only on the other one


def test_key_guard_uses_only_the_protocol_of_its_inner_matcher(tiny):
    """A guard over strict proxies (nothing but the protocol) masks and advances exactly as the
    guard the compiler builds."""
    rng = random.Random(9)
    for kind in ("guard-regular", "guard-cfg", "live-regular", "live-cfg"):
        cg = compiled(kind, tiny)
        real = cg.matcher()
        proxy = KeyGuardMatcher(StatesProxy(real.inner.fork()), tiny, live_keys=real.live_keys)
        toks = segment(example_bytes(kind, tiny), rng)
        for t in toks + [EOS]:
            assert fingerprint(proxy, tiny) == fingerprint(real, tiny), kind
            assert proxy.forced_tokens() == real.forced_tokens()
            assert proxy.advance(t) and real.advance(t)
        assert proxy.is_terminated()
    with pytest.raises(TypeError):
        KeyGuardMatcher(StrictProxy(compiled("guard-cfg", tiny).matcher().inner), tiny, live_keys=True)


# ----------------------------------------------------------------------------- fill_bitmasks
def test_fill_bitmasks_checks_the_bitmask(tiny):
    ms = [compiled("regular", tiny).matcher(), None, compiled("cfg", tiny).matcher()]
    words = (tiny.logits_width + 31) // 32
    bm = sg.allocate_bitmask(4, tiny.logits_width)
    bm[3] = 7
    sg.fill_bitmasks(ms, bm)
    assert bool((bm[1] == -1).all()) and bool((bm[3] == 7).all())
    for i in (0, 2):
        one = sg.allocate_bitmask(1, tiny.logits_width)
        ms[i].fill_bitmask(one, 0)
        assert torch.equal(one[0], bm[i])
    np_bm = np.zeros((3, words), np.int32)
    sg.fill_bitmasks(ms, np_bm)
    assert np.array_equal(np_bm, bm[:3].numpy())
    bad = [torch.zeros((2, words), dtype=torch.int32), torch.zeros((3, words + 1), dtype=torch.int32),
           torch.zeros((3, words), dtype=torch.int64), np.zeros((3, words), np.uint32), torch.zeros(3 * words)]
    for b in bad:
        with pytest.raises(ValueError, match=rf"int32 bitmask of shape \(>= 3, {words}\)"):
            sg.fill_bitmasks(ms, b)
    with pytest.raises(TypeError):
        sg.fill_bitmasks(ms, [[0] * words] * 3)
    sg.fill_bitmasks([None, None], torch.zeros((2, 5), dtype=torch.int32))  # no matcher: any width
    assert sg.runtime.fill_bitmasks is sg.fill_bitmasks and sg.runtime.Matcher is sg.Matcher


# ----------------------------------------------------------------------------- decoders, protocol only
class StrictProxy(sg.Matcher):
    """A Matcher that forwards the protocol and nothing else (no attribute of its own)."""

    __slots__ = ("_m",)

    def __init__(self, m):
        self._m = m

    @property
    def vocab(self):
        return self._m.vocab

    def advance(self, token):
        return self._m.advance(token)

    def advance_many(self, tokens):
        return self._m.advance_many(tokens)

    def advance_bytes(self, data):
        return self._m.advance_bytes(data)

    def rollback(self, n=1):
        return self._m.rollback(n)

    def accepted_tokens(self):
        return self._m.accepted_tokens()

    def reset(self):
        return self._m.reset()

    def fork(self):
        return type(self)(self._m.fork())

    def snapshot(self):
        return self._m.snapshot()

    def restore(self, snapshot):
        return self._m.restore(snapshot)

    def fill_bitmask(self, bitmask, row=0):
        return self._m.fill_bitmask(bitmask, row)

    def mask_words(self):
        return self._m.mask_words()

    def allowed_tokens(self):
        return self._m.allowed_tokens()

    def validate(self, tokens):
        return self._m.validate(tokens)

    def is_accepting(self):
        return self._m.is_accepting()

    def is_terminated(self):
        return self._m.is_terminated()

    def forced_bytes(self):
        return self._m.forced_bytes()

    def forced_tokens(self, max_back_off=4):
        return self._m.forced_tokens(max_back_off)


class StatesProxy(StrictProxy, sg.ByteStateView):
    __slots__ = ()

    def byte_automaton(self):
        return self._m.byte_automaton()

    def byte_states(self):
        return self._m.byte_states()

    def byte_states_after(self, data):
        return self._m.byte_states_after(data)


def test_strict_proxy_is_strict(tiny):
    p = StrictProxy(compiled("regular", tiny).matcher())
    for name in ("state", "inner", "engine", "_tdfa", "token_dfa", "_history"):
        with pytest.raises(AttributeError):
            getattr(p, name)
    with pytest.raises(AttributeError):
        p.anything = 1
    overridden = {n for n, v in vars(StrictProxy).items() if callable(v) or isinstance(v, property)}
    public = {n for n, _ in inspect.getmembers(sg.Matcher) if not n.startswith("_")}
    assert public <= overridden, public - overridden  # every protocol method forwarded


class ProxyCompiled:
    """What the logits processor needs of a compiled grammar, handing out strict proxies."""

    def __init__(self, cg):
        self.vocab = cg.vocab
        self._cg = cg

    def matcher(self):
        return StrictProxy(self._cg.matcher())


def tiny_llama(vocab_size, seed=0):
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
                      bos_token_id=None, eos_token_id=None, pad_token_id=0)
    return LlamaForCausalLM(cfg).eval()


@pytest.fixture(scope="module")
def model(tiny):
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield tiny_llama(tiny.logits_width)
    torch.set_num_threads(n)


def _replay_ok(kind, vocab, out, heal=b""):
    m = compiled(kind, vocab).matcher()
    if heal:
        assert vocab.token_bytes(out[0]).startswith(heal)
        assert m.advance_bytes(vocab.token_bytes(out[0])[len(heal):])
        out = out[1:]
    assert m.advance_many(out) == len(out), (kind, vocab.decode(out))
    return m


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_ar_loop_through_the_protocol_alone(kind, tiny, model):
    """decode() (fast-forward on/off, greedy and sampled, token healing) gives the same tokens with
    the compiler's matchers and with strict proxies of them, and every output is valid."""
    cg = compiled(kind, tiny)
    heal = example_bytes(kind, tiny)[:1]
    stops = 0
    for ff in (True, False):
        for temp in (0.0, 1.0):
            for h in (b"", heal):
                runs = []
                for wrap in (False, True):
                    rows = [Row([3, 4, 5], StrictProxy(cg.matcher()) if wrap else cg.matcher(), heal=h),
                            Row([6, 7], StrictProxy(cg.matcher()) if wrap else cg.matcher())]
                    gen = torch.Generator().manual_seed(11)
                    decode(model, rows, tiny, max_new_tokens=24, fast_forward=ff, temperature=temp, generator=gen)
                    runs.append([(r.output_ids, r.finish_reason, r.forced, r.healed_prefix_len) for r in rows])
                assert runs[0] == runs[1], (kind, ff, temp, h)
                for (out, reason, forced, _), hh in zip(runs[0], (h, b"")):
                    assert out
                    m = _replay_ok(kind, tiny, out, hh)
                    if reason == "stop":
                        stops += 1
                        assert m.is_accepting()
                    if not ff:
                        assert forced == 0
    assert stops or kind == "cfg"  # bounded constraints finish within the budget


@pytest.mark.parametrize("kind", KIND_NAMES)
def test_logits_processor_through_the_protocol_alone(kind, tiny, model):
    cg = compiled(kind, tiny)
    prompt = torch.tensor([[3, 4, 5], [6, 7, 8]])
    outs = []
    for comp in (cg, ProxyCompiled(cg)):
        for sample in (False, True):
            torch.manual_seed(5)
            proc = StructgenLogitsProcessor(comp)
            out = model.generate(prompt, logits_processor=[proc], max_new_tokens=20, do_sample=sample,
                                 eos_token_id=[EOS], pad_token_id=EOS, attention_mask=torch.ones_like(prompt))
            outs.append(out)
    assert torch.equal(outs[0], outs[2]) and torch.equal(outs[1], outs[3])
    for out in outs[:2]:
        for row in out[:, prompt.shape[1]:].tolist():
            gen = row[:row.index(EOS)] if EOS in row else row
            m = _replay_ok(kind, tiny, gen)
            if EOS in row:
                assert m.is_accepting()


def test_generate_through_the_protocol_alone(monkeypatch):
    """sg.Generator / generate() over a real vocabulary (regex, choices with token healing, a
    key-guarded schema on the grammar engine) with strict proxies: identical results."""
    from tests.helpers import load_tokenizer, load_vocab

    tok, vocab = load_tokenizer("llama3"), load_vocab("llama3")
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        gen = sg.Generator(tiny_llama(vocab.logits_width), tok, vocab=vocab)
        calls = [dict(regex=r"[0-9]{2}-[a-c]{1,3}", max_new_tokens=12),
                 dict(choices=["ly", "s", " peace"], token_healing=True, max_new_tokens=8),
                 dict(grammar=sg.Grammar.from_json_schema(CLOSED, engine="cfg", property_order="any"),
                      max_new_tokens=24)]
        for kw in calls:
            prompt = "Hello world" if kw.get("token_healing") else "Say:"
            for ff in (True, False):
                plain = gen(prompt, fast_forward=ff, **kw)
                orig = sg.CompiledGrammar.matcher
                monkeypatch.setattr(sg.CompiledGrammar, "matcher", lambda self: StrictProxy(orig(self)))
                proxied = gen(prompt, fast_forward=ff, **kw)
                monkeypatch.setattr(sg.CompiledGrammar, "matcher", orig)
                assert proxied.token_ids == plain.token_ids and proxied.text == plain.text, kw
                assert plain.complete, (kw, plain.text)
    finally:
        torch.set_num_threads(n)

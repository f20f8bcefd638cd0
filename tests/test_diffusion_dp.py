"""structgen.diffusion's DPs against brute-force enumeration on tiny vocabularies.

Random regexes over {a, b, c} (every byte of the alphabet is a one-byte token, so "a prefix of the
language" is decided independently by the ``regex`` module's partial matching), vocabularies of
≤ 8 ids (one-byte and multi-byte tokens, EOS, an id with no token), L ≤ 5, random log-probs,
masked positions, ``final`` both ways, a continued ``state``; both backends (numba, torch).

- dingo: the score equals the best valid score found by enumerating every sequence, and the
  returned tokens are valid and reach it; GenerationError exactly when nothing is valid.
- marginals: equal the enumerated ones within 1e-6 (and log_mass the enumerated log-mass).
- sample: ≥ 5,000 draws match the enumerated distribution (chi-square p > 0.01), while two
  controls fail the same test: sampling each position from p_i ignoring the constraint, and
  left-to-right locally masked sampling (valid, but the locally projected distribution).
"""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import regex
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

import structgen as sg
import structgen.diffusion as sgd
from structgen.errors import GenerationError

BACKENDS = ["numba", "torch"]


# ----------------------------------------------------------------------------- the oracle
def regexes():
    atom = st.sampled_from(["a", "b", "c", "[ab]", "[bc]", "(ab)", "(ba)", "[abc]", "[abc]*", "a*", "(b|cc)"])

    def extend(inner):
        return st.one_of(st.lists(inner, min_size=2, max_size=3).map("".join),
                         st.lists(inner, min_size=2, max_size=3).map(lambda xs: "(" + "|".join(xs) + ")"),
                         st.tuples(inner, st.sampled_from(["*", "+", "?", "{1,2}", "{2}"])).map(
                             lambda t: "(" + t[0] + ")" + t[1]))

    return st.recursive(atom, extend, max_leaves=6)


@st.composite
def vocabularies(draw):
    """(pieces, eos id): a, b, c always; up to 3 multi-byte tokens; EOS; maybe a blank id."""
    extra = draw(st.lists(st.text("abc", min_size=2, max_size=3), max_size=3, unique=True))
    pieces = [b"a", b"b", b"c"] + [e.encode() for e in extra]
    if draw(st.booleans()):
        pieces.append(None)                      # an id of the logits with no token
    eos = draw(st.integers(0, len(pieces)))
    pieces.insert(eos, b"")
    return pieces, eos


class Oracle:
    """Validity of every sequence of ``L`` ids and the enumerated distributions."""

    def __init__(self, pattern, pieces, eos, L, final, prefix=b"", after_eos=False):
        self.pieces, self.eos, self.L = pieces, eos, L
        self.V = len(pieces)
        self.real = [t for t in range(self.V) if t == eos or pieces[t]]
        rx = regex.compile(pattern.encode())
        memo = {}

        def ok(seq):
            if after_eos:
                return all(t == eos for t in seq)
            text, ended = prefix, False
            for t in seq:
                if t == eos:
                    ended = True
                elif ended or not pieces[t]:
                    return False
                else:
                    text += pieces[t]
            key = (text, ended)
            if key not in memo:
                if ended or final:
                    memo[key] = rx.fullmatch(text) is not None
                else:
                    memo[key] = rx.fullmatch(text, partial=True) is not None
            return memo[key]

        self.seqs = np.array(list(itertools.product(range(self.V), repeat=L)), dtype=np.int64).reshape(-1, L)
        self.valid = np.array([ok(s) for s in self.seqs], dtype=bool)
        is_real = np.isin(self.seqs, self.real)
        self.real_seq = is_real

    def visible_valid(self, masked):
        """valid[τ] for the visible tokens τ (holes existential over real tokens); τ as tuples."""
        vis = [i for i in range(self.L) if not masked[i]]
        hol = [i for i in range(self.L) if masked[i]]
        good = self.valid & self.real_seq[:, hol].all(axis=1) if hol else self.valid
        out = {}
        for s, g in zip(self.seqs, good):
            key = tuple(s[vis])
            out[key] = out.get(key, False) or bool(g)
        return vis, out

    def weights(self, lp, masked):
        vis, table = self.visible_valid(masked)
        keys = [k for k, g in table.items() if g]
        w = np.array([sum(lp[i, t] for i, t in zip(vis, k)) for k in keys], dtype=np.float64)
        return vis, keys, w


def _lp(rng, L, V, sharp):
    lp = rng.normal(size=(L, V)) * sharp
    lp -= np.log(np.exp(lp).sum(axis=1, keepdims=True))
    if rng.random() < 0.3:
        lp[rng.integers(L), rng.integers(V)] = -np.inf   # an impossible token
    return lp


@st.composite
def cases(draw):
    pattern = draw(regexes())
    pieces, eos = draw(vocabularies())
    L = draw(st.sampled_from([1, 2, 3, 4, 5] if len(pieces) <= 6 else [1, 2, 3, 4]))
    final = draw(st.booleans())
    seed = draw(st.integers(0, 2 ** 31))
    hole_rate = draw(st.sampled_from([0.0, 0.3, 0.6]))
    masked = (np.random.default_rng(seed + 1).random(L) < hole_rate).tolist()
    sharp = draw(st.sampled_from([0.5, 2.0, 5.0]))
    prefix = draw(st.sampled_from([[], [0], [1, 2]]))
    return pattern, pieces, eos, L, final, masked, seed, sharp, prefix


def _setup(case):
    pattern, pieces, eos, L, final, masked, seed, sharp, prefix = case
    vocab = sg.Vocabulary.from_bytes(pieces, eos_ids=[eos])
    cg = sg.compile(sg.Grammar.from_regex(pattern), vocab)
    m = cg.matcher()
    text = b""
    for j in prefix:                       # a prefix of normal tokens the constraint allows
        tid = [t for t in range(len(pieces)) if pieces[t] and t != eos][j % 3]
        if not m.advance(tid):
            break
        text += pieces[tid]
    oracle = Oracle(pattern, pieces, eos, L, final, prefix=text)
    lp = _lp(np.random.default_rng(seed), L, len(pieces), sharp)
    return cg, m, oracle, lp, np.array(masked, dtype=bool), final


def _as(backend, lp):
    return torch.tensor(lp) if backend == "torch" else lp


# derandomize: the same examples every run, so the chi-square tests cannot flake from run to run
SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


# ----------------------------------------------------------------------------- dingo
@pytest.mark.parametrize("backend", BACKENDS)
@SETTINGS
@given(case=cases())
def test_dingo_is_the_enumerated_optimum(backend, case):
    cg, m, oracle, lp, masked, final = _setup(case)
    vis, keys, w = oracle.weights(lp, masked)
    finite = np.isfinite(w)
    if not finite.any():
        with pytest.raises(GenerationError):
            sgd.dingo(_as(backend, lp), cg, masked=masked, state=m, final=final, backend=backend)
        return
    tokens, score = sgd.dingo(_as(backend, lp), cg, masked=masked, state=m, final=final, backend=backend)
    tokens = np.asarray(tokens)
    assert score == pytest.approx(w.max(), abs=1e-9)
    assert all(tokens[i] == -1 for i in range(oracle.L) if masked[i])
    key = tuple(int(tokens[i]) for i in vis)
    _, table = oracle.visible_valid(masked)
    assert table.get(key, False), f"dingo returned an invalid sequence {tokens}"
    assert sum(lp[i, t] for i, t in zip(vis, key)) == pytest.approx(w.max(), abs=1e-9)


def test_dingo_backends_break_ties_alike():
    pieces = [b"a", b"b", b"ab", b"c", b"", b"ba"]
    vocab = sg.Vocabulary.from_bytes(pieces, eos_ids=[4])
    cg = sg.compile(sg.Grammar.from_regex(r"(a|b|c)*"), vocab)
    lp = np.zeros((4, 6))                       # every valid sequence ties
    a, _ = sgd.dingo(lp, cg, backend="numba")
    b, _ = sgd.dingo(torch.tensor(lp), cg, backend="torch")
    assert a.tolist() == b.tolist() == sgd.dingo(lp, cg, backend="numba")[0].tolist()


# ----------------------------------------------------------------------------- marginals
@pytest.mark.parametrize("backend", BACKENDS)
@SETTINGS
@given(case=cases())
def test_marginals_equal_enumeration(backend, case):
    cg, m, oracle, lp, masked, final = _setup(case)
    vis, keys, w = oracle.weights(lp, masked)
    if not np.isfinite(w).any():
        with pytest.raises(GenerationError):
            sgd.marginals(_as(backend, lp), cg, masked=masked, state=m, final=final, backend=backend)
        return
    probs, log_mass = sgd.marginals(_as(backend, lp), cg, masked=masked, state=m, final=final, backend=backend)
    probs = np.asarray(probs)
    mx = w[np.isfinite(w)].max()
    z = np.exp(w - mx)
    assert log_mass == pytest.approx(mx + math.log(z.sum()), abs=1e-9)
    want = np.zeros((oracle.L, oracle.V))
    for k, p in zip(keys, z / z.sum()):
        for i, t in zip(vis, k):
            want[i, t] += p
    np.testing.assert_allclose(probs, want, atol=1e-6, rtol=0)


@SETTINGS
@given(case=cases())
def test_local_masses_equal_enumeration(case):
    """local_log_mass: per position, the mass of the tokens some valid full sequence puts there
    (the free positions, here the masked ones and the others alike, filled by any real token)."""
    cg, m, oracle, lp, masked, final = _setup(case)
    fixed = np.where(masked, 0, -1)                     # masked positions pinned to token 0 instead
    fixed[masked] = [t for t in range(oracle.V) if t == oracle.eos or oracle.pieces[t]][0]
    good = oracle.valid & oracle.real_seq.all(axis=1) & (np.where(fixed >= 0, oracle.seqs == fixed, True)).all(axis=1)
    at = ~masked
    if not good.any():
        return
    got = sgd.local_log_mass(lp, cg, at, fixed=fixed, state=m, final=final)
    for i in np.flatnonzero(at):
        toks = np.unique(oracle.seqs[good, i])
        want = np.logaddexp.reduce(lp[i, toks]) if toks.size else -np.inf
        assert got[i] == pytest.approx(want, abs=1e-9) or (np.isinf(want) and np.isinf(got[i]))
    assert np.isnan(got[masked]).all()


# ----------------------------------------------------------------------------- sample
def _chi2(samples, keys, w, vis):
    """p-value of ``samples`` (visible tuples) against the distribution ∝ exp(w) on ``keys``;
    0.0 when a sample lies outside the support.  Small cells are pooled (expected ≥ 5)."""
    p = np.exp(w - w[np.isfinite(w)].max())
    p /= p.sum()
    index = {k: j for j, k in enumerate(keys)}
    obs = np.zeros(len(keys))
    for s in samples:
        j = index.get(tuple(int(s[i]) for i in vis))
        if j is None or p[j] == 0:
            return 0.0
        obs[j] += 1
    n = len(samples)
    obs, p = obs[p > 0], p[p > 0]
    exp = p * n
    keep = exp >= 5
    o = list(obs[keep]) + ([obs[~keep].sum()] if (~keep).any() else [])
    e = list(exp[keep]) + ([exp[~keep].sum()] if (~keep).any() else [])
    if len(o) < 2:
        return 1.0
    return float(chisquare(o, e).pvalue)


@pytest.mark.parametrize("backend", BACKENDS)
@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(case=cases())
def test_samples_follow_the_constrained_distribution(backend, case):
    cg, m, oracle, lp, masked, final = _setup(case)
    vis, keys, w = oracle.weights(lp, masked)
    if not np.isfinite(w).any():
        with pytest.raises(GenerationError):
            sgd.sample(_as(backend, lp), cg, masked=masked, state=m, final=final, backend=backend)
        return
    pvalues = []
    for seed in (1, 2):  # one fresh retry: a correct sampler fails both at rate 1e-4, a biased one always
        gen = torch.Generator().manual_seed(seed) if backend == "torch" else np.random.default_rng(seed)
        s = np.asarray(sgd.sample(_as(backend, lp), cg, masked=masked, state=m, final=final, num_samples=5000,
                                  generator=gen, backend=backend))
        assert s.shape == (5000, oracle.L)
        assert (s[:, masked] == -1).all()
        pvalues.append(_chi2(s, keys, w, vis))
        if pvalues[-1] > 0.01:
            break
    assert max(pvalues) > 0.01, pvalues


def _biased_case():
    """A constraint that reshapes the distribution a lot: an even number of a's, then EOS."""
    pieces = [b"a", b"b", b"aa", b"", b"ab"]
    pattern = r"((aa|b)*)"
    L = 4
    lp = np.log(np.array([[0.5, 0.1, 0.1, 0.2, 0.1],
                          [0.6, 0.1, 0.1, 0.1, 0.1],
                          [0.1, 0.4, 0.2, 0.2, 0.1],
                          [0.3, 0.1, 0.1, 0.4, 0.1]]))
    vocab = sg.Vocabulary.from_bytes(pieces, eos_ids=[3])
    return sg.compile(sg.Grammar.from_regex(pattern), vocab), Oracle(pattern, pieces, 3, L, True), lp


@pytest.mark.parametrize("backend", BACKENDS)
def test_sample_passes_where_controls_fail(backend):
    cg, oracle, lp = _biased_case()
    masked = np.zeros(oracle.L, bool)
    vis, keys, w = oracle.weights(lp, masked)
    gen = torch.Generator().manual_seed(3) if backend == "torch" else np.random.default_rng(3)
    s = np.asarray(sgd.sample(_as(backend, lp), cg, final=True, num_samples=6000, generator=gen, backend=backend))
    assert _chi2(s, keys, w, vis) > 0.01
    rng = np.random.default_rng(4)
    p = np.exp(lp)
    # control 1: each position from p_i, the constraint ignored
    free = np.stack([rng.choice(oracle.V, size=6000, p=p[i] / p[i].sum()) for i in range(oracle.L)], axis=1)
    assert _chi2(free, keys, w, vis) < 0.01
    # control 2: left to right, each token from p_i masked to the tokens that keep a valid completion
    valid = {tuple(sq) for sq, ok in zip(oracle.seqs, oracle.valid) if ok}
    live = {sq[:k] for sq in valid for k in range(oracle.L + 1)}
    local = np.empty((6000, oracle.L), dtype=np.int64)
    for r in range(6000):
        pre = ()
        for i in range(oracle.L):
            allowed = [t for t in range(oracle.V) if pre + (t,) in live]
            q = p[i, allowed] / p[i, allowed].sum()
            pre = pre + (allowed[rng.choice(len(allowed), p=q)],)
        local[r] = pre
    assert _chi2(local, keys, w, vis) < 0.01


# ----------------------------------------------------------------------------- contract details
def test_eos_pads_the_answer_and_starts_accepting():
    pieces = [b"a", b"b", b""]
    vocab = sg.Vocabulary.from_bytes(pieces, eos_ids=[2])
    cg = sg.compile(sg.Grammar.from_regex(r"ab"), vocab)
    lp = np.log(np.full((4, 3), 1 / 3))
    lp[1, 1] = np.log(0.9)
    tokens, _ = sgd.dingo(lp, cg, final=True)
    assert tokens.tolist() == [0, 1, 2, 2]
    s = sgd.sample(lp, cg, final=True, num_samples=200, generator=0)
    assert (s == np.array([0, 1, 2, 2])).all()
    with pytest.raises(GenerationError, match="no token sequence"):
        sgd.dingo(lp[:1], cg, final=True)   # one position cannot hold "ab"
    done = cg.matcher()
    assert done.advance(0) and done.advance(1) and done.advance(2) and done.is_terminated()
    assert sgd.dingo(lp, cg, state=done, final=True)[0].tolist() == [2, 2, 2, 2]


def test_batched_rows_are_independent_and_fixed_equals_one_hot():
    pieces = [b"a", b"b", b"ab", b"c", b""]
    vocab = sg.Vocabulary.from_bytes(pieces, eos_ids=[4])
    cg = sg.compile(sg.Grammar.from_regex(r"(ab|c)+"), vocab)
    rng = np.random.default_rng(0)
    lp = np.stack([_lp(rng, 5, 5, 2.0) for _ in range(3)])
    lp[lp == -np.inf] = -5.0
    masked = np.array([[0, 0, 1, 0, 0], [0, 0, 0, 0, 0], [1, 0, 0, 0, 1]], bool)
    for backend in BACKENDS:
        tok, score = sgd.dingo(_as(backend, lp), cg, masked=masked, final=True, backend=backend)
        for b in range(3):
            t1, s1 = sgd.dingo(lp[b], cg, masked=masked[b], final=True)
            assert np.asarray(tok[b]).tolist() == t1.tolist() and float(score[b]) == pytest.approx(s1)
        probs, lz = sgd.marginals(_as(backend, lp), cg, masked=masked, final=True, backend=backend)
        for b in range(3):
            p1, l1 = sgd.marginals(lp[b], cg, masked=masked[b], final=True)
            np.testing.assert_allclose(np.asarray(probs[b]), p1, atol=1e-9)
    fixed = np.array([3, -1, -1, -1, -1])
    one_hot = lp[1].copy()
    one_hot[0] = -np.inf
    one_hot[0, 3] = 0.0
    for backend in BACKENDS:
        pa, la = sgd.marginals(_as(backend, lp[1]), cg, fixed=fixed, final=True, backend=backend)
        pb, lb = sgd.marginals(_as(backend, one_hot), cg, final=True, backend=backend)
        np.testing.assert_allclose(np.asarray(pa), np.asarray(pb), atol=1e-9)
        assert la == pytest.approx(lb)


def test_context_free_grammars_and_bad_inputs_raise_structgen_errors():
    vocab = sg.Vocabulary.from_bytes([b"(", b")", b""], eos_ids=[2])
    cfg = sg.compile(sg.Grammar.from_lark('start: "(" start ")" | "()"'), vocab)
    with pytest.raises(sg.Unsupported, match="lookahead"):
        sgd.dingo(np.zeros((2, 3)), cfg)
    reg = sg.compile(sg.Grammar.from_regex(r"\(\)"), vocab)
    with pytest.raises(sg.BitmaskError):
        sgd.dingo(np.zeros((2, 2)), reg)
    with pytest.raises(sg.BitmaskError):
        sgd.dingo(np.zeros(3), reg)
    with pytest.raises(sg.OptionError):
        sgd.sample(np.zeros((2, 3)), reg, num_samples=0)
    with pytest.raises(sg.OptionError):
        sgd.dingo(np.zeros((2, 3)), reg, eos_ids=[0])      # a normal token cannot pad


@SETTINGS
@given(case=cases())
def test_token_classes_match_exact_refinement(case):
    """The hashed token classes equal the state-by-state exact refinement, and every class is
    uniform: in each state all its tokens are allowed or none, with one next state."""
    from structgen.diffusion.transitions import Transitions

    cg, m, oracle, lp, masked, final = _setup(case)
    tdfa = cg.token_dfa
    fast, exact = Transitions(tdfa), Transitions(tdfa, exact_classes=True)
    assert fast.tcls.tolist() == exact.tcls.tolist()
    for s, (toks, nexts) in tdfa.explore().items():
        for c in np.unique(fast.tcls[toks]):
            members = np.flatnonzero(fast.tcls == c)
            assert set(members) <= set(toks.tolist()) and len(set(nexts[np.isin(toks, members)].tolist())) == 1

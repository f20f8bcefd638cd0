"""Diffusion language models under constraints.

    import structgen.diffusion as sgd
    tokens, log_prob = sgd.dingo(log_probs, compiled, masked=None, state=None, final=False)
    samples = sgd.sample(log_probs, compiled, masked=None, state=None, final=False, num_samples=1)
    probs, log_mass = sgd.marginals(log_probs, compiled, masked=None, state=None, final=False)
    ok = sgd.completable(compiled, tokens, mask_token_id=M, state=None, final=False)

DPs over (position, automaton state) on the token transitions of a regular constraint, grouped by
transition class (:mod:`.transitions`), with Numba (:mod:`.kernels`) and torch (:mod:`.torch_dp`)
backends; :mod:`.dp` states the exact contract (holes, EOS padding, ``final``).  :mod:`.sampler` is
a LLaDA / Dream-style masked-diffusion ``generate`` on top of them; :mod:`.processor` keeps
transformers' DiffusionGemma on a constraint from inside its own ``generate``.  :mod:`.completable`
decides exactly whether a canvas with holes can still become a sentence (regular constraints and
grammars, :mod:`.lattice`); :mod:`.lookahead` is the propose / beam / verify engine of
``method="lookahead"`` (every constraint kind, grammars included), registered with the sampler.

May import: ``errors``, ``caching``, ``kernels``, ``vocab``, ``automaton``, ``index``, ``runtime``,
``cfg``, ``frontends``, ``grammar``, ``compiler``, ``constraints``, ``decoding``.
"""
from .dp import dingo, local_log_mass, log_mass, marginals, sample
from .processor import DiffusionLogitsProcessor
from .sampler import BlockStep, generate, register_method
from .transitions import Transitions, transitions_of
from .completable import completable
from .lookahead import Lookahead, LookaheadStats

__all__ = ["dingo", "sample", "marginals", "log_mass", "local_log_mass", "generate", "register_method", "BlockStep",
           "DiffusionLogitsProcessor", "Transitions", "transitions_of", "completable", "Lookahead", "LookaheadStats"]

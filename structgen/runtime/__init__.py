"""Per-sequence cursors over compiled constraints, and the batch helpers around them.

Holds the :class:`Matcher` protocol (:mod:`.protocol`; the contract every decoder and
integration relies on, with :class:`Snapshot` and the small :class:`ByteStateView`
protocol), the regular matcher :class:`TokenDFAMatcher` (:mod:`.matcher`), the history
tree behind rollback/fork/snapshot (:mod:`.history`), :func:`fill_bitmasks` and the row
writers (:mod:`.batch`), the argument checks of token ids and bitmasks (:mod:`.checks`),
forced-text tokenization (:mod:`.tokenize`) and the JSON key guard (:mod:`.key_guard`,
with :mod:`.json_tracker`, :mod:`.key_liveness` and :mod:`.dead_keys`).

May import: ``errors``, ``kernels``, ``vocab``, ``automaton``, ``index`` (and numpy,
numba, torch).  Never ``cfg``, ``frontends``, ``decoding`` or anything above them: the
grammar engine's matcher lives in ``structgen.cfg`` and implements the protocol from there.
"""
from .protocol import ByteStateView, Matcher, Snapshot
from .batch import fill_bitmasks
from .matcher import TokenDFAMatcher

__all__ = ["Matcher", "Snapshot", "ByteStateView", "TokenDFAMatcher", "fill_bitmasks"]

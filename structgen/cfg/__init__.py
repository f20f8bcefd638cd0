"""The grammar engine: context-free grammars (Lark, GBNF, the JSON Schema compiler's
recursive parts) compiled against a vocabulary into exact token masks.

    from structgen.frontends import lark_to_cfg
    from structgen.cfg import compile_cfg
    cg = compile_cfg(lark_to_cfg(text), vocab)
    m = cg.matcher()      # CFGMatcher: advance / rollback / fork / fill_bitmask / ...

Modules: ``grammar`` (the CFG IR the front ends in :mod:`structgen.frontends` emit), ``terminals``
(IR -> DFA), ``earley`` (byte-stepped Earley kernels), ``mask`` (the mask worklist, cache
entries and the kernels' argument records), ``trie_walks`` (walks of the token trie),
``run_budgets`` (states counting run characters), ``cache`` (MaskCache: per-grammar mask parts,
bounded), ``diskcache``
(Lark loading and lexer DFAs pickled per grammar under a user cache dir),
``engine`` (normalisation, tables, CompiledCFG), ``matcher`` (CFGMatcher, the
:class:`~structgen.Matcher` protocol).

May import ``errors``, ``caching``, ``kernels``, ``vocab``, ``automaton``, ``index`` and
``runtime``; never ``frontends`` (the front ends build the :class:`CFG` this package compiles).
"""
from .grammar import CFG
from .engine import CompiledCFG, compile_cfg

__all__ = ["CFG", "CompiledCFG", "compile_cfg"]

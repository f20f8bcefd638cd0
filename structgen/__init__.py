"""structgen: outputs guaranteed to match a regex, a JSON Schema, a Pydantic
model or a grammar, by masking a language model's logits token by token.

    import structgen as sg
    vocab = sg.Vocabulary.from_tokenizer("path/to/tokenizer")
    cg = sg.compile(sg.Grammar.from_regex(r"\\d{4}-\\d{2}-\\d{2}"), vocab)
    m = cg.matcher()
    bm = sg.allocate_bitmask(1, vocab.logits_width)
    m.fill_bitmask(bm, 0); sg.apply_bitmask_(logits, bm)
"""
from .errors import (BitmaskError, EmptyLanguage, EngineError, GenerationError, GrammarError, GrammarNotFound,
                     LimitExceeded, TokenRejected,
                     OptionError, RegexError, SchemaError, StructgenError, TokenError, Unsupported, VocabularyError)
from .vocab import Vocabulary
from .grammar import Grammar
from .cfg.indent import Indenter, python_indenter
from .frontends.json_schema.hygiene import JsonHygiene
from .tags import Tag, ToolCall
from .tools import tool_calls
from .compiler import CompiledGrammar, compile
from .runtime import ByteStateView, Matcher, Snapshot, TokenDFAMatcher, fill_bitmasks
from .runtime.batch import get_num_threads, set_num_threads
from .kernels.bitmask import allocate_bitmask, apply_bitmask_, bitmask_to_ids, unpack_bitmask
from .index.token_dfa import TokenDFA, DeviceTokenDFA
from .index.items import ItemIndex
from .index.catalog import ItemCatalog
from . import grammars
from .caching import cache_info, clear_caches, set_cache_limits
from .decoding.speculative import Speculative
from .decoding.beam import beam_search
from . import diffusion
from .api import GenerationResult, Generator, function, generate

__version__ = "0.1.0"

__all__ = [
    "Vocabulary", "Grammar", "compile", "CompiledGrammar", "Matcher", "Snapshot", "ByteStateView", "TokenDFAMatcher", "TokenDFA",
    "DeviceTokenDFA", "ItemIndex", "allocate_bitmask", "apply_bitmask_", "bitmask_to_ids", "unpack_bitmask",
    "fill_bitmasks", "set_num_threads", "get_num_threads", "StructgenError", "RegexError", "SchemaError",
    "GrammarError", "Unsupported", "LimitExceeded", "VocabularyError", "Speculative", "EmptyLanguage",
    "grammars", "generate", "Generator", "function", "GenerationResult", "GenerationError",
    "beam_search", "clear_caches", "cache_info", "set_cache_limits",
]
__all__ += ["ItemCatalog", "OptionError", "TokenError", "BitmaskError", "GrammarNotFound", "diffusion"]
__all__ += ["Indenter", "python_indenter"]
__all__ += ["JsonHygiene", "Tag", "ToolCall", "tool_calls", "EngineError", "TokenRejected"]

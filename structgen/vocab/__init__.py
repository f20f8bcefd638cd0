"""Token vocabularies: exact token bytes, EOS/special ids, logits width, and the token trie.

:class:`Vocabulary` reads a Hugging Face tokenizer (byte-level BPE, SentencePiece) into flat byte
arrays; :class:`TokenTrie` is its DFS-flattened trie.  May import ``errors``, ``kernels`` and the
tokenizer libraries only.
"""
from .trie import TokenTrie
from .vocabulary import EOS_MARKERS, Vocabulary

__all__ = ["Vocabulary", "TokenTrie", "EOS_MARKERS"]

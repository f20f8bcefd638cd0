"""Token vocabularies: exact token bytes, EOS/special ids, logits width, and the token trie."""
from .trie import TokenTrie
from .vocabulary import EOS_MARKERS, Vocabulary

__all__ = ["Vocabulary", "TokenTrie", "EOS_MARKERS"]

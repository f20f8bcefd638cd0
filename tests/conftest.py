"""Shared pytest fixtures (keep small).  Plain helpers live in tests/helpers.py."""
import os
import tempfile

import pytest

# Keep the tests' on-disk caches (compiled grammars) out of the user's cache folder.
# vLLM imports torch.utils.cpp_extension -> setuptools, whose distutils shim asserts when another test
# module imported the standard library's distutils first; keep the standard one.
os.environ.setdefault("SETUPTOOLS_USE_DISTUTILS", "stdlib")
os.environ.setdefault("STRUCTGEN_CACHE_DIR", tempfile.mkdtemp(prefix="structgen-test-cache-"))

from tests.helpers import ALL_TOKENIZERS, TOKENIZERS_DIR, load_vocab  # noqa: F401  (re-exported)


@pytest.fixture(scope="session")
def vocab():
    """``vocab(name)`` -> the cached Vocabulary of a fixture tokenizer (see tests/helpers.py)."""
    return load_vocab


@pytest.fixture(scope="module")
def one_torch_thread():
    """torch on one thread for a module (2 shared cores: its pool under contention is ~10x slower)."""
    import torch

    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)

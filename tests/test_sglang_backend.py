"""Contract tests of structgen's SGLang backend against SGLang 0.5.23's own classes.

The backend is created through SGLang's registry (what ``create_grammar_backend`` calls for
``--grammar-backend structgen``), constraints go through the base class's dispatcher, cache and
executor (``get_cached_or_future_value``, ``set_cache`` with ``copy()``), and speculative masks are
built by SGLang's own ``generate_token_bitmask`` / ``traverse_tree`` (the depth-first walk of the
draft tree with accept / fill / rollback(1)).  Every step is run side by side with SGLang's own
xgrammar backend on the GPT-2 vocabulary: masks (every tree row), jump-forward strings and the
state after ``jump_and_retokenize`` must agree, and structgen's own matcher masks are the reference.

``sglang.srt.speculative.spec_utils`` itself does not import on a CPU machine (its imports reach
``torchvision``), so the two tree functions are read from the installed wheel's source file and
run unchanged.  In CI (``STRUCTGEN_REQUIRE_ENGINES=1``) a missing SGLang fails instead of skipping.
"""
import ast
import json
import logging
import os
import time
import tomllib
from pathlib import Path
from types import SimpleNamespace as NS
from typing import List, Optional, Tuple

import numpy as np
import pytest

if os.environ.get("STRUCTGEN_REQUIRE_ENGINES") != "1":
    pytest.importorskip("sglang", reason="SGLang is not installed (bash .ci/install_engines)")
    pytest.importorskip("xgrammar")

import sglang  # noqa: E402
import torch  # noqa: E402
import xgrammar as xgr  # noqa: E402
from sglang.srt.constrained.base_grammar_backend import (GRAMMAR_BACKEND_REGISTRY, BaseGrammarObject,  # noqa: E402
                                                         GrammarRow, InvalidGrammarObject)
from sglang.srt.constrained.xgrammar_backend import XGrammarGrammarBackend  # noqa: E402
from transformers import AutoTokenizer  # noqa: E402

import structgen as sg  # noqa: E402
from structgen.integrations import sglang as sgs  # noqa: E402
from structgen.integrations.serving import grammar_for  # noqa: E402
from tests.helpers import TOKENIZERS_DIR, utf8_prefix, xgrammar_departures  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
# No maxLength on strings: xgrammar 0.2.9 writes a length-bounded string as [^"\\]{0,n}, which
# refuses escapes and accepts raw control characters (invalid JSON); structgen does not follow it.
SCHEMA = {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"},
                                           "ok": {"type": "boolean"}}, "required": ["name", "n", "ok"]}
DOC = '{"name": "Ada", "n": 12, "ok": true}'


def engine_function(name: str, namespace: dict):
    """Function ``name`` of sglang/srt/speculative/spec_utils.py, compiled from the wheel's source."""
    path = Path(sglang.__file__).parent / "srt" / "speculative" / "spec_utils.py"
    src = path.read_text()
    node = next(n for n in ast.parse(src).body if isinstance(n, ast.FunctionDef) and n.name == name)
    ns = dict(namespace)
    exec(compile("from __future__ import annotations\n" + ast.get_source_segment(src, node), str(path), "exec"), ns)
    return ns[name]


BASE_NS = {"torch": torch, "Optional": Optional, "List": List, "Tuple": Tuple, "time": time,
           "logger": logging.getLogger("sglang-spec-utils"), "TREE_TRAVERSE_TIME_THRESHOLD": 1}
traverse_tree = engine_function("traverse_tree", BASE_NS)
generate_token_bitmask = engine_function("generate_token_bitmask", dict(BASE_NS, traverse_tree=traverse_tree))


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(str(TOKENIZERS_DIR / "gpt2"), local_files_only=True)


@pytest.fixture(scope="module")
def backends(tokenizer):
    sgs.register()
    eos = {tokenizer.eos_token_id}
    ours = GRAMMAR_BACKEND_REGISTRY["structgen"](NS(), tokenizer, len(tokenizer), eos)
    theirs = XGrammarGrammarBackend(tokenizer, vocab_size=len(tokenizer), model_eos_token_ids=list(eos),
                                    any_whitespace=False)   # ", " and ": ": structgen's default layout
    return ours, theirs


def compiled(backend, key):
    """A grammar object the way SGLang's GrammarManager gets one: a future on a miss, then
    ``set_cache(key, grammar.copy())``; a hit is a ``copy()`` of the cached object."""
    value, hit = backend.get_cached_or_future_value(key, False)
    if not hit:
        value = value.result(timeout=120)
        assert not isinstance(value, InvalidGrammarObject), value.error_message
        backend.set_cache(key, value.copy())
    return value


def rows(mask: torch.Tensor, width: int) -> np.ndarray:
    return np.unpackbits(mask.numpy().view(np.uint8), axis=1, bitorder="little")[:, :width].astype(bool)


def test_registry_and_choices():
    from sglang.srt.arg_groups.choices import GRAMMAR_BACKEND_CHOICES

    sgs.register()
    sgs.register()
    assert GRAMMAR_BACKEND_REGISTRY["structgen"] is sgs.init_backend
    assert GRAMMAR_BACKEND_CHOICES.count("structgen") == 1
    sgs.check_version(sgs.SUPPORTED_SGLANG)
    with pytest.raises(sg.EngineError, match=r"SGLang 0\.5\.24 is installed.*0\.5\.23"):
        sgs.check_version("0.5.24")
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    ep = meta["project"]["entry-points"]["sglang.srt.plugins"]["structgen"]
    assert ep == "structgen.integrations.sglang:register"
    from importlib.metadata import entry_points

    from sglang.srt.plugins import GENERAL_PLUGINS_GROUP

    assert GENERAL_PLUGINS_GROUP == "sglang.srt.plugins"
    found = {e.name: e.value for e in entry_points(group=GENERAL_PLUGINS_GROUP)}
    if os.environ.get("STRUCTGEN_REQUIRE_ENGINES") == "1":   # CI installs this checkout: SGLang must see it
        assert found.get("structgen") == ep


def test_tree_walk_matches_xgrammar(tokenizer, backends):
    """SGLang's speculative tree walk on both backends along a JSON document: every row equal
    (filled rows, and the -1 rows of rejected or post-EOS nodes), structgen's rows equal to its
    own matcher's masks, the grammar's point unchanged by the walk."""
    ours_backend, xgr_backend = backends
    key = ("json", json.dumps(SCHEMA))
    never = tokenizer.convert_tokens_to_ids("\u0101")  # the byte 0x01: never valid in this constraint
    tree_walk(tokenizer, backends, key, DOC, lambda ref, prefix: never, exact=True)


# A Hermes-style tool call: free text, a tagged call with a JSON Schema, free text.
TAGGED = 'Let me look. <tool_call>\n{"name":"Ada","n":12,"ok":true}\n</tool_call> Done.'
HERMES = {"type": "tag", "begin": "<tool_call>\n", "content": {"type": "json_schema", "json_schema": SCHEMA},
          "end": "\n</tool_call>"}
# xgrammar allows JSON whitespace runs of any length inside structural tags; structgen keeps its
# layout ($STRUCTGEN_WHITESPACE) unless the format bounds the runs (max_whitespace_cnt): then both
# read the same language.
TAGS = {
    "format": ({"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<tool_call>"], "tags": [
        dict(HERMES, content=dict(HERMES["content"], max_whitespace_cnt=8))]}}, False),
    "legacy": ({"type": "structural_tag", "triggers": ["<tool_call>"], "at_least_one": False,
                "structures": [{"begin": HERMES["begin"], "schema": SCHEMA, "end": HERMES["end"]}]}, True),
}


@pytest.mark.parametrize("case", sorted(TAGS))
def test_structural_tag_tree_walk(case, tokenizer, backends, monkeypatch):
    """dispatch_structural_tag: the tree walk along free text, a tagged call and free text; rows
    equal structgen's own matcher's.  xgrammar's rows differ only as known (see
    ``xgrammar_departures``: its free text also takes tokens of no UTF-8 text)."""
    tag, whitespace = TAGS[case]
    monkeypatch.setenv("STRUCTGEN_WHITESPACE", "compact")   # the legacy tag's JSON: a layout xgrammar's includes
    compact = GRAMMAR_BACKEND_REGISTRY["structgen"](NS(), tokenizer, len(tokenizer), {tokenizer.eos_token_id})
    tree_walk(tokenizer, (compact, backends[1]), ("structural_tag", json.dumps(tag)), TAGGED, refused_after,
              exact=False, whitespace=whitespace)


def refused_after(ref, prefix):
    """A UTF-8 token the reference refuses after ``prefix`` (None: none, as in free text)."""
    m = ref.fork()
    assert m.advance_many(prefix) == len(prefix)
    refused = np.flatnonzero(~np.unpackbits(np.asarray(m.mask_words(), np.uint32).view(np.uint8),
                                            bitorder="little")[:m.vocab.logits_width].astype(bool))
    return next((int(t) for t in refused if utf8_prefix(m.vocab.token_bytes(int(t)))), None)


def tree_walk(tokenizer, backends, key, text, bad_after, *, exact, whitespace=False):
    ours_backend, xgr_backend = backends
    g = {"structgen": compiled(ours_backend, key), "xgrammar": compiled(xgr_backend, key)}
    assert isinstance(g["structgen"], sgs.StructgenGrammarObject) and isinstance(g["structgen"], BaseGrammarObject)
    width = len(tokenizer)
    eos = tokenizer.eos_token_id
    ids = tokenizer.encode(text) + [eos]
    ref = sg.compile(grammar_for(key[0], key[1], **ours_backend.options), ours_backend.vocab).matcher()
    # tree: 0 -> 1 (right) | 2 (wrong);  1 -> 3 (right) | 5 (another);  3 -> 4 (right)
    nxt = torch.tensor([[1, 3, -1, 4, -1, -1]])
    sib = torch.tensor([[-1, 2, -1, 5, -1, -1]])
    p, last = 0, ids[0]
    while p < len(ids):
        right = (ids[p:p + 3] + [eos, eos])[:3]
        bad = bad_after(ref, ids[:p])
        draft = torch.tensor([[last, right[0], right[0] if bad is None else bad, right[1], right[2],
                               ids[min(p + 2, len(ids) - 1)]]])
        masks = {}
        for name, grammar in g.items():
            before = grammar.matcher.accepted_tokens() if name == "structgen" else None
            mask, _ = generate_token_bitmask([NS(grammar=grammar)], nxt, sib, draft, width)
            masks[name] = mask
            if name == "structgen":
                assert grammar.matcher.accepted_tokens() == before
        a, b = rows(masks["structgen"], width), rows(masks["xgrammar"], width)
        for r in range(a.shape[0]):
            if exact:
                diff = np.flatnonzero(a[r] != b[r])
            else:
                diff = np.asarray(xgrammar_departures(a[r], b[r], ours_backend.vocab, whitespace), np.int64)
            assert diff.size == 0, (p, r, diff[:8].tolist(), [tokenizer.decode([int(t)]) for t in diff[:8]])
        for node, path in ((0, []), (1, right[:1]), (3, right[:2]), (4, right[:3])):
            m = ref.fork()
            if m.advance_many(ids[:p] + path) == p + len(path) and not m.is_terminated():
                assert np.array_equal(masks["structgen"][node].numpy().view(np.uint32), m.mask_words()), (p, node)
        if bad is not None:
            assert bool((masks["structgen"][2] == -1).all())   # the rejected node's row is left unconstrained
        # verification accepts the two right drafts plus a bonus token, one accept_token each
        for t in ids[p:p + 3]:
            for grammar in g.values():
                if not grammar.is_terminated():
                    grammar.accept_token(t)
        last = ids[min(p + 2, len(ids) - 1)]
        p += 3
    assert g["structgen"].is_terminated() and g["xgrammar"].is_terminated()
    g["structgen"].rollback(1)   # EOS undone
    assert not g["structgen"].is_terminated()
    g["structgen"].accept_token(eos)
    g["structgen"].accept_token(ids[0])   # ignored after termination, as xgrammar's backend does
    assert g["structgen"].is_terminated()


def test_jump_forward_and_retokenize(tokenizer, backends):
    ours_backend, xgr_backend = backends
    key = ("json", json.dumps(SCHEMA))
    g = {"structgen": compiled(ours_backend, key), "xgrammar": compiled(xgr_backend, key)}
    width = len(tokenizer)
    out = []
    for prefix in ("", '{"name": "Ada"', '{"name": "Ada", "n": 12,'):
        ids = tokenizer.encode(prefix) if prefix else []
        for grammar in g.values():   # bring both to the end of `prefix` (re-tokenized from scratch)
            grammar.jump_and_retokenize(out, ids, -1)
        out = ids
        helpers = {name: grammar.try_jump_forward(tokenizer) for name, grammar in g.items()}
        assert helpers["structgen"] is not None and helpers["structgen"][0] == []
        strings = {name: grammar.jump_forward_str_state(helpers[name]) for name, grammar in g.items()}
        assert strings["structgen"] == strings["xgrammar"], prefix
        jump, state = strings["structgen"]
        assert state == -1 and jump
        new_ids = tokenizer.encode(tokenizer.decode(out) + jump)
        for grammar in g.values():
            grammar.jump_and_retokenize(out, new_ids, state)
        out = new_ids
        mask = {name: grammar.allocate_vocab_mask(width, 1, "cpu") for name, grammar in g.items()}
        for name, grammar in g.items():
            grammar.fill_vocab_mask(mask[name], 0)
        assert np.array_equal(rows(mask["structgen"], width), rows(mask["xgrammar"], width)), prefix
    with pytest.raises(ValueError):   # a re-tokenization the constraint refuses (TokenRejected)
        g["structgen"].jump_and_retokenize(out, out[:-1] + tokenizer.encode("]]", add_special_tokens=False), -1)


def test_masks_copy_reset_and_rejection(tokenizer, backends):
    ours_backend, _ = backends
    width = len(tokenizer)
    grammar = compiled(ours_backend, ("regex", r"(yes|no)!"))
    mask = grammar.allocate_vocab_mask(width, 3, "cpu")
    assert mask.dtype == torch.int32 and tuple(mask.shape) == (3, (width + 31) // 32) and bool((mask == -1).all())
    other = grammar.copy()
    grammar.accept_token(tokenizer.encode("yes", add_special_tokens=False)[0])
    assert other.matcher.accepted_tokens() == 0   # copy(): a fresh cursor, independent
    sgs.StructgenGrammarObject.fill_vocab_mask_batched([GrammarRow(0, grammar), GrammarRow(2, other)], mask)
    assert bool((mask[1] == -1).all())   # unlisted rows untouched
    assert sg.bitmask_to_ids(mask[0]).tolist() == tokenizer.encode("!", add_special_tokens=False)
    logits = torch.randn(3, width)
    ours, theirs = logits.clone(), logits.clone()
    grammar.apply_vocab_mask(logits=ours, vocab_mask=grammar.move_vocab_mask(mask, "cpu"))
    xgr.apply_token_bitmask_inplace(theirs, mask)
    assert torch.equal(torch.isinf(ours), torch.isinf(theirs))
    sgs.StructgenGrammarObject.reset_vocab_mask(mask)
    assert bool((mask == -1).all())
    with pytest.raises(ValueError, match="not allowed"):
        grammar.accept_token(tokenizer.encode("yes", add_special_tokens=False)[0])
    assert grammar.matcher.accepted_tokens() == 1


def test_refused_constraints_are_invalid_grammar_objects(backends):
    ours_backend, _ = backends
    tag = ours_backend._init_value_dispatch(("structural_tag", '{"structures": [], "triggers": []}'), False)
    assert isinstance(tag, InvalidGrammarObject) and "structgen: structural tag legacy.triggers" in tag.error_message
    tokens = {"type": "structural_tag", "format": {"type": "token_triggered_tags", "trigger_tokens": [1], "tags": []}}
    tag = ours_backend._init_value_dispatch(("structural_tag", json.dumps(tokens)), False)
    assert isinstance(tag, InvalidGrammarObject) and "format type 'token_triggered_tags'" in tag.error_message
    budget = {"type": "structural_tag", "format": {"type": "any_text", "max_tokens": 5}}
    tag = ours_backend._init_value_dispatch(("structural_tag", json.dumps(budget)), False)
    assert isinstance(tag, InvalidGrammarObject) and "format.max_tokens" in tag.error_message
    bad = ours_backend._init_value_dispatch(("json", '{"type": "object", "properties": 3}'), False)
    assert isinstance(bad, InvalidGrammarObject) and "structgen" in bad.error_message
    nul = ours_backend._init_value_dispatch(("regex", "a\x00"), False)
    assert isinstance(nul, InvalidGrammarObject)
    anything = ours_backend._init_value_dispatch(("json", "$$ANY$$"), False)
    assert isinstance(anything, sgs.StructgenGrammarObject)
    gbnf = ours_backend._init_value_dispatch(("ebnf", 'root ::= "a" | "b"'), False)
    lark = ours_backend._init_value_dispatch(("ebnf", 'start: "a" | "b"'), False)
    assert isinstance(gbnf, sgs.StructgenGrammarObject) and isinstance(lark, sgs.StructgenGrammarObject)

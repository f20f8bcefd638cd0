"""Contract tests of structgen's vLLM backend against vLLM 0.33's own classes.

vLLM's ``StructuredOutputManager`` is driven exactly as its scheduler drives it (``grammar_init``,
``validate_tokens`` on each draft, ``grammar_bitmask`` with speculative rows -- fill, accept, ...,
bonus row, rollback --, ``accept_tokens`` with the accepted tokens plus the bonus one) twice, side
by side: once with structgen registered as ``backend="structgen"`` and once with vLLM's own
xgrammar backend, on the GPT-2 vocabulary through vLLM's own tokenizer wrapper.  Every bitmask
(all rows) must be identical between the two, and equal to structgen's own matcher masks;
xgrammar's kernel (what vLLM applies for every backend) must mask logits as structgen does.

The engine config is a small stand-in (the manager reads a dozen attributes of it); everything
else -- the manager, ``SamplingParams`` and its validation, ``Request``, the tokenizer wrapper,
the xgrammar backend -- is vLLM's.  In CI (``STRUCTGEN_REQUIRE_ENGINES=1``, set by .ci/run after
.ci/install_engines) a missing vLLM is a failure, not a skip.
"""
import json
import os
import time
import tomllib
from pathlib import Path
from types import SimpleNamespace as NS

import numpy as np
import pytest

if os.environ.get("STRUCTGEN_REQUIRE_ENGINES") != "1":
    pytest.importorskip("vllm", reason="vLLM is not installed (bash .ci/install_engines)")
    pytest.importorskip("xgrammar")

import torch  # noqa: E402
import xgrammar as xgr  # noqa: E402

from structgen.integrations import vllm as sgv  # noqa: E402

sgv.register()

import vllm.v1.structured_output as so_module  # noqa: E402
from vllm.config.structured_outputs import StructuredOutputsConfig  # noqa: E402
from vllm.exceptions import VLLMValidationError  # noqa: E402
from vllm.sampling_params import SamplingParams, StructuredOutputsParams  # noqa: E402
from vllm.tokenizers.hf import CachedHfTokenizer  # noqa: E402
from vllm.v1.request import Request  # noqa: E402
from vllm.v1.structured_output import StructuredOutputManager  # noqa: E402
from vllm.v1.structured_output.backend_types import StructuredOutputOptions  # noqa: E402

import structgen as sg  # noqa: E402
from structgen.integrations.serving import StopTokenMatcher, grammar_for  # noqa: E402
from tests.helpers import TOKENIZERS_DIR, utf8_prefix, xgrammar_departures  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
K = 3  # speculative tokens per step
GPT2 = TOKENIZERS_DIR / "gpt2"


@pytest.fixture(scope="module")
def tokenizer():
    return CachedHfTokenizer.from_pretrained(str(GPT2))


@pytest.fixture(scope="module", autouse=True)
def compact_json():
    # xgrammar under vLLM's disable_any_whitespace=True writes "," and ":" only; structgen the same
    old = os.environ.get("STRUCTGEN_WHITESPACE")
    os.environ["STRUCTGEN_WHITESPACE"] = "compact"
    yield
    if old is None:
        os.environ.pop("STRUCTGEN_WHITESPACE")
    else:
        os.environ["STRUCTGEN_WHITESPACE"] = old


def engine_config(backend: str, vocab_size: int, k: int = K):
    """The attributes of a VllmConfig that StructuredOutputManager and the backends read."""
    so = StructuredOutputsConfig(backend=backend, disable_any_whitespace=(backend == "xgrammar"))
    model = NS(skip_tokenizer_init=False, tokenizer=str(GPT2), hf_config=NS(model_type="gpt2"), is_diffusion=False,
               get_vocab_size=lambda: vocab_size)
    return NS(parallel_config=NS(distributed_executor_backend="mp"), scheduler_config=NS(max_num_seqs=4),
              model_config=model, structured_outputs_config=so, num_speculative_tokens=k,
              speculative_config=NS(num_speculative_tokens=k) if k else None)


def make_manager(backend, tokenizer, monkeypatch, k=K):
    monkeypatch.setattr(so_module, "cached_tokenizer_from_config", lambda model_config: tokenizer)
    return StructuredOutputManager(engine_config(backend, len(tokenizer), k))


def make_request(rid, params: StructuredOutputsParams, config, tokenizer):
    sp = SamplingParams(max_tokens=200, structured_outputs=params)
    sp.update_from_generation_config({}, eos_token_id=tokenizer.eos_token_id)
    sp._validate_structured_outputs(config.model_config, config.structured_outputs_config, tokenizer)
    req = Request(rid, [1, 2, 3], sp, None)
    return req


def wait_ready(req):
    t0 = time.time()
    while not req.structured_output_request.is_grammar_ready:
        assert time.time() - t0 < 600, "grammar compilation did not finish"
        time.sleep(0.01)
    grammar = req.structured_output_request.grammar
    assert not isinstance(grammar, Exception), grammar
    return grammar


def unpack(row: np.ndarray, width: int) -> np.ndarray:
    return np.unpackbits(np.ascontiguousarray(row, np.int32).view(np.uint8), bitorder="little")[:width].astype(bool)


# Where xgrammar 0.2.9 departs from JSON, the cases stay away: it writes a length-bounded string as
# [^"\\]{0,n} (no escapes, raw control characters accepted), refuses "-0", and refuses escapes in
# enum strings ("\u0078" for "x"); structgen accepts exactly the valid JSON texts.
CASES = {
    "json": (StructuredOutputsParams(json={"type": "object", "properties": {
        "name": {"type": "string"}, "n": {"type": "integer"},
        "tags": {"type": "array", "items": {"type": "boolean"}}}, "required": ["name", "n", "tags"]}),
        '{"name":"Ada L","n":42,"tags":[true,false]}'),
    "regex": (StructuredOutputsParams(regex=r"(\d{3}-){2}\d{2}(ab|cd)?"), "123-456-78cd"),
    "choice": (StructuredOutputsParams(choice=["yes", "no", "not sure"]), "not sure"),
    "gbnf": (StructuredOutputsParams(grammar='root ::= "(" item ("," item)* ")"\nitem ::= [a-c]+ | "z"'),
             "(abc,z,cab)"),
    "lark": (StructuredOutputsParams(grammar='start: "[" NUM (";" NUM)* "]"\nNUM: /[0-9]+/'), "[12;3;456]"),
}


# A Hermes-style tool call: free text, a tagged call whose content is a JSON Schema, free text.
TOOL = {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city", "days"]}
TAGGED = 'Let me look. <tool_call>\n{"city":"Oslo","days":3}\n</tool_call> Done.'
HERMES = {"type": "tag", "begin": "<tool_call>\n", "content": {"type": "json_schema", "json_schema": TOOL},
          "end": "\n</tool_call>"}
# xgrammar allows JSON whitespace runs of any length inside structural tags (vLLM's
# disable_any_whitespace does not reach them); structgen keeps $STRUCTGEN_WHITESPACE ("compact"
# here) unless the format bounds them: with max_whitespace_cnt both read the same language.
TAG_CASES = {
    "structural_tag": (StructuredOutputsParams(structural_tag=json.dumps({"type": "structural_tag", "format": {
        "type": "triggered_tags", "triggers": ["<tool_call>"],
        "tags": [dict(HERMES, content=dict(HERMES["content"], max_whitespace_cnt=16))]}})), TAGGED),
    "structural_tag_legacy": (StructuredOutputsParams(structural_tag=json.dumps({
        "type": "structural_tag", "triggers": ["<tool_call>"],
        "structures": [{"begin": HERMES["begin"], "schema": TOOL, "end": HERMES["end"]}]})), TAGGED),
}
#: cases where xgrammar's JSON may also take tokens that start with JSON whitespace (see above)
XGRAMMAR_WHITESPACE = {"structural_tag_legacy"}
_FIELDS = ("json", "regex", "choice", "grammar", "structural_tag")


@pytest.mark.parametrize("case", sorted(CASES) + sorted(TAG_CASES))
def test_manager_call_sequence_matches_xgrammar(case, tokenizer, monkeypatch):
    """The scheduler's sequence on both backends: identical bitmasks (every row, speculative rows
    included), identical draft trimming, the same termination; rows equal structgen's own masks."""
    make_params, text = CASES[case] if case in CASES else TAG_CASES[case]
    eos = tokenizer.eos_token_id
    ids = tokenizer.encode(text, add_special_tokens=False) + [eos]
    width = len(tokenizer)
    managers, reqs = {}, {}
    for backend in ("structgen", "xgrammar"):
        m = make_manager(backend, tokenizer, monkeypatch)
        params = StructuredOutputsParams(**{f: getattr(make_params, f) for f in _FIELDS})
        req = make_request(f"r-{backend}", params, m.vllm_config, tokenizer)
        assert req.sampling_params.structured_outputs._backend == backend
        m.grammar_init(req)
        wait_ready(req)
        managers[backend], reqs[backend] = m, req
    assert isinstance(managers["structgen"].backend, sgv.StructgenBackend)
    assert managers["structgen"].backend_name == "structgen"
    ours = reqs["structgen"].structured_output_request.grammar
    assert isinstance(ours, sgv.StructgenGrammar)
    # structgen's own matcher, advanced along the same tokens, is the reference for every row
    kind, spec = reqs["structgen"].structured_output_request.structured_output_key
    reference = sg.compile(grammar_for(sgv.request_kind(kind), spec, whitespace="compact"),
                           managers["structgen"].backend.vocab).matcher()
    never = tokenizer.convert_tokens_to_ids("\u0101")  # the byte 0x01: never valid in CASES
    pos, step = 0, 0
    while pos < len(ids):
        draft = list(ids[pos:pos + K])
        bad = never if case in CASES else refused_after(reference, ids[:pos + len(draft) - 1])
        if step % 2 and draft and bad is not None:
            draft[-1] = bad  # a wrong proposal: validate_tokens trims it
        validated = {b: managers[b].validate_tokens(reqs[b], list(draft)) for b in managers}
        assert validated["structgen"] == validated["xgrammar"], (step, draft)
        good = validated["structgen"]
        assert good == [t for t in draft if t != bad][:len(good)]
        scheduled = good + [-1] * (len(draft) - len(good))  # the scheduler pads rejected drafts with -1
        masks = {b: managers[b].grammar_bitmask({reqs[b].request_id: reqs[b]}, [reqs[b].request_id],
                                                {reqs[b].request_id: list(scheduled)}).copy() for b in managers}
        assert masks["structgen"].shape == masks["xgrammar"].shape == (K + 1, (width + 31) // 32)
        for r in range(K + 1):
            a, b = unpack(masks["structgen"][r], width), unpack(masks["xgrammar"][r], width)
            if case in TAG_CASES:
                diff = xgrammar_departures(a, b, managers["structgen"].backend.vocab, case in XGRAMMAR_WHITESPACE)
            else:
                diff = np.flatnonzero(a != b)
            assert len(diff) == 0, (f"{case} step {step} row {r}: differ on {list(diff[:8])} "
                                    f"{[tokenizer.decode([int(t)]) for t in diff[:8]]}")
        for r in range(min(len(good), len(ids) - pos) + 1):   # rows the grammar filled
            m = reference.fork()
            assert m.advance_many(ids[:pos + r]) == pos + r
            if not m.is_terminated():
                assert np.array_equal(masks["structgen"][r].view(np.uint32), m.mask_words()), (case, step, r)
        # the target model accepts the valid drafts and samples one more token (the bonus)
        new = ids[pos:pos + len(good) + 1]
        for b in managers:
            assert managers[b].accept_tokens(reqs[b], list(new))
        pos += len(new)
        step += 1
    for b in managers:
        assert reqs[b].structured_output_request.grammar.is_terminated(), b
    # after the end, a draft validates to nothing and accept_tokens ignores what comes
    assert ours.validate_tokens([ids[0]]) == []
    assert ours.accept_tokens("r", [ids[0]])
    ours.rollback(1)   # undo EOS: the constraint is complete again, EOS allowed once more
    assert not ours.is_terminated() and ours.validate_tokens([eos]) == [eos]
    ours.reset()
    assert not ours.is_terminated() and ours.validate_tokens(ids) == ids


def refused_after(reference, prefix) -> int | None:
    """The lowest id of a UTF-8 token the reference refuses after ``prefix`` (None: there is
    none, as in free text; tokens of no UTF-8 text are left out: xgrammar's free text takes them)."""
    m = reference.fork()
    assert m.advance_many(prefix) == len(prefix)
    refused = np.flatnonzero(~unpack(np.asarray(m.mask_words()).view(np.int32), m.vocab.logits_width))
    return next((int(t) for t in refused if utf8_prefix(m.vocab.token_bytes(int(t)))), None)


def test_validate_tokens_leaves_state_and_rollback_spans_termination(tokenizer, monkeypatch):
    m = make_manager("structgen", tokenizer, monkeypatch)
    backend = sgv.StructgenBackend(m.vllm_config, tokenizer=tokenizer, vocab_size=len(tokenizer))
    eos = tokenizer.eos_token_id
    g = backend.compile_grammar(StructuredOutputOptions.REGEX, "a(b|c)+", stop_token_ids={eos})
    a, b, c = (tokenizer.encode(x, add_special_tokens=False)[0] for x in "abc")
    before = g.matcher.snapshot()
    assert g.validate_tokens([a, b, c, eos, b]) == [a, b, c, eos]   # stops after the stop token
    assert g.matcher.snapshot() == before
    assert g.validate_tokens([b]) == []
    assert g.accept_tokens("r", [a, b, eos]) and g.is_terminated()
    g.rollback(2)
    assert not g.is_terminated() and g.validate_tokens([c, c, eos]) == [c, c, eos]
    assert not g.accept_tokens("r", [a])   # a rejected token: False (vLLM ends the request)


def test_bitmask_layout_is_xgrammars(tokenizer, monkeypatch):
    """A structgen bitmask through xgrammar's kernel (vLLM applies it for every backend) masks
    exactly what structgen's own apply masks, bit 31 of the last word included."""
    m = make_manager("structgen", tokenizer, monkeypatch)
    backend = sgv.StructgenBackend(m.vllm_config, tokenizer=tokenizer, vocab_size=len(tokenizer))
    bm = backend.allocate_token_bitmask(3)
    assert bm.dtype == torch.int32 and tuple(bm.shape) == (3, (len(tokenizer) + 31) // 32) and bool((bm == -1).all())
    g = backend.compile_grammar(StructuredOutputOptions.CHOICE, '["yes", "no", " maybe"]')
    g.fill_bitmask(bm, 1)
    g.accept_tokens("r", tokenizer.encode("yes", add_special_tokens=False))
    g.fill_bitmask(bm, 2)   # EOS (50256 = word 1571, bit 0) only
    logits = torch.randn(3, len(tokenizer))
    ours = sg.apply_bitmask_(logits.clone(), bm)
    theirs = logits.clone()
    xgr.apply_token_bitmask_inplace(theirs, bm)
    assert torch.equal(torch.isinf(ours), torch.isinf(theirs))
    assert sg.bitmask_to_ids(bm[2]).tolist() == [tokenizer.eos_token_id]


def test_request_stop_tokens_replace_the_vocabularys_eos(tokenizer, monkeypatch):
    """stop_token_ids given to compile_grammar (the request's EOS + stop ids) are allowed exactly
    where the constraint is complete and end it; the vocabulary's other EOS ids are not allowed."""
    m = make_manager("structgen", tokenizer, monkeypatch)
    backend = sgv.StructgenBackend(m.vllm_config, tokenizer=tokenizer, vocab_size=len(tokenizer))
    newline = tokenizer.encode("\n", add_special_tokens=False)[0]
    g = backend.compile_grammar(StructuredOutputOptions.REGEX, "[0-9]+", stop_token_ids={newline})
    assert isinstance(g.matcher, StopTokenMatcher)
    bm = backend.allocate_token_bitmask(2)
    seven = tokenizer.encode("7", add_special_tokens=False)[0]
    g.fill_bitmask(bm, 0)
    start = set(sg.bitmask_to_ids(bm[0]).tolist())
    assert newline not in start and tokenizer.eos_token_id not in start and seven in start
    assert g.accept_tokens("r", [seven])
    g.fill_bitmask(bm, 1)
    after = set(sg.bitmask_to_ids(bm[1]).tolist())
    assert newline in after and tokenizer.eos_token_id not in after
    assert g.validate_tokens([tokenizer.eos_token_id]) == []
    assert g.accept_tokens("r", [newline]) and g.is_terminated()
    g.rollback(1)
    assert not g.is_terminated()


def test_request_validation(tokenizer, monkeypatch):
    m = make_manager("structgen", tokenizer, monkeypatch)
    cfg = m.vllm_config
    with pytest.raises(VLLMValidationError, match="structgen cannot use this constraint.*legacy.triggers are non-empty"):
        make_request("t", StructuredOutputsParams(structural_tag='{"structures": [], "triggers": []}'), cfg, tokenizer)
    dispatch = {"type": "structural_tag", "format": {"type": "dispatch", "rules": [["<a>", {"type": "any_text"}]]}}
    with pytest.raises(VLLMValidationError, match="structgen cannot use this constraint.*format type 'dispatch'"):
        make_request("t", StructuredOutputsParams(structural_tag=json.dumps(dispatch)), cfg, tokenizer)
    xml = {"type": "structural_tag", "format": {"type": "tag", "begin": "<f>", "end": "</f>", "content": {
        "type": "json_schema", "json_schema": TOOL, "style": "qwen_xml"}}}
    with pytest.raises(VLLMValidationError, match=r"JSON style 'qwen_xml'.*format\.content"):
        make_request("t", StructuredOutputsParams(structural_tag=json.dumps(xml)), cfg, tokenizer)
    req = make_request("t", TAG_CASES["structural_tag"][0], cfg, tokenizer)
    assert req.sampling_params.structured_outputs._backend == "structgen"
    with pytest.raises(VLLMValidationError, match="structgen cannot use this constraint.*properties"):
        make_request("t", StructuredOutputsParams(json={"type": "object", "properties": 5}), cfg, tokenizer)
    with pytest.raises(VLLMValidationError, match="regex"):
        make_request("t", StructuredOutputsParams(regex="(ab"), cfg, tokenizer)
    with pytest.raises(VLLMValidationError, match="empty list"):
        make_request("t", StructuredOutputsParams(choice=[]), cfg, tokenizer)
    req = make_request("t", StructuredOutputsParams(json_object=True), cfg, tokenizer)
    assert req.sampling_params.structured_outputs._backend == "structgen"
    # other backends keep vLLM's own checks: xgrammar rewrites a choice into its EBNF grammar
    xcfg = engine_config("xgrammar", len(tokenizer))
    req = make_request("x", StructuredOutputsParams(choice=["a", "b"]), xcfg, tokenizer)
    assert req.sampling_params.structured_outputs._backend == "xgrammar"
    assert req.sampling_params.structured_outputs.grammar is not None


def test_registration_is_idempotent_and_refuses_other_versions():
    from vllm.config import structured_outputs as so_config

    sgv.register()
    sgv.register()
    assert so_config.StructuredOutputsBackend.__args__.count("structgen") == 1
    assert StructuredOutputsConfig(backend="structgen").backend == "structgen"
    with pytest.raises(Exception, match="backend"):
        StructuredOutputsConfig(backend="no-such-backend")
    assert getattr(StructuredOutputManager.grammar_init, "structgen_wrapped", False)
    sgv.check_version(sgv.SUPPORTED_VLLM)
    with pytest.raises(sg.EngineError, match=r"vLLM 0\.34\.1 is installed.*0\.33\.0"):
        sgv.check_version("0.34.1")


def test_entry_point_is_declared():
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())
    ep = meta["project"]["entry-points"]["vllm.general_plugins"]["structgen"]
    module, func = ep.split(":")
    assert module == "structgen.integrations.vllm" and getattr(sgv, func) is sgv.register
    from importlib.metadata import entry_points

    from vllm.plugins import DEFAULT_PLUGINS_GROUP

    assert DEFAULT_PLUGINS_GROUP == "vllm.general_plugins"
    found = {e.name: e.value for e in entry_points(group=DEFAULT_PLUGINS_GROUP)}
    if os.environ.get("STRUCTGEN_REQUIRE_ENGINES") == "1":   # CI installs this checkout: vLLM must see it
        assert found.get("structgen") == ep

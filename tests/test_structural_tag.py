"""Structural tags (structgen.integrations.structural_tag) against xgrammar 0.2.9's own reading.

Each (format, text) is run through xgrammar's ``compile_structural_tag`` + ``GrammarMatcher``
(accept the text, then EOS) and through structgen's grammar (advance the bytes, then accepting?),
on the GPT-2 vocabulary: both must agree, rejections included.  xgrammar is the oracle here only
for languages, on texts (masks are compared in tests/test_vllm_backend.py and
tests/test_sglang_backend.py).  Refused formats must raise structgen errors naming the place.
"""
import json
import os

import pytest

if os.environ.get("STRUCTGEN_REQUIRE_ENGINES") != "1":
    pytest.importorskip("xgrammar")

import xgrammar as xgr  # noqa: E402

import structgen as sg  # noqa: E402
from structgen.integrations.serving import grammar_for  # noqa: E402
from tests.helpers import load_tokenizer, load_vocab  # noqa: E402


def C(value):
    return {"type": "const_string", "value": value}


def T(begin, content, end):
    return {"type": "tag", "begin": begin, "content": content, "end": end}


S = {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}
S3 = {"type": "object", "properties": {"name": {"type": "string"}, "n": {"type": "integer"},
                                       "ok": {"type": "boolean"}}, "required": ["name", "n", "ok"]}
LEGACY = {"type": "structural_tag", "structures": [{"begin": "<tc>", "schema": S, "end": "</tc>"}],
          "triggers": ["<tc>"]}
TT = {"type": "triggered_tags", "triggers": ["<a"], "tags": [T("<a>", C("x"), "</a>"),
                                                             T("<ab>", {"type": "any_text"}, "</ab>")]}
FLAG_TEXTS = ["", "hi", "hi<a>x</a>", "<a>x</a>", "<a>x</a>t", "<a>x</a>t<a>x</a>", "zz", "<ab>zz</ab>", "<a>x</a>zz"]
ANY_THEN_X = {"type": "sequence", "elements": [{"type": "any_text"}, C("x")]}
FLEX = {"type": "json_schema", "json_schema": S3, "max_whitespace_cnt": 2}
CASES = (
    [(LEGACY, s) for s in ('hi <tc>{"a":1}</tc> bye', 'hi <tc>{"a":1,"b":2}</tc>', '<tc>{"a":1}</tc><tc>{"a":2}</tc>',
                           'hi <t', 'a<tc>x', 'x<tc>{"a":1.0}</tc>')]
    + [(TT, s) for s in ["", "hi", "hi<a>x</a>", "q<ab>zz</ab>w", "q<ab>zz</ab>w</ab>", "<a>y</a>", "\u00e9<a>x</a>"]]
    + [(dict(TT, **flags), s) for flags in ({"at_least_one": True}, {"stop_after_first": True},
                                            {"at_least_one": True, "stop_after_first": True}, {"excludes": ["zz"]})
       for s in FLAG_TEXTS]
    + [({"type": "tags_with_separator", "separator": ",", "tags": [T("<a>", C("x"), "</a>")]}, s)
       for s in ["", "<a>x</a>", "<a>x</a>,<a>x</a>", "<a>x</a>,"]]
    + [({"type": "sequence", "elements": [{"type": "any_text"}, C("END")]}, "abENDcEND"),
       (T("<a>", ANY_THEN_X, ["</a>", "</b>"]), "<a>yyx</b>"),
       (T("<a>", ANY_THEN_X, ["</a>", "</b>"]), "<a>y</a>x</b>"),
       (T("<a>", {"type": "triggered_tags", "triggers": ["<b"], "tags": [T("<b>", C("y"), "</b>")]}, "</a>"),
        "<a>t<b>y</b>u</a>"),
       (T("<a>", {"type": "triggered_tags", "triggers": ["<b"], "tags": [T("<b>", C("y"), "</b>")]}, "</a>"),
        "<a>t</a>u</a>"),
       ({"type": "or", "elements": [{"type": "regex", "pattern": "\\d+"}, FLEX]}, '{  "name": "a","n":1,"ok":true}'),
       ({"type": "or", "elements": [{"type": "regex", "pattern": "\\d+"}, FLEX]}, '{   "name":"a","n":1,"ok":true}'),
       (T("<t>", FLEX, "</t>"), '<t> {"name":"a","n":1,"ok":true}</t>'),
       (T("<t>", FLEX, "</t>"), '<t>{"name":"a","n":1,"ok":true} </t>'),
       ({"type": "repeat", "min": 1, "max": 2, "content": C("ab")}, "ababab"),
       ({"type": "plus", "content": C("ab")}, ""),
       ({"type": "star", "content": C("ab")}, "abab"),
       ({"type": "optional", "content": C("ab")}, "abab"),
       ({"type": "any_text", "max_chars": 3}, "abc"),
       ({"type": "any_text", "max_chars": 3}, "abcd"),
       ({"type": "any_text", "excludes": ["q"]}, "aqc"),
       ({"type": "grammar", "grammar": 'root ::= "a" [0-9]+'}, "a12"),
       ({"type": "grammar", "grammar": 'start: "a" /[0-9]+/', "syntax": "lark"}, "a1x")])


@pytest.fixture(scope="module")
def engines():
    tok = load_tokenizer("gpt2")
    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=len(tok))
    return tok, xgr.GrammarCompiler(info), load_vocab("gpt2")


def xgrammar_reads(compiler, tag: dict, text: str, eos: int):
    if "structures" in tag:   # the legacy API, as vLLM calls it
        items = [xgr.StructuralTagItem(begin=s["begin"], schema=json.dumps(s["schema"]), end=s["end"])
                 for s in tag["structures"]]
        ctx = compiler.compile_structural_tag(items, tag["triggers"])
    else:
        ctx = compiler.compile_structural_tag(json.dumps(tag))
    m = xgr.GrammarMatcher(ctx)
    ok = m.accept_string(text)
    return ok, ok and m.accept_token(eos)


@pytest.mark.parametrize("i", range(len(CASES)))
def test_language_matches_xgrammar(i, engines):
    tok, compiler, vocab = engines
    fmt, text = CASES[i]
    tag = fmt if "structures" in fmt else {"type": "structural_tag", "format": fmt}
    theirs = xgrammar_reads(compiler, tag, text, tok.eos_token_id)
    m = sg.compile(grammar_for("structural_tag", json.dumps(tag), whitespace="compact"), vocab).matcher()
    ok = m.advance_bytes(text.encode())
    assert (ok, ok and m.is_accepting()) == theirs, (fmt, text)


REFUSED = [
    ("not json", sg.SchemaError, "not JSON"),
    ({"type": "structural_tag"}, sg.SchemaError, "'format'"),
    ({"type": "structural_tag", "format": {"type": "dispatch", "rules": []}}, sg.Unsupported, "'dispatch'.*at format"),
    ({"type": "structural_tag", "format": {"type": "token_triggered_tags", "trigger_tokens": [1], "tags": []}},
     sg.Unsupported, "token_triggered_tags"),
    ({"type": "structural_tag", "format": T("<a>", {"type": "json_schema", "json_schema": S, "style": "qwen_xml"},
                                            "</a>")}, sg.Unsupported, "qwen_xml.*format.content"),
    ({"type": "structural_tag", "format": {"type": "json_schema", "json_schema": S, "any_order": True}},
     sg.Unsupported, "any_order"),
    ({"type": "structural_tag", "format": {"type": "any_text", "max_tokens": 3}}, sg.Unsupported, "max_tokens"),
    ({"type": "structural_tag", "format": {"type": "sequence", "elements": [C("a"), {"type": "const_string"}]}},
     sg.SchemaError, r"format.elements\[1\] needs 'value'"),
    ({"type": "structural_tag", "format": {"type": "const_string", "value": "a", "colour": 1}}, sg.Unsupported,
     "unknown key.*'colour'"),
    ({"type": "structural_tag", "format": {"type": "triggered_tags", "triggers": ["<a", "<"],
                                           "tags": [T("<a>", C("x"), "</a>")]}}, sg.SchemaError, "exactly one trigger"),
    ({"type": "structural_tag", "format": {"type": "repeat", "min": 2, "max": 1, "content": C("a")}}, sg.SchemaError,
     "min <= max"),
]


@pytest.mark.parametrize("i", range(len(REFUSED)))
def test_refusals_name_the_place(i):
    spec, error, match = REFUSED[i]
    with pytest.raises(error, match=match):
        grammar_for("structural_tag", spec if isinstance(spec, str) else json.dumps(spec))


def test_cfg_json_edge_whitespace():
    """``edge_whitespace=False``: flexible whitespace between lexemes only (the default also takes
    a run before and after the document, as JSON text allows)."""
    vocab = load_vocab("gpt2")
    doc = b'{ "name" :"a","n": 1 ,"ok":true }'
    for edge, around in ((True, True), (False, False)):
        g = sg.Grammar.from_json_schema(S3, engine="cfg", whitespace="flexible", edge_whitespace=edge)
        for data, want in ((doc, True), (b" " + doc, around), (doc + b"\n", around)):
            m = sg.compile(g, vocab).matcher()
            assert (m.advance_bytes(data) and m.is_accepting()) == want, (edge, data)


def test_model_dumps_of_xgrammar_formats_are_read():
    """SGLang and vLLM forward ``StructuralTag.model_dump(by_alias=True)``: every default field
    written out (``style``, ``excludes``, ``max_tokens``: None, ...) reads as if left out."""
    from xgrammar.structural_tag import StructuralTag

    for fmt in (TT, dict(TT, stop_after_first=True), T("<t>", FLEX, "</t>"), ANY_THEN_X,
                {"type": "tags_with_separator", "separator": ",", "tags": [T("<a>", C("x"), "</a>")]}):
        tag = {"type": "structural_tag", "format": fmt}
        dumped = StructuralTag.model_validate(tag).model_dump(by_alias=True)
        assert dumped != tag
        assert grammar_for("structural_tag", json.dumps(dumped)).key == grammar_for("structural_tag", tag).key

"""llguidance's Lark extensions (``%json``, special tokens, ``{m,n}``, ``[lazy]``, ``suffix=``):
grammars from llguidance's own docs and tests (tests/data/llguidance_lark, MIT) compile on real
vocabularies, accept and reject what llguidance's tests say, and sentences sampled under the mask
validate (regex for the frame, ``jsonschema`` for every ``%json`` part); a brute-force mask check
on a tiny vocabulary; the syntax and its errors."""
from __future__ import annotations

import json
import re
from pathlib import Path

import jsonschema
import numpy as np
import pytest

import structgen as sg
from structgen.frontends.lark_extensions import read_extensions
from structgen.runtime.tokenize import greedy_tokenize
from tests.helpers import load_llama31_vocab, load_vocab
from tests.test_composition import SPECIAL, check, o_lark, texts, tiny_vocab

DATA = Path(__file__).resolve().parent / "data" / "llguidance_lark"
CASES = {k: v for k, v in json.loads((DATA / "cases.json").read_text(encoding="utf-8")).items()
         if not k.startswith("_")}
MARK = re.compile("⟦(.*?)⟧")


def vocab_of(name):
    return load_llama31_vocab() if name == "llama31" else load_vocab(name)


def tokens(vocab, text: str) -> list[int]:
    """``text`` with ``⟦name⟧`` as special tokens, the rest spelled by ordinary tokens."""
    out, pos = [], 0
    for m in MARK.finditer(text):
        if m.start() > pos:
            out += greedy_tokenize(vocab, text[pos:m.start()].encode())
        out.append(vocab.special_token_id(m.group(1)))
        pos = m.end()
    if pos < len(text):
        out += greedy_tokenize(vocab, text[pos:].encode())
    assert None not in out
    return out


def render(vocab, ids) -> str:
    """Ordinary tokens as their text, special tokens as ``⟦name⟧``."""
    out, buf = [], b""
    for t in ids:
        if vocab.is_normal[t]:
            buf += vocab.token_bytes(t)
        else:
            out.append(buf.decode("utf-8"))
            buf = b""
            out.append(f"⟦{vocab.special_tokens[int(t)]}⟧")
    out.append(buf.decode("utf-8"))
    return "".join(out)


def bias_of(vocab, favour=()):
    """Random walks finish: EOS, special tokens, JSON closers and the tokens that start one of the
    ``favour`` texts are favoured, whitespace is not."""
    b = np.zeros(vocab.logits_width)
    for text in favour:
        for k in range(1, len(text) + 1):
            for t in greedy_tokenize(vocab, text[:k].encode())[:1]:
                b[t] += 12.0

    def holding(chars: bytes, weight: float):
        pos = np.flatnonzero(np.isin(vocab.token_data, np.frombuffer(chars, np.uint8)))
        b[np.unique(np.searchsorted(vocab.token_offsets, pos, side="right") - 1)] += weight

    holding(b'"', 3.0)
    holding(b"}]>", 8.0)
    holding(b" \t\r\n", -4.0)
    b[vocab.special_ids] = 14.0
    b[vocab.eos_ids] = 14.0
    return b


def sample(cg, vocab, rng, bias, prefix, max_steps=120):
    """Token ids sampled under the mask after ``prefix`` (forced); None when the budget ran out."""
    m = cg.matcher()
    ids = list(prefix)
    assert m.advance_many(ids) == len(ids)
    for _ in range(max_steps):
        allowed = m.allowed_tokens()
        assert allowed.size, f"dead end after {render(vocab, ids)!r}"
        favoured = allowed[bias[allowed] > 0]
        if favoured.size and rng.random() < 0.75:  # a favoured token, by softmax(bias)
            t = int(favoured[np.argmax(rng.gumbel(size=favoured.size) + bias[favoured])])
        else:  # any allowed token
            t = int(allowed[rng.integers(allowed.size)])
        assert m.advance(t)
        if m.is_terminated():
            return ids
        ids.append(t)
    return None


def schemas_of(text: str) -> list:
    return [s for s, _, _ in read_extensions(text).json.values()]


@pytest.mark.parametrize("name", sorted(CASES))
def test_llguidance_grammar(name):
    case = CASES[name]
    text = (DATA / name).read_text(encoding="utf-8")
    vocab = vocab_of(case["vocab"])
    cg = sg.compile(sg.Grammar.from_lark(text), vocab)
    for s in case["accept"]:
        m = cg.matcher()
        ids = tokens(vocab, s)
        assert m.advance_many(ids) == len(ids) and m.is_accepting(), s
    for s in case["reject"]:
        m = cg.matcher()
        ids = tokens(vocab, s)
        assert not (m.advance_many(ids) == len(ids) and m.is_accepting()), s
    schemas = schemas_of(text)
    full, each = re.compile(case["full"]), re.compile(case["each"])
    rng = np.random.default_rng(7)
    bias = bias_of(vocab, case.get("favour", ()))
    done = parts = 0
    for prefix in case["prefixes"]:
        for _ in range(6):
            ids = sample(cg, vocab, rng, bias, tokens(vocab, prefix) if prefix else [])
            if ids is None:
                continue
            out = render(vocab, ids)
            done += 1
            assert full.fullmatch(out), out
            for m in each.finditer(out):
                value = json.loads(m.group("j"))
                assert any(jsonschema.Draft202012Validator(schemas[i]).is_valid(value) for i in case["schemas"]), out
                parts += 1
    assert done >= 5, f"only {done} sampled sentences finished"
    if case["each"] != "(?!)":
        assert parts >= 3, f"only {parts} %json parts sampled"


# ----------------------------------------------------------------------------- tiny vocabulary
LARK_TINY = ('start: "a" <|t|> x\n'
             'x: %json {"x-guidance": {"whitespace_flexible": false}, "enum": [1, 22, 212]}\n%ignore " "\n')


def test_mask_equals_bruteforce_tiny():
    """%json inside a Lark grammar with %ignore: the ignored spaces go around the outer lexemes,
    never inside the JSON value.  Oracle: Lark itself, with the value as one terminal."""
    lark = o_lark('start: "a" S X\nS: "§"\nX: "1" | "22" | "212"\n%ignore " "\n', special_ok=True)
    check(sg.Grammar.from_lark(LARK_TINY), lark, "a 12" + SPECIAL, 6, 3, seed=3,
          pieces=["a", " ", "1", "2", "21", " 2", "a ", "12 ", "1 "])


# ----------------------------------------------------------------------------- syntax
def compile_tiny(text):
    return sg.compile(sg.Grammar.from_lark(text), tiny_vocab())


def accepts(cg, pieces):
    ids = [texts().index(p) for p in pieces]
    m = cg.matcher()
    return m.advance_many(ids) == len(ids) and m.is_accepting()


def test_repetition_braces():
    cg = compile_tiny('start: ab{2,3} c{,1} "b"{2,}\nab: "a" | "b"\nc: "c"\n')
    assert accepts(cg, ["a", "b", "b", "b"])
    assert accepts(cg, ["a", "b", "a", "c", "b", "b", "b", "b"])
    assert not accepts(cg, ["a", "b", "b"])
    assert not accepts(cg, ["a", "a", "a", "a", "b", "b"])
    cg = compile_tiny('start: ("a" | "b"){2} "c"\n')
    assert accepts(cg, ["b", "a", "c"]) and not accepts(cg, ["a", "c"])


def test_lazy_and_suffix_rules():
    cg = compile_tiny('start: hd "b"\nhd[lazy]: /[ab]*/ "a"\n')
    assert accepts(cg, ["a", "b"]) and accepts(cg, ["b", "b", "a", "b"])
    assert not accepts(cg, ["a", "a", "b"])  # the lazy head ends at the first "a"
    cg = compile_tiny('start: hd "c"\nhd[capture, suffix="a"]: /[ab]*/\n')
    assert accepts(cg, ["b", "a", "c"]) and not accepts(cg, ["a", "a", "c"])


def test_token_sets_and_names():
    cg = compile_tiny('start: <[12]> "a" | <|t|> "b"\n')
    assert accepts(cg, [SPECIAL, "a"]) and accepts(cg, [SPECIAL, "b"])
    assert not accepts(cg, ["<", "|t|", ">", "a"])  # the token's text is not the token
    with pytest.raises(sg.Unsupported, match="ordinary token"):
        compile_tiny('start: <[10-12]> "c"\n')


@pytest.mark.parametrize("text, err, where", [
    ('start: FOO\nFOO: <|t|>\n', sg.GrammarError, "cannot be used in terminals"),
    ('start: FOO\nFOO: %json {}\n', sg.GrammarError, "cannot be used in terminals"),
    ('start: "a" | <|foobarbaz|>\n', sg.GrammarError, "unknown special token"),
    ('start: "a" <eos>\n', sg.GrammarError, "end-of-sequence"),
    ('start: <[^5]>\n', sg.Unsupported, "ordinary tokens"),
    ('start: <[*]>\n', sg.Unsupported, "ordinary tokens"),
    ('start: <[200-100]>\n', sg.GrammarError, "invalid token range"),
    ('start: %json {\n', sg.GrammarError, "%json"),
    ('start: %regex {"substring_words": "a b"}\n', sg.Unsupported, "%regex"),
    ('start: foo\nfoo[stop="x"]: /.*/\n', sg.Unsupported, "stop"),
    ('start: foo{7,6}\nfoo: "a"\n', sg.GrammarError, "range end"),
    ('%llguidance {"ignore_once": true}\nstart: "a"\n', sg.Unsupported, "ignore_once"),
])
def test_errors(text, err, where):
    with pytest.raises(err, match=re.escape(where) if where[0] != "%" else where):
        compile_tiny(text)


def test_error_positions():
    with pytest.raises(sg.GrammarError) as e:
        compile_tiny('start: a\n\na: "x"\nFOO: <|t|>\n')
    assert (e.value.line, e.value.column) == (4, 6)
    with pytest.raises(sg.GrammarError) as e:  # found when the vocabulary is known, named in the text
        compile_tiny('start: "a"\n  | "b" <|nope|>\n')
    assert (e.value.line, e.value.column) == (2, 9) and "unknown special token" in str(e.value)


def test_plain_lark_unchanged():
    """Grammars without extensions read as before (a string holding "<" or "{1}" stays a string)."""
    cg = compile_tiny('start: "<" A "{1,2}"? ">"\nA: /[ab]{1,2}/\n')
    assert accepts(cg, ["<", "a", "b", ">"]) and not accepts(cg, ["<", ">"])

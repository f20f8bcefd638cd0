"""Grammar.tags and Grammar.reasoning against brute force on a tiny vocabulary: at every prefix of
random walks the mask is exactly the tokens after which the text can still be completed, EOS
exactly on sentences.  The oracles are regexes written from the documented language (free text
without a trigger written as text, a call at the first trigger, the special token as one
character ``§`` that no ordinary token spells), not from how structgen builds it."""
from __future__ import annotations

import pytest

import structgen as sg
from structgen.tools import parse_output
from tests.test_composition import PIECES, SPECIAL, check, o_regex, texts, tiny_vocab

G = sg.Grammar
T = sg.Tag
FREE = "(?:(?!<a)[^§])*"  # text without the trigger "<a" (and without the special token)
TAG_PIECES = ["a", "b", "c", " ", "<", ">", "ab", "ba", "b>", "<a", "a<", " <"]
TAG_ALPHABET = "abc <>" + SPECIAL

CASES = {
    # a text trigger: free text holds no "<a"; a call starts at its first occurrence
    "text-trigger": (lambda: G.tags([T("<a", r"b+", ">")], triggers=["<a"]),
                     rf"(?:{FREE}<ab+>)*{FREE}", TAG_ALPHABET, 6, 3),
    # a special-token trigger: free text may spell "<|t|>" as text; at most two calls
    "special-trigger": (lambda: G.tags([T("<|t|>", r"a|b", "")], max_calls=2),
                        r"(?:[^§]*§(?:a|b)){0,2}[^§]*", TAG_ALPHABET, 6, 1),
    # no free text; a second tag under the same trigger with a longer begin
    "calls-only": (lambda: G.tags([T("a", "b*", "c"), T("ab", "c", " ")], triggers=["a"], free_text=False),
                   r"(?:a(?:b*c|bc ))+", TAG_ALPHABET, 7, 3),
    # free text of a regex, exactly one call
    "free-regex": (lambda: G.tags([T("<", "[ab]", ">")], triggers=["<"], free_text="[a c]{0,2}", min_calls=1,
                                  max_calls=1), r"[a c]{0,2}<[ab]>[a c]{0,2}", TAG_ALPHABET, 7, 3),
    # trailing_text=False: the output ends with its last call (xgrammar's stop_after_first with max_calls=1)
    "stop-after-first": (lambda: G.tags([T("<a", r"b+", ">")], triggers=["<a"], max_calls=1, trailing_text=False),
                         rf"{FREE}(?:<ab+>)?", TAG_ALPHABET, 6, 3),
    "ends-with-a-call": (lambda: G.tags([T("<a", r"b+", ">")], triggers=["<a"], min_calls=1, trailing_text=False),
                         rf"(?:{FREE}<ab+>)+", TAG_ALPHABET, 6, 4),
    # reasoning with text delimiters: the thoughts end at the first end marker
    "reasoning-text": (lambda: G.reasoning(r"ab|c", begin="<", end=">"), r"<[^>§]*>[ \t\r\n]*(?:ab|c)", TAG_ALPHABET, 6, 3),
    # reasoning ending with a special token, its begin already in the prompt
    "reasoning-special": (lambda: G.reasoning("a+", begin=None, end="<|t|>"), r"[^§]*§[ \t\r\n]*a+",
                          TAG_ALPHABET, 6, 2),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_tags_mask_equals_bruteforce(name):
    make, pattern, alphabet, n, slack = CASES[name]
    check(make(), o_regex(pattern), alphabet, n, slack, seed=len(name), pieces=TAG_PIECES)


def test_parse_output_tiny():
    vocab = tiny_vocab()
    g = G.tags([T("<a", r"b+", ">", name="B")], triggers=["<a"])
    ids = [PIECES.index(p) for p in ["c", "<", "ab", "b", ">", " ", "<", "ab", ">", "ba"]]
    m = sg.compile(g, vocab).matcher()
    assert m.advance_many(ids) == len(ids) and m.is_accepting()
    out = parse_output(g, vocab, ids)
    assert [(c.name, c.arguments) for c in out.tool_calls] == [("B", "bb"), ("B", "b")]
    assert out.segments[0] == "c" and out.segments[2] == " " and out.content == "c ba"
    # the special token is a trigger; its text spelled by ordinary tokens is free text
    g = G.tags([T("<|t|>", r"a|b", "")])
    ids = [PIECES.index("<"), PIECES.index("|t|"), PIECES.index(">"), len(PIECES), PIECES.index("a")]
    out = parse_output(g, vocab, ids)
    assert out.content == "<|t|>" and [c.arguments for c in out.tool_calls] == ["a"]
    assert texts()[len(PIECES)] == SPECIAL


def test_tags_errors():
    with pytest.raises(sg.GrammarError, match="starts with none of the triggers"):
        G.tags([T("<b", "x", ">")], triggers=["<a"])
    with pytest.raises(sg.GrammarError, match="at least one"):
        G.tags([])
    with pytest.raises(TypeError):
        G.tags(["<a"])
    with pytest.raises(sg.GrammarError, match="regular"):
        G.tags([T("<a", "x", ">")], free_text=G.from_lark('start: "a" start | "b"\n'))

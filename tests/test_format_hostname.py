"""``format: hostname`` / ``idn-hostname``: every name the automaton takes is valid (against a
reference written from RFC 1123 / 5890 and against the ``idna`` package that ``jsonschema`` uses),
and the names it takes are exactly the valid ones of the documented shapes."""
import json
import random

import idna
import jsonschema
import pytest

import numpy as np

import structgen as sg
from structgen.automaton.build import build_dfa
from structgen.frontends.json_schema import formats

from .helpers import brute_mask_check, load_vocab, sample, structure_bias


def valid_hostname(name: str, separators: str = ".") -> bool:
    """RFC 1123 host name (no trailing dot), A-labels excluded: the reference for the DFA."""
    for sep in separators[1:]:
        name = name.replace(sep, ".")
    if not 1 <= len(name) <= 253:
        return False
    for label in name.split("."):
        if not 1 <= len(label) <= 63 or label[0] == "-" or label[-1] == "-" or label[2:4] == "--":
            return False
        if any(not (c.isascii() and (c.isalnum() or c == "-")) for c in label):
            return False
    return True


def fits_shapes(name: str, separators: str = ".") -> bool:
    for sep in separators[1:]:
        name = name.replace(sep, ".")
    labels = name.split(".")
    longest = max(map(len, labels))
    return any(len(labels) <= n and longest <= c for n, c in formats.HOSTNAME_SHAPES)


@pytest.fixture(scope="module")
def dfas():
    return {idn: build_dfa(formats.format_ir("idn-hostname" if idn else "hostname")) for idn in (False, True)}


def test_shapes_fit_in_253_characters():
    for n, longest in formats.HOSTNAME_SHAPES:
        assert n * (longest + 1) - 1 <= 253
        assert (n + 1) * (longest + 1) - 1 > 253 or longest == 63   # no shape is needlessly short


@pytest.mark.parametrize("idn", [False, True])
def test_short_strings_against_the_reference(dfas, idn):
    seps = formats.IDN_SEPARATORS if idn else "."
    alphabet = "aZ0-_" + seps + ("．" if not idn else "")
    rng = random.Random(7 + idn)
    seen = 0
    for _ in range(20000):
        s = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 9)))
        got = dfas[idn].fullmatch(s.encode())
        want = valid_hostname(s, seps)
        assert got == want, (s, got)
        seen += want
    assert seen > 500   # the reference is not trivially false


@pytest.mark.parametrize("idn", [False, True])
def test_long_names_are_valid_and_of_the_shapes(dfas, idn):
    seps = formats.IDN_SEPARATORS if idn else "."
    rng = random.Random(11 + idn)
    taken = left_out = 0
    # at the edges of each shape: n labels of the longest length, one more label, one longer label
    edges = [[c] * n for n, c in formats.HOSTNAME_SHAPES]
    edges += [[c] * (n + 1) for n, c in formats.HOSTNAME_SHAPES]
    edges += [[c] * (n - 1) + [c + 1] for n, c in formats.HOSTNAME_SHAPES]
    for i in range(3000 + len(edges)):
        if i < len(edges):
            lengths = edges[i]
        else:
            n = rng.choice([1, 2, 3, 4, 5, 8, 9, 16, 17, 31, 32, 63, 64, 127, 128])
            lengths = [rng.randint(1, rng.choice([1, 3, 7, 14, 30, 62, 63, 64])) for _ in range(n)]
        labels = ["".join(rng.choice("ab0-") for _ in range(k)) for k in lengths]
        labels = [("x" + lab[1:-1] + "y")[:len(lab)] if len(lab) > 1 else "z" for lab in labels]
        name = labels[0] + "".join(rng.choice(seps) + lab for lab in labels[1:])
        got = dfas[idn].fullmatch(name.encode())
        want = valid_hostname(name, seps) and fits_shapes(name, seps)
        assert got == want, (len(name), lengths, got)
        if got:   # sound against the oracle jsonschema uses for idn-hostname
            assert idna.encode(name)
        taken += got
        left_out += valid_hostname(name, seps) and not got
    assert taken > 300 and left_out > 0


def test_idna_agrees_on_ascii_names_of_the_shapes(dfas):
    rng = random.Random(3)
    for _ in range(3000):
        s = "".join(rng.choice("ab-.。") for _ in range(rng.randint(1, 12)))
        try:
            ok = idna.encode(s) is not None and not s.endswith((".", "。"))
        except idna.IDNAError:
            ok = False
        assert dfas[True].fullmatch(s.encode()) == ok, s


@pytest.mark.parametrize("fmt", ["hostname", "idn-hostname"])
def test_sampled_instances_validate_and_masks_match_brute_force(fmt):
    seps = formats.IDN_SEPARATORS if fmt == "idn-hostname" else "."
    schema = {"type": "string", "format": fmt}
    checker = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())
    vocab = load_vocab("llama3")
    cg = sg.compile(sg.Grammar.from_json_schema(schema), vocab)
    rng = np.random.default_rng(1)
    bias = structure_bias(vocab, 3.0)
    names = [sample(cg, vocab, rng, bias) for _ in range(30)]
    names = [json.loads(t) for t in names if t is not None]
    assert len(names) >= 20
    for name in names:
        assert valid_hostname(name, seps) and checker.is_valid(name), name
    # every prefix of a few instances: the mask equals what advance takes, on a byte vocabulary
    small = sg.Vocabulary.from_bytes([bytes([c]) for c in range(32, 127)] + ["。".encode()] + [b""],
                                     eos_ids=[96])
    scg = sg.compile(sg.Grammar.from_json_schema(schema), small)
    for text in ['"a-b.c0"', '"x" ', '"ab--"', '"a。b"']:
        m = scg.matcher()
        for t in [95 if ch == "。" else ord(ch) - 32 for ch in text]:
            brute_mask_check(m, small)
            if not m.advance(int(t)):
                break

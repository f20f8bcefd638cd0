"""Grammar engine benchmark: compile time and per-token mask time (p50/p99/max) on the llama3
vocabulary, with llguidance and xgrammar side by side when installed (same grammar text, same
token sequences).

    python benchmarks/bench_grammar.py [--corpus NAMES] [--walks 4] [--tokens 96]   # the corpus
    python benchmarks/bench_grammar.py --grammars json,sql,c_subset [--repeat 3]    # shipped grammars

The corpus (default) is the public grammars vendored in ``benchmarks/grammars/`` (llama.cpp's GBNF,
lark's grammars, xgrammar's JSON EBNF; sources and licences in ``benchmarks/grammars/LICENSES.md``)
plus two spellings of a quoted string (right-recursive and starred).  Per grammar: compile time,
then random-logit walks -- at every step structgen's mask is computed and a token is drawn
uniformly among the allowed ones (EOS once accepting, with probability 1/8 per step) -- replayed
token by token in llguidance and xgrammar, each timing its own masks.  A grammar an engine cannot
load is reported as refused; a peer that rejects a token of a walk is counted (``rejects``).
Prints a table and writes ``benchmarks/results/bench_grammar.json``.

The shipped-grammar mode (``--grammars``) times fixed sentences instead:

structgen's mask caches are per compiled grammar, so the first pass over the
sentences ("cold") includes filling them; later passes are reported as "warm".  A Lark
grammar's cache is also filled ahead of use for up to 50 ms in all
(``structgen.cfg.engine.PREFILL_SECONDS``): the first 15 ms inside compile (counted in its
time), the rest, if any, by a background thread that the first cold pass races; a second cold
pass (on a second compile) starts once that thread has finished.
Compile time is the first compile in the process (Lark loading and lexer DFAs come
from the disk cache when it holds them: run with ``STRUCTGEN_CACHE_DIR=`` to
disable it, or point it at an empty folder for a cold start) and a second compile
of the same text in the same process.
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

SENTENCES = {
    "json": [
        '{"name": "Alice Smith", "age": 31, "email": "alice@example.com", "tags": ["admin", "dev"], '
        '"address": {"street": "1 Main St", "city": "Springfield", "zip": "12345"}, "active": true, '
        '"score": 97.5, "manager": null}',
        '[{"id": 1, "values": [1.5, -2, 3e10], "label": "first\\nline"}, {"id": 2, "values": [], '
        '"label": "caf\\u00e9", "meta": {"k": [true, false, null]}}]',
        '{"query": "SELECT * FROM t", "results": [{"x": 0, "y": 0.25}, {"x": 1, "y": 0.5}], "count": 2}',
    ],
    "sql": [
        "SELECT a.name, COUNT(*) AS n FROM users AS a JOIN orders o ON a.id = o.user_id "
        "WHERE a.age >= 18 AND o.total > 100.5 GROUP BY a.name ORDER BY n DESC LIMIT 10;",
        "SELECT DISTINCT city, AVG(price) FROM listings WHERE city IN ('Paris', 'Rome') "
        "AND price BETWEEN 10 AND 500 GROUP BY city HAVING AVG(price) > 50 ORDER BY city;",
        "SELECT id, title FROM books WHERE author LIKE 'A%' OR year IS NOT NULL LIMIT 5",
    ],
    "c_subset": [
        "int add(int a, int b) {\n    return a + b;\n}",
        "int main(int argc, char **argv) {\n    // count the arguments\n    int total = 0;\n"
        "    for (i = 0; i < argc; i++) {\n        if (argv[i][0] == '-') continue;\n"
        "        total += add(total, i * 2);\n    }\n    while (total > 100) total = total / 2;\n"
        "    return total;\n}",
        "float mean(float *xs, int n) {\n    float s = 0.0;\n    int i = 0;\n"
        "    while (i < n) { s += xs[i]; i++; }\n    if (n == 0) { return 0.0; } else { return s / n; }\n}",
    ],
}


def pct(xs):
    a = np.asarray(xs) * 1e6
    return f"p50 {np.percentile(a, 50):7.1f} us  p99 {np.percentile(a, 99):8.1f} us  max {a.max():8.1f} us"


def bench_structgen(text, vocab, seqs, repeat):
    import structgen as sg

    def one_pass(m, check=True):
        times = []
        for ids in seqs:
            m.reset()
            for t in ids:
                t0 = time.perf_counter()
                w = m.mask_words()
                times.append(time.perf_counter() - t0)
                if check:
                    assert (w[t >> 5] >> (t & 31)) & 1, "structgen masked a token of the sentence"
                assert m.advance(t)
            assert m.is_accepting()
        return times

    t0 = time.perf_counter()
    cg = sg.compile(sg.Grammar.from_lark(text), vocab, cache=False)
    compile_s = time.perf_counter() - t0
    background = cg.engine.prefill_thread is not None
    m = cg.matcher()
    t0 = time.perf_counter()
    m.mask_words()
    ttfm = time.perf_counter() - t0
    passes = [one_pass(m) for _ in range(repeat)]  # the first races the background prefill
    t0 = time.perf_counter()
    again = sg.compile(sg.Grammar.from_lark(text), vocab, cache=False)
    recompile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    if again.engine.prefill_thread is not None:
        again.engine.prefill_thread.join()
    prefill_s = time.perf_counter() - t0
    after = one_pass(again.matcher(), check=False)
    return compile_s, recompile_s, ttfm, passes, (background, prefill_s, after)


def bench_llguidance(text, tok, seqs, repeat):
    import llguidance
    import llguidance.hf
    import llguidance.numpy as lln

    lltok = llguidance.hf.from_tokenizer(tok)
    t0 = time.perf_counter()
    grammar = llguidance.LLMatcher.grammar_from_lark(text)
    m = llguidance.LLMatcher(lltok, grammar)
    compile_s = time.perf_counter() - t0
    if m.is_error():
        raise RuntimeError(m.get_error())
    bm = lln.allocate_token_bitmask(1, lltok.vocab_size)
    passes = []
    for _ in range(repeat):
        times = []
        for ids in seqs:
            m.reset()
            for t in ids:
                t0 = time.perf_counter()
                lln.fill_next_token_bitmask(m, bm, 0)
                times.append(time.perf_counter() - t0)
                if not m.consume_token(t):
                    raise RuntimeError(f"llguidance rejected a token: {m.get_error()}")
        passes.append(times)
    return compile_s, passes


def bench_xgrammar(text, tok, seqs, repeat, width):
    import torch
    import xgrammar as xgr

    info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=width)
    compiler = xgr.GrammarCompiler(info, cache_enabled=False)
    t0 = time.perf_counter()
    cg = compiler.compile_lark(text) if hasattr(compiler, "compile_lark") else None
    compile_s = time.perf_counter() - t0
    bm = xgr.allocate_token_bitmask(1, info.vocab_size)
    passes = []
    for _ in range(repeat):
        times = []
        for ids in seqs:
            m = xgr.GrammarMatcher(cg)
            for t in ids:
                t0 = time.perf_counter()
                m.fill_next_token_bitmask(bm)
                times.append(time.perf_counter() - t0)
                if not m.accept_token(t):
                    raise RuntimeError("xgrammar rejected a token")
        passes.append(times)
    return compile_s, passes



HERE = os.path.dirname(os.path.abspath(__file__))
GRAMMARS = os.path.join(HERE, "grammars")

# name -> (file in benchmarks/grammars or inline text, syntax, start rule)
CORPUS = {
    "quoted-rr": ('root ::= "\\"" s "\\""\ns ::= "" | [^"\\\\] s\n', "gbnf", "root"),
    "quoted-star": ('root ::= "\\"" [^"\\\\]* "\\""\n', "gbnf", "root"),
    "llama-json": ("llama_json.gbnf", "gbnf", "root"),
    "llama-c": ("llama_c.gbnf", "gbnf", "root"),
    "llama-chess": ("llama_chess.gbnf", "gbnf", "root"),
    "llama-list": ("llama_list.gbnf", "gbnf", "root"),
    "llama-arithmetic": ("llama_arithmetic.gbnf", "gbnf", "root"),
    "llama-name-age": ("llama_name_age.gbnf", "gbnf", "root"),
    "xgrammar-json": ("xgrammar_json.ebnf", "gbnf", "root"),
    "lark-csv": ("lark_csv.lark", "lark", "start"),
    "lark-json": ("lark_json.lark", "lark", "start"),
    "lark-lark": ("lark_lark.lark", "lark", "start"),
    "lark-python": ("lark_python.lark", "lark", "file_input",
                    {"postlex": {"nl_type": "_NEWLINE", "open_paren_types": ("LPAR", "LSQB", "LBRACE"),
                                 "close_paren_types": ("RPAR", "RSQB", "RBRACE")}}),
    # Lark's basic lexer (what its lalr parser lexes with): longest matches, keywords never names
    "lark-csv-basic": ("lark_csv.lark", "lark", "start", {"lexer": "basic"}),
    # Lark's Earley default lexer: every rule terminal its longest match, the parser picks among them
    "lark-csv-dynamic": ("lark_csv.lark", "lark", "start", {"lexer": "dynamic"}),
    "lark-lark-dynamic": ("lark_lark.lark", "lark", "start", {"lexer": "dynamic"}),
    "lark-python-basic": ("lark_python.lark", "lark", "file_input",
                          {"postlex": {"nl_type": "_NEWLINE", "open_paren_types": ("LPAR", "LSQB", "LBRACE"),
                                       "close_paren_types": ("RPAR", "RSQB", "RBRACE")}, "lexer": "basic"}),
    "lark-verilog": ("lark_verilog.lark", "lark", "start"),
    # Lark's Indenter compiled in (peers: no indentation post-lexer)
    "lark-indented-tree": ("lark_indented_tree.lark", "lark", "start", {"postlex": {"nl_type": "_NL"}}),
    "mini-python-basic": ("mini_python.lark", "lark", "start",
                          {"postlex": {"nl_type": "_NEWLINE", "open_paren_types": ("LPAR", "LSQB"),
                                       "close_paren_types": ("RPAR", "RSQB")}, "lexer": "basic"}),
}


def lark_options(opts):
    """``Grammar.from_lark`` keywords of a corpus entry's options."""
    import structgen as sg

    opts = dict(opts or {})
    if "postlex" in opts:
        opts["postlex"] = sg.Indenter(**opts["postlex"])
    return opts


def corpus_text(name):
    """``(text, syntax, start, options)`` of a corpus entry."""
    src, syntax, start, *opts = CORPUS[name]
    path = os.path.join(GRAMMARS, src)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            src = f.read()
    return src, syntax, start, (opts[0] if opts else None)


def stats(xs):
    if not xs:
        return None
    a = np.asarray(xs) * 1e6
    return {"p50_us": float(np.percentile(a, 50)), "p99_us": float(np.percentile(a, 99)), "max_us": float(a.max()),
            "n": int(a.shape[0])}


def walk_structgen(text, syntax, start, vocab, walks, tokens, seed, opts=None):
    """Compile, then sample ``walks`` random-logit walks; returns (record, token sequences).
    The compile time includes the cache prefill done inside ``sg.compile`` (up to 15 ms by
    default); ``compile_noprefill_ms`` is a second compile with ``prefill=0``, which the peers'
    compile times (they fill nothing ahead) compare with."""
    import structgen as sg

    def read():
        return (sg.Grammar.from_gbnf(text, start=start) if syntax == "gbnf"
                else sg.Grammar.from_lark(text, start=start, **lark_options(opts)))

    t0 = time.perf_counter()
    cg = sg.compile(read(), vocab, cache=False)
    compile_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    sg.compile(read(), vocab, cache=False, prefill=0)
    bare_s = time.perf_counter() - t0
    rng = np.random.default_rng(seed)
    eos = set(int(e) for e in vocab.eos_ids)
    bm = sg.allocate_bitmask(1, vocab.logits_width)
    masks, advances, seqs = [], [], []
    for _ in range(walks):
        m = cg.matcher()
        seq = []
        for _ in range(tokens):
            t1 = time.perf_counter()
            m.fill_bitmask(bm, 0)
            masks.append(time.perf_counter() - t1)
            w = np.ascontiguousarray(bm[0].numpy() if hasattr(bm, "numpy") else bm[0])
            allowed = np.flatnonzero(np.unpackbits(w.view(np.uint8), bitorder="little"))
            allowed = allowed[allowed < vocab.logits_width]
            normal = np.array([t for t in allowed.tolist() if t not in eos], np.int64) if m.is_accepting() else allowed
            if normal.size == 0 or (m.is_accepting() and rng.random() < 1 / 8):
                break
            t = int(normal[rng.integers(normal.size)])
            t1 = time.perf_counter()
            ok = m.advance(t)
            advances.append(time.perf_counter() - t1)
            assert ok, "structgen refused a token of its own mask"
            seq.append(t)
        seqs.append(seq)
    rec = {"compile_ms": compile_s * 1e3, "compile_noprefill_ms": bare_s * 1e3, "mask": stats(masks),
           "advance": stats(advances),
           "tokens": sum(len(q) for q in seqs)}
    return rec, seqs


BUDGET_S = 15.0  # per engine and grammar: walks started after it are skipped


def replay(make, seqs):
    """``make()`` -> (fill(), consume(t) -> bool); mask times over the walks, and rejects."""
    masks, rejects = [], 0
    stop = time.perf_counter() + BUDGET_S
    for seq in seqs:
        if time.perf_counter() > stop:  # a peer that takes seconds per mask: its first walks only
            break
        fill, consume = make()
        for t in seq:
            t1 = time.perf_counter()
            fill()
            masks.append(time.perf_counter() - t1)
            if not consume(t):
                rejects += 1
                break
    return {"mask": stats(masks), "rejects": rejects}


def peer_llguidance(text, syntax, start, tok, width, eos, seqs):
    import llguidance
    import llguidance.hf
    import llguidance.numpy as lln

    lltok = getattr(peer_llguidance, "tok", None)
    if lltok is None:
        lltok = peer_llguidance.tok = llguidance.hf.from_tokenizer(tok, n_vocab=width, eos_token=eos)
    t0 = time.perf_counter()
    if syntax == "gbnf":  # llguidance's own converter (counted in its compile time)
        from llguidance.gbnf_to_lark import gbnf_to_lark

        text = gbnf_to_lark(text)
    elif start != "start":
        text = f"start: {start}\n" + text
    grammar = llguidance.LLMatcher.grammar_from_lark(text)
    first = llguidance.LLMatcher(lltok, grammar, log_level=0)
    compile_s = time.perf_counter() - t0
    if first.is_error():
        raise RuntimeError(first.get_error())
    bm = lln.allocate_token_bitmask(1, lltok.vocab_size)
    box = [first]

    def make():
        m = box.pop() if box else llguidance.LLMatcher(lltok, grammar, log_level=0)
        return (lambda: lln.fill_next_token_bitmask(m, bm, 0)), (lambda t: bool(m.consume_token(t)) and not m.is_error())

    rec = replay(make, seqs)
    rec["compile_ms"] = compile_s * 1e3
    return rec


def peer_xgrammar(text, syntax, start, tok, width, eos, seqs):
    import xgrammar as xgr

    comp = getattr(peer_xgrammar, "comp", None)
    if comp is None:
        info = xgr.TokenizerInfo.from_huggingface(tok, vocab_size=width, stop_token_ids=[eos])
        comp = peer_xgrammar.comp = xgr.GrammarCompiler(info, max_threads=1, cache_enabled=False)
    t0 = time.perf_counter()
    if syntax == "gbnf":
        cg = comp.compile_grammar(text, root_rule_name=start)
    else:
        cg = comp.compile_grammar(xgr.Grammar.from_lark(text if start == "start" else f"start: {start}\n" + text))
    compile_s = time.perf_counter() - t0
    bm = xgr.allocate_token_bitmask(1, width)

    def make():
        m = xgr.GrammarMatcher(cg)
        return (lambda: m.fill_next_token_bitmask(bm)), (lambda t: bool(m.accept_token(t)))

    rec = replay(make, seqs)
    rec["compile_ms"] = compile_s * 1e3
    return rec


def _fmt(rec):
    if rec is None:
        return "-"
    if "refused" in rec:
        return "refused"
    m = rec["mask"] or {}
    return (f"{rec['compile_ms']:8.1f} ms {m.get('p50_us', 0):8.1f} {m.get('p99_us', 0):9.1f} {m.get('max_us', 0):9.1f}"
            + (f"  compile with prefill=0: {rec['compile_noprefill_ms']:.1f} ms" if "compile_noprefill_ms" in rec else "")
            + (f"  rejects {rec['rejects']}" if rec.get("rejects") else ""))


def run_corpus(args, vocab, tok):
    names = list(CORPUS) if args.corpus == "all" else args.corpus.split(",")
    eos = int(vocab.eos_ids[0])
    out = {"tokenizer": args.tokenizer, "walks": args.walks, "tokens": args.tokens, "seed": args.seed, "grammars": {}}
    print(f"\n{'grammar':<17} {'engine':<11} {'compile':>11} {'p50 us':>8} {'p99 us':>9} {'max us':>9}")
    for name in names:
        text, syntax, start, opts = corpus_text(name)
        res = {}
        try:
            rec, seqs = walk_structgen(text, syntax, start, vocab, args.walks, args.tokens, args.seed, opts)
        except Exception as e:  # refused: report it, go on
            rec, seqs = {"refused": f"{type(e).__name__}: {str(e)[:200]}"}, None
        res["structgen"] = rec
        for label, fn in (("llguidance", peer_llguidance), ("xgrammar", peer_xgrammar)):
            if seqs is None or label not in args.peers:
                continue
            try:
                res[label] = fn(text, syntax, start, tok, vocab.logits_width, eos, seqs)
            except ImportError:
                continue
            except Exception as e:
                res[label] = {"refused": f"{type(e).__name__}: {str(e)[:200]}"}
        out["grammars"][name] = res
        for label, rec in res.items():
            line = _fmt(rec)
            print(f"{name:<17} {label:<11} {line}" + (f"  ({rec['refused'][:90]})" if "refused" in rec else ""))
        sys.stdout.flush()
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    path = args.out or os.path.join(HERE, "results", "bench_grammar.json")
    with open(path, "w") as f:
        json.dump(out, f, indent=1)
    print(f"\nwrote {path}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokenizer", default="llama3")
    ap.add_argument("--grammars", default=None, help="shipped grammars with fixed sentences (json,sql,c_subset)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--corpus", default="all", help="comma-separated names of CORPUS, or all")
    ap.add_argument("--out", default=None, help="results file (default: benchmarks/results/bench_grammar.json)")
    ap.add_argument("--walks", type=int, default=4)
    ap.add_argument("--tokens", type=int, default=96)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--peers", default="llguidance,xgrammar")
    args = ap.parse_args()

    from structgen import grammars
    from tests.helpers import load_tokenizer, load_vocab

    vocab = load_vocab(args.tokenizer)
    t0 = time.perf_counter()
    _ = vocab.trie
    print(f"vocabulary {args.tokenizer}: {vocab.logits_width} tokens, trie {time.perf_counter() - t0:.2f} s (once per vocabulary)")
    tok = load_tokenizer(args.tokenizer)
    # Process warm-up (Lark import, Numba kernels loaded from cache), so the first grammar's
    # compile time is not charged with one-time costs.
    import structgen as sg

    warm = sg.compile(sg.Grammar.from_lark('start: "a" /[0-9]+/ "b"?'), vocab, cache=False).matcher()
    warm.fill_bitmask(sg.allocate_bitmask(1, vocab.logits_width), 0)
    # as a serving process would (and structgen.bench.maskbench does): the objects loaded so far
    # (tokenizers, torch) leave the garbage collector's generations, so that no full collection
    # over them lands inside a timed compile
    gc.collect()
    gc.freeze()
    if args.grammars is None:
        return run_corpus(args, vocab, tok)
    for name in args.grammars.split(","):
        text = grammars.load(name)
        seqs = [vocab.encode(s) for s in SENTENCES[name]]
        n = sum(len(s) for s in seqs)
        print(f"\n== {name} grammar: {len(seqs)} sentences, {n} tokens, {args.repeat} passes")
        comp, recomp, ttfm, passes, (background, prefill_s, after) = bench_structgen(text, vocab, seqs, args.repeat)
        print(f"structgen   compile {comp * 1e3:7.1f} ms  again in-process {recomp * 1e3:5.1f} ms  "
              f"first mask {ttfm * 1e3:6.1f} ms")
        print(f"  cold pass  {pct(passes[0])}   (right after compile, "
              f"{'racing the background prefill' if background else 'prefill done within compile'})")
        print(f"  cold pass  {pct(after)}   (second compile, prefill done {prefill_s * 1e3:.0f} ms after it)")
        if len(passes) > 1:
            print(f"  warm       {pct([x for p in passes[1:] for x in p])}")
        for label, fn in (("llguidance", lambda: bench_llguidance(text, tok, seqs, args.repeat)),
                          ("xgrammar", lambda: bench_xgrammar(text, tok, seqs, args.repeat, vocab.logits_width))):
            try:
                comp, passes = fn()
            except ImportError as e:
                print(f"{label:<11} not installed ({e})")
                continue
            except Exception as e:  # a peer that cannot read the grammar or rejects a token
                print(f"{label:<11} failed: {type(e).__name__}: {str(e)[:200]}")
                continue
            print(f"{label:<11} compile {comp * 1e3:7.1f} ms")
            print(f"  cold pass  {pct(passes[0])}")
            if len(passes) > 1:
                print(f"  warm       {pct([x for p in passes[1:] for x in p])}")


if __name__ == "__main__":
    main()

"""Lark grammars -> :class:`~structgen.cfg.grammar.CFG`.

Lark's own loader reads the text (rules, string/regex terminals, ``%import``,
``%ignore``, ``?``/``_``/``*``/``+``/``~``/``[]``, templates), so every construct
is expanded exactly as Lark expands it; we then translate its flat rules and
terminal patterns.  Lark errors become :class:`GrammarError` with line/column.

Semantics: those of :mod:`structgen.cfg.grammar` — Lark's Earley parser with
``lexer="dynamic_complete"`` (every lexing, ``%ignore`` between lexemes).
Terminal priorities only rank parses, so they do not change the language and
are ignored.  ``%declare``d terminals (no pattern) raise :class:`Unsupported`.
"""
from __future__ import annotations

import re
import threading

from ..errors import GrammarError, RegexError, Unsupported
from . import diskcache
from .grammar import CFG, literal_terminal
from .terminals import regex_to_ir


def _line_col_of(text: str, name: str, definition: bool = False):
    """(line, column) of the first definition (``name:``) or use of ``name``."""
    pat = re.compile(r"^\s*[?!]?" + re.escape(name) + r"\b(\.\d+)?\s*(\{[^}]*\})?\s*:" if definition
                     else r"(?<![\w.])" + re.escape(name) + r"(?![\w])", re.M)
    m = pat.search(text)
    if not m:
        return None, None
    pos = m.start() if not definition else m.start() + len(m.group(0)) - len(m.group(0).lstrip())
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


_DEFINITION = re.compile(r"^([ \t]*[?!]?)(\w+)(\.\d+)?[ \t]*(\{[^}\n]*\})?[ \t]*:", re.M)


def _definitions(text: str) -> dict:
    """name -> (line, column) of its first definition (``name:``), in one pass over ``text``."""
    out: dict = {}
    line, last = 1, 0
    for m in _DEFINITION.finditer(text):
        name = m.group(2)
        if name in out:
            continue
        pos = m.start(1) + len(m.group(1)) - len(m.group(1).lstrip())  # at the ``?``/``!`` if any
        line += text.count("\n", last, pos)
        last = pos
        out[name] = (line, pos - (text.rfind("\n", 0, pos) + 1) + 1)
    return out


def _bad_regex_position(text: str, default=(1, 1)):
    """(line, column) of the first /regex/ literal that Python's ``re`` rejects (else ``default``)."""
    for m in re.finditer(r"/((?:[^/\\\n]|\\.)+)/[imslux]*", text):
        try:
            re.compile(m.group(1))
        except re.error:
            line = text.count("\n", 0, m.start()) + 1
            return line, m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
    return default


def _wrap_lark_error(e: Exception, text: str) -> GrammarError:
    msg = str(e).strip().split("\n")[0]
    line, col = getattr(e, "line", None), getattr(e, "column", None)
    if line is None or line < 0:
        m = re.search(r"at line (\d+) column (\d+)", str(e))
        if m:
            line, col = int(m.group(1)), int(m.group(2))
    if line is None or line < 0:
        m = re.search(r"Rule '([^']+)' used but not defined \(in rule ([^)]+)\)", msg)
        if m:
            line, col = _line_col_of(text, m.group(1))
        else:
            m = re.search(r"(?:Terminal|Rule|rule|terminal|NonTerminal\(|Terminal\()\s*'([^']+)'", msg)
            if m:
                line, col = _line_col_of(text, m.group(1))
    if line is None or line < 0:
        line, col = 1, 1
    return GrammarError(f"Lark grammar: {msg}", line, col)


def lark_to_cfg(text: str, start: str = "start") -> CFG:
    """Translate a Lark grammar (its ``start`` rule) into a :class:`CFG`.

    Cached per (text, start) in memory and on disk (:mod:`structgen.cfg.diskcache`):
    a repeat costs a dict lookup, a new process a file read."""

    key = (text, start)
    hit = _CACHE.get(key)
    if hit is not None:
        return CFG(hit.start, dict(hit.rules), dict(hit.terminals), list(hit.ignore), dict(hit.positions))
    import lark

    dkey = "\0".join((lark.__version__, start, text)).encode("utf-8", "surrogatepass")
    cfg = diskcache.load("lark", dkey)
    if not isinstance(cfg, CFG):
        cfg = _lark_to_cfg(text, start)
        diskcache.store("lark", dkey, cfg)
    with _LOCK:
        if len(_CACHE) >= 64:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = cfg
    return CFG(cfg.start, dict(cfg.rules), dict(cfg.terminals), list(cfg.ignore), dict(cfg.positions))


_CACHE: dict = {}  # (text, start) -> CFG, the last 64 grammars (terminal IR nodes are immutable)
_LOCK = threading.Lock()


def _lark_to_cfg(text: str, start: str) -> CFG:
    from lark.exceptions import LarkError
    from lark.load_grammar import load_grammar

    # Lark's grammar loader and EBNF->BNF compiler, exactly what Lark(...) runs before
    # building its own parser and lexer (which we do not need: half of its load time)
    try:
        grammar, _ = load_grammar(text, "<string>", None, False)
        terminal_defs, rule_defs, ignore_names = grammar.compile([start], set())
    except LarkError as e:
        raise _wrap_lark_error(e, text) from None
    except Exception as e:  # regex compile errors from the `re`/`regex` module
        raise GrammarError(f"Lark grammar: bad regex: {e}", *_bad_regex_position(text)) from None

    defined = _definitions(text)
    positions = {}
    rules: dict = {}
    for r in rule_defs:
        lhs = r.origin.name
        lhs = str(lhs)
        rules.setdefault(lhs, []).append(tuple(str(s.name) for s in r.expansion))
        if lhs not in positions:
            lc = defined.get(lhs.lstrip("?"))
            if lc is not None:
                positions[lhs] = lc
    terminals = {}
    for t in terminal_defs:
        name = str(t.name)
        lc = defined.get(name, (None, None))
        if lc[0] is not None:
            positions[name] = lc
        pat = t.pattern
        flags = set(pat.flags)
        where = f"terminal {name}" + (f" at line {lc[0]}, column {lc[1]}" if lc[0] else "")
        if pat.type == "str":
            if flags - {"i"}:
                raise Unsupported(f"string terminal flags {sorted(flags)}", where)
            terminals[name] = literal_terminal(pat.value, "i" in flags)
        else:
            bad = flags - {"i", "s", "m", "x", "u"}
            if bad:
                raise Unsupported(f"regex flags {sorted(bad)}", where)
            body = pat.value
            fl = "".join(sorted(f for f in flags if f in "isx"))
            regex = f"(?{fl}:{body})" if fl else body
            try:
                terminals[name] = regex_to_ir(regex, where)
            except RegexError as e:
                at = _bad_regex_position(text, default=lc if lc[0] else (1, 1))
                raise GrammarError(f"bad regex in {where}: {e.message}", *at) from None
    declared = set()
    for alts in rules.values():
        for rhs in alts:
            for s in rhs:
                if s not in rules and s not in terminals:
                    declared.add(s)
    if declared:
        n = sorted(declared)[0]
        raise Unsupported(f"terminal {n} has no pattern (%declare)", f"line {_line_col_of(text, n)[0]}")
    ignore = [str(n) for n in ignore_names]
    for n in ignore:
        if n not in terminals:
            raise GrammarError(f"%ignore of undefined terminal {n}", *_line_col_of(text, n))
    if start not in rules:
        raise GrammarError(f"start rule {start!r} is not defined", 1, 1)
    return CFG(start, rules, terminals, ignore, positions)

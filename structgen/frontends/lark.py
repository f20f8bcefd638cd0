"""Lark grammars -> :class:`~structgen.cfg.grammar.CFG`.

Lark's own loader reads the text (rules, string/regex terminals, ``%import``,
``%ignore``, ``?``/``_``/``*``/``+``/``~``/``[]``, templates), so every construct
is expanded exactly as Lark expands it; we then translate its flat rules and
terminal patterns.  Lark errors become :class:`GrammarError` with line/column.

Semantics: those of :mod:`structgen.cfg.grammar` — Lark's Earley parser with
``lexer="dynamic_complete"`` (every lexing of rule terminals; each ``%ignore``d lexeme between
them the longest match of its terminal) by default; ``lexer="dynamic"`` makes rule terminals
longest matches too and ``lexer="basic"`` lexes as Lark's basic lexer (:mod:`.lark_lexer`).
A lookahead in a terminal's regex sees the text after the lexeme (ignored text included, to the
end of the input): such terminals are split by :func:`~structgen.frontends.regex.parse_terminal`
and their conditions resolved into the rules by :func:`structgen.cfg.follow.resolve_follow`, after
folding the ignored terminals into the others (the CFG returned then has no ``ignore``).
Terminal priorities only rank parses, so they do not change the language and
are ignored.  ``%declare``d terminals (no pattern) raise :class:`Unsupported`.
"""
from __future__ import annotations

import re

from ..automaton import ir
from ..automaton.build import embedded
from ..errors import GrammarError, OptionError, RegexError, Unsupported
from .. import caching
from ..cfg import diskcache
from ..cfg.compose import fold_ignores
from ..cfg.follow import resolve_follow
from ..cfg.grammar import CFG, literal_terminal
from ..cfg.indent import apply_indenter
from .lark_lexer import basic_lexer_variants, greedy_variants, scan_order
from .regex import parse_regex, parse_terminal


# Lark's common terminals whose regexes use lazy quantifiers or lookbehind (which
# only mean something under "first match" semantics) mapped to the regular
# language they match under Lark's dynamic lexer.
KNOWN_PATTERNS = {
    # '"' content up to the first '"' preceded by an even run of backslashes; no newlines
    '".*?(?<!\\\\)(\\\\\\\\)*?"': r'"(?:[^"\\\n]|\\[^\n])*"',
    # the same followed by an optional "i" (lark.lark's STRING: _STRING "i"?)
    '".*?(?<!\\\\)(\\\\\\\\)*?"(?:i)?': r'"(?:[^"\\\n]|\\[^\n])*"i?',
    # /* ... */ up to the first */
    "/\\*(.|\\n)*?\\*/": r"/\*(?:[^*]|\*+[^*/])*\*+/",
    "/\\*(.|\n)*?\\*/": r"/\*(?:[^*]|\*+[^*/])*\*+/",
    # the same comment with a lookahead inside it (lark's examples/grammars/verilog.lark; the same
    # lexeme lengths as Lark's dynamic_complete on every string of up to 8 characters over "/*a\n")
    "\\/\\*(\\*(?!\\/)|[^*])*\\*\\/": r"/\*(?:[^*]|\*+[^*/])*\*+/",
    # python.lark's STRING: up to the first quote after an even run of backslashes, no newline
    r'''(?i:([ubf]?r?|r[ubf])("(?!"").*?(?<!\\)(\\\\)*?"|'(?!'').*?(?<!\\)(\\\\)*?'))''':
        r'''(?i:([ubf]?r?|r[ubf])("(?!"")(?:[^"\\\n]|\\[^\n])*"|'(?!'')(?:[^'\\\n]|\\[^\n])*'))''',
    # python.lark's LONG_STRING: up to the first unescaped triple quote (runs of one or two quotes
    # inside it are followed by another character)
    r'(?is:([ubf]?r?|r[ubf])(' + '"' * 3 + r'.*?(?<!\\)(\\\\)*?' + '"' * 3 + "|" + "'" * 3
    + r'.*?(?<!\\)(\\\\)*?' + "'" * 3 + '))':
        r'(?is:([ubf]?r?|r[ubf])(' + '"' * 3 + r'(?:[^"\\]|\\.|"{1,2}(?:[^"\\]|\\.))*' + '"' * 3 + '|'
        + "'" * 3 + r"(?:[^'\\]|\\.|'{1,2}(?:[^'\\]|\\.))*" + "'" * 3 + '))',
}


def regex_to_ir(pattern: str, where: str = "", syntax: str = "python") -> ir.Node:
    """The IR of a terminal's regex in ``syntax`` (``"python"``, Lark's; ``"rust"``, llguidance's;
    inline flags such as ``(?i:...)`` allowed in both)."""
    return _terminal_regex(parse_regex, pattern, where, syntax)


def regex_to_variants(pattern: str, where: str = "", syntax: str = "python") -> list:
    """A terminal's regex as :func:`~structgen.frontends.regex.parse_terminal` reads it: ``[(IR of
    lexemes, DFA of the rests allowed after them or None)]`` (lookaheads see past the lexeme)."""
    return _terminal_regex(parse_terminal, pattern, where, syntax)


def _terminal_regex(parse, pattern: str, where: str, syntax: str):
    pattern = KNOWN_PATTERNS.get(pattern, pattern)
    try:
        return parse(pattern, syntax=syntax)
    except Unsupported as e:
        raise Unsupported(f"terminal regex /{pattern}/: {e.message}", where or e.where) from None
    except RegexError as e:
        raise RegexError(f"{e.message} (terminal {where})" if where else e.message, pattern, e.pos) from None



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


#: groups (``(...)``, ``[...]``) nested deeper are refused before Lark's recursive grammar loader
#: runs, so that the verdict does not depend on the interpreter's recursion limit in effect
MAX_NESTING = 150


def _deepest_group(text: str):
    """(depth, line, column): the greatest nesting depth of groups (outside literals) and the
    position of the first parenthesis at that depth."""
    depth, best, at = 0, 0, (1, 1)
    for m in re.finditer(r"""//[^\n]*|/(?!/)(?:\\.|[^/\\\n])+/|"(?:\\.|[^"\\\n])*"|[()\[\]]""", text):
        c = m.group(0)
        if c in "([":
            depth += 1
            if depth > best:
                best, at = depth, _at(text, m.start())
        elif c in ")]":
            depth -= 1
    return (best,) + at


def _bad_regex_position(text: str, default=(1, 1)):
    """(line, column) of the first /regex/ literal that Python's ``re`` rejects (else ``default``)."""
    for m in re.finditer(r"/((?:[^/\\\n]|\\.)+)/[imslux]*", text):
        try:
            re.compile(m.group(1))
        except re.error:
            line = text.count("\n", 0, m.start()) + 1
            return line, m.start() - (text.rfind("\n", 0, m.start()) + 1) + 1
    return default


_LEXEMES = re.compile(r"""(?P<c>//[^\n]*|\#[^\n]*)|(?P<r>/(?!/)(?:\\.|[^/\\\n])+/[imslux]*)|(?P<s>"(?:\\.|[^"\\\n])*"i?)""")


_SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F][0-9a-fA-F]{2}|\\U0000[dD][89a-fA-F][0-9a-fA-F]{2}")


def _at(text: str, pos: int):
    """(line, column) of offset ``pos`` in ``text``, both from 1."""
    return text.count("\n", 0, pos) + 1, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _empty_string_position(text: str):
    """(line, column) of the first empty string literal ``""`` outside comments and regexes."""
    for m in _LEXEMES.finditer(text):
        if m.group("s") in ('""', '""i'):
            return _at(text, m.start())
    return None, None


def _import_position(text: str, filename: str):
    """(line, column) of the ``%import`` statement that names ``filename`` (``a/b.lark`` for
    ``%import a.b...`` or ``.a.b``), else of the first ``%import``, else (None, None)."""
    stem = filename[:-5] if filename.endswith(".lark") else filename
    dotted = stem.replace("\\", "/").replace("/", ".")
    first = None
    for m in re.finditer(r"^[ \t]*%import[ \t]+\.?([\w.]+)", text, re.M):
        pos = m.start() + len(m.group(0)) - len(m.group(0).lstrip())
        first = first if first is not None else pos
        path = m.group(1)
        if path == dotted or path.startswith(dotted + "."):
            return _at(text, pos)
    return _at(text, first) if first is not None else (None, None)


def _wrap_lark_error(e: Exception, text: str) -> GrammarError:
    msg = str(e).strip().split("\n")[0]
    line, col = getattr(e, "line", None), getattr(e, "column", None)
    if (line is None or line < 0) and msg.startswith("Empty terminals are not allowed"):
        line, col = _empty_string_position(text)
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


REGEX_SYNTAXES = ("python", "rust")
LEXERS = ("dynamic", "dynamic_complete", "basic")


def lark_to_cfg(text: str, start: str = "start", import_paths=None, source_path=None,
                regex_syntax: str = "python", indenter=None, lexer: str = "dynamic_complete",
                max_follow_rules: int | None = None) -> CFG:
    """Translate a Lark grammar (its ``start`` rule) into a :class:`CFG`.

    ``regex_syntax``: how ``/.../`` terminals are read -- ``"python"`` (Lark's own: Python's
    ``re``) or ``"rust"`` (the Rust ``regex`` crate's, as llguidance reads them; see
    :mod:`structgen.frontends.regex`).  Lark's loader evaluates the escapes ``\\x \\u \\U``
    before structgen sees a regex; in ``"rust"`` mode they are first rewritten to escapes that
    survive it (:func:`rust_code_point_escapes`), so ``/\\x2A/`` stays a literal ``*``.

    ``%import`` of grammar files as ``lark.Lark`` does it: ``import_paths`` (folders) are searched
    first, then, for a relative import (``%import .csv.start``), the folder of ``source_path``
    (the grammar's own file, when it has one), then Lark's bundled grammars (``common``...).  A
    file not found is a :class:`GrammarError` at the ``%import``.

    Cached per (text, start) in memory and on disk (:mod:`structgen.cfg.diskcache`):
    a repeat costs a dict lookup, a new process a file read.  Grammars read with
    ``import_paths`` or ``source_path`` are not cached (the imported files may change).

    ``indenter``: a :class:`structgen.cfg.indent.Indenter` (Lark's ``postlex=`` indenter), whose
    ``%declare``d indent and dedent terminals are compiled into the grammar
    (:func:`~structgen.cfg.indent.apply_indenter`).  ``lexer``: ``"dynamic_complete"`` (every lexing of rule
    terminals, as Lark's Earley ``dynamic_complete``), ``"dynamic"`` (each rule terminal its longest
    match, as Lark's Earley ``dynamic``: :func:`.lark_lexer.greedy_variants`) or ``"basic"`` (Lark's
    basic lexer: first terminal in Lark's order, longest match, keywords reclassified).
    ``max_follow_rules``: the most rules the lookahead conditions may write
    (:func:`structgen.cfg.follow.resolve_follow`; None: its default)."""
    if lexer not in LEXERS:
        raise OptionError(f"lexer must be one of {', '.join(map(repr, LEXERS))}, not {lexer!r}")
    if indenter is not None and lexer == "dynamic":  # as lark.Lark: a postlex needs a lexer that finishes
        raise OptionError("an indenter (postlex) with lexer='dynamic' is not supported (nor by Lark); "
                          "use lexer='dynamic_complete' or 'basic'")
    if regex_syntax not in REGEX_SYNTAXES:
        raise OptionError(f"regex_syntax must be one of {', '.join(map(repr, REGEX_SYNTAXES))}, not {regex_syntax!r}")
    if regex_syntax == "rust":
        text = rust_code_point_escapes(text)
    if import_paths or source_path:
        if isinstance(import_paths, (str, bytes)) or hasattr(import_paths, "__fspath__"):
            import_paths = [import_paths]
        paths = [str(p) for p in (import_paths or ())]
        return _lark_to_cfg(text, start, paths, str(source_path) if source_path else None, regex_syntax, indenter,
                            lexer, max_follow_rules)
    ikey = (indenter.key() if indenter is not None else None, lexer, max_follow_rules)
    key = (text, start, regex_syntax, ikey)
    hit = _CACHE.get(key)
    if hit is not None:
        return CFG(hit.start, dict(hit.rules), dict(hit.terminals), list(hit.ignore), dict(hit.positions))
    import lark

    dkey = "\0".join((_READ_VERSION, lark.__version__, start, regex_syntax, repr(ikey), text))
    dkey = dkey.encode("utf-8", "surrogatepass")
    cfg = diskcache.load("lark", dkey)
    if not isinstance(cfg, CFG):
        cfg = _lark_to_cfg(text, start, regex_syntax=regex_syntax, indenter=indenter, lexer=lexer,
                           max_follow_rules=max_follow_rules)
        diskcache.store("lark", dkey, cfg)
    _CACHE.put(key, cfg)
    return CFG(cfg.start, dict(cfg.rules), dict(cfg.terminals), list(cfg.ignore), dict(cfg.positions))


#: in the disk cache's key: what the reader writes (2: rules split into prefix chains before the
#: Indenter's columns and the lookahead conditions; 3: ``lexer="dynamic"`` is Lark's greedy one)
_READ_VERSION = "3"
_CACHE = caching.LRU(64, name="lark.cfg")  # (text, start, syntax) -> CFG (terminal IR nodes are immutable)

_CODE_POINT_ESCAPE = re.compile(r"\\(?:([xuU])\{([0-9A-Fa-f]+)\}|x([0-9A-Fa-f]{2})|u([0-9A-Fa-f]{4})|U([0-9A-Fa-f]{8})|(.))",
                                re.S)


def rust_code_point_escapes(text: str) -> str:
    """``text`` with the code-point escapes of its ``/.../`` literals (``\\x2A``, ``\\u{e9}``,
    ``\\U0001F600``) rewritten so that Lark's escape evaluation leaves their meaning as the
    Rust syntax has it: an ASCII letter or digit as itself, a control character as ``\\xHH``
    (Lark makes it the raw character, which stands for itself), any other character escaped
    (``\\*``, ``\\é``).  Everything else is unchanged."""
    def literal(m):
        body = m.group(0)
        if m.group("r") is None:
            return body
        return _CODE_POINT_ESCAPE.sub(escape, body)

    def escape(m):
        if m.group(6) is not None:
            return m.group(0)
        cp = int(next(g for g in m.groups()[1:5] if g is not None), 16)
        if cp > 0x10FFFF or 0xD800 <= cp <= 0xDFFF:
            return m.group(0)  # the regex parser names the bad escape
        ch = chr(cp)
        if ch.isascii() and ch.isalnum():
            return ch
        if cp < 0x20 or cp == 0x7F:
            return f"\\x{cp:02x}"
        return "\\" + ch
    return _LEXEMES.sub(literal, text) if "\\" in text else text


def _lark_to_cfg(text: str, start: str, import_paths=(), source_path=None, regex_syntax: str = "python",
                 indenter=None, lexer: str = "dynamic_complete", max_follow_rules: int | None = None) -> CFG:
    from lark.exceptions import LarkError
    from lark.load_grammar import load_grammar

    # Lark's grammar loader and EBNF->BNF compiler, exactly what Lark(...) runs before
    # building its own parser and lexer (which we do not need: half of its load time)
    depth, line, column = _deepest_group(text)
    if depth > MAX_NESTING:
        raise GrammarError(f"Lark grammar: groups nested {depth} deep (at most {MAX_NESTING})", line, column)
    try:
        grammar = _fast_grammar(text)
        if grammar is None:
            grammar, _ = load_grammar(text, source_path or "<string>", list(import_paths), False)
        terminal_defs, rule_defs, ignore_names = grammar.compile([start], set())
    except LarkError as e:
        raise _wrap_lark_error(e, text) from None
    except OSError as e:  # an %import whose file is nowhere on the search path
        name = getattr(e, "filename", None) or str(e)
        where = ", ".join(list(import_paths) + ([f"the folder of {source_path}"] if source_path else []))
        raise GrammarError(f"Lark grammar: %import: grammar file {name!r} not found (searched: "
                           f"{where or 'no import_paths given'}, and Lark's bundled grammars)",
                           *_import_position(text, str(name))) from None
    except RecursionError:
        raise GrammarError("Lark grammar: nested too deeply for Lark's grammar loader",
                           *_deepest_group(text)[1:]) from None
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
    contextual = {}  # terminals whose lookaheads see past the lexeme -> (variants, where)
    for t in terminal_defs:
        name = str(t.name)
        lc = defined.get(name, (None, None))
        if lc[0] is not None:
            positions[name] = lc
        pat = t.pattern
        flags = set(pat.flags)
        where = f"terminal {name}" + (f" at line {lc[0]}, column {lc[1]}" if lc[0] else "")
        if _SURROGATE.search(pat.value) or (pat.type != "str" and _SURROGATE_ESCAPE.search(pat.value)):
            m = _SURROGATE_ESCAPE.search(text) or _SURROGATE.search(text)
            raise GrammarError(f"Lark grammar: {where.split(' at line')[0]}: a surrogate code point "
                               f"(U+D800..U+DFFF) is not a Unicode scalar value and has no UTF-8 encoding",
                               *(_at(text, m.start()) if m else (lc if lc[0] else (1, 1))))
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
                variants = regex_to_variants(regex, where, regex_syntax)
            except RegexError as e:
                at = _bad_regex_position(text, default=lc if lc[0] else (1, 1))
                raise GrammarError(f"bad regex in {where}: {e.message}", *at) from None
            if len(variants) == 1 and variants[0][1] is None:
                terminals[name] = variants[0][0]
            else:
                contextual[name] = (variants, where)
    declared = set()
    for alts in rules.values():
        for rhs in alts:
            for s in rhs:
                if s not in rules and s not in terminals and s not in contextual:
                    declared.add(s)
    if indenter is not None:
        declared -= {indenter.indent_type, indenter.dedent_type}
    if declared:
        n = sorted(declared)[0]
        raise Unsupported(f"terminal {n} has no pattern (%declare)", f"line {_line_col_of(text, n)[0]}")
    ignore = [str(n) for n in ignore_names]
    for n in ignore:
        if n not in terminals and n not in contextual:
            raise GrammarError(f"%ignore of undefined terminal {n}", *_line_col_of(text, n))
    if start not in rules:
        raise GrammarError(f"start rule {start!r} is not defined", 1, 1)
    cfg = CFG(start, rules, terminals, ignore, positions)
    rests, nl_variants = {}, None
    nl = indenter.nl_type if indenter is not None else None
    if lexer == "basic":
        cfg, rests, nl_variants = _basic_lexing(cfg, terminal_defs, contextual, nl)
        contextual = {}
    elif lexer == "dynamic":
        cfg, rests = _greedy_lexing(cfg, contextual)
    if indenter is not None:
        if indenter.nl_type in contextual:
            raise Unsupported("a lookahead in the Indenter's newline terminal", contextual[indenter.nl_type][1])
        cfg, more = apply_indenter(cfg, indenter, nl_variants=nl_variants)
        rests.update(more)
    return _with_lookaheads(cfg, contextual, rests, max_follow_rules) if contextual or rests else cfg


def _basic_lexing(cfg: CFG, terminal_defs, contextual: dict, nl):
    """``(cfg, rests, newline variants)``: ``cfg`` where each token type is a rule over its lexemes
    as Lark's basic lexer yields them (:mod:`.lark_lexer`), ``nl`` (the Indenter's newline) left
    a terminal whose variants are returned."""
    forms = {n: [(node, None)] for n, node in cfg.terminals.items()}
    for n, (variants, _) in contextual.items():
        forms[n] = [(lex, embedded(rest) if rest is not None else None) for lex, rest in variants]
        cfg.terminals[n] = variants[0][0]  # (a placeholder: the rule below replaces it)
    order, reclassify = scan_order(terminal_defs)
    variants, ignored = basic_lexer_variants(order, reclassify, forms, cfg.ignore)
    used = {s for alts in cfg.rules.values() for rhs in alts for s in rhs if s in cfg.terminals}
    rules, terminals, rests = dict(cfg.rules), {}, {}
    for t in sorted(used):
        if t == nl:
            terminals[t] = cfg.terminals[t]
            continue
        rules[t] = []
        for i, (lex, rest) in enumerate(variants.get(t, ())):
            v = f"{t}@{i}"
            terminals[v] = embedded(lex)
            if rest is not None:
                rests[v] = rest
            rules[t].append((v,))
    ignore = [n for n in cfg.ignore if n in ignored]
    terminals.update({n: embedded(ignored[n]) for n in ignore})
    return CFG(cfg.start, rules, terminals, ignore, cfg.positions), rests, variants.get(nl, [])


def _greedy_lexing(cfg: CFG, contextual: dict):
    """``(cfg, rests)``: ``cfg`` where each rule terminal is a rule over its lexemes as Lark's
    ``dynamic`` lexer yields them, each the longest match of its terminal
    (:func:`.lark_lexer.greedy_variants`), ``rests`` their conditions on the text after them;
    ``contextual`` loses the terminals replaced.  Ignored terminals stay (the engine makes them
    longest matches)."""
    ignored = set(cfg.ignore)
    used = sorted({s for alts in cfg.rules.values() for rhs in alts for s in rhs
                   if s in cfg.terminals or s in contextual})
    forms = {n: [(cfg.terminals[n], None)] for n in used if n not in contextual}
    for n in used:
        if n in contextual:
            forms[n] = [(lex, embedded(rest) if rest is not None else None) for lex, rest in contextual[n][0]]
    variants = greedy_variants(forms, used)
    rules, terminals, rests = dict(cfg.rules), dict(cfg.terminals), {}
    rename = {}
    for t, parts in variants.items():
        contextual.pop(t, None)
        r = t
        if t in ignored:  # also ignored: its rule occurrences get a rule of another name
            r = rename[t] = f"{t}@rule"
        else:
            terminals.pop(t, None)
        rules[r] = []
        for i, (lex, rest) in enumerate(parts):
            v = f"{t}@{i}"
            terminals[v] = embedded(lex)
            if rest is not None:
                rests[v] = rest
            rules[r].append((v,))
    if rename:
        rules = {a: [tuple(rename.get(s, s) for s in rhs) for rhs in alts] for a, alts in rules.items()}
    return CFG(cfg.start, rules, terminals, list(cfg.ignore), cfg.positions), rests


def _with_lookaheads(cfg: CFG, contextual: dict, rests=None, max_follow_rules=None) -> CFG:
    """``cfg`` with the terminals whose lookaheads see past the lexeme put in: each becomes a
    rule over its variants (:func:`regex_to_variants`), the ignored terminals are folded into the
    others (what follows a lexeme includes ignored text) and the conditions are resolved
    (:func:`structgen.cfg.follow.resolve_follow`)."""
    for n in cfg.ignore:
        if n in contextual:
            raise Unsupported("a lookahead that sees past the lexeme in an %ignore'd terminal", contextual[n][1])
    rests = dict(rests or {})
    for name, (variants, _) in contextual.items():
        alts = []
        for i, (lexemes, rest) in enumerate(variants):
            v = f"{name}@{i}"
            cfg.terminals[v] = lexemes
            if rest is not None:
                rests[v] = rest
            alts.append((v,))
        cfg.rules[name] = alts
    if max_follow_rules is None:
        return resolve_follow(fold_ignores(cfg), rests)
    return resolve_follow(fold_ignores(cfg), rests, max_rules=max_follow_rules)


# -- a faster reader of Lark's grammar syntax ----------------------------------------------------
#
# Lark parses grammar text with its own LALR parser and lexer, about half of what loading a
# grammar costs (7 ms for a 50-line grammar).  :func:`_parse_tree` reads the common subset of the
# syntax -- rule and terminal definitions with priorities and modifiers, alternatives, aliases,
# groups, ``[...]``, ``? * +``, ``~ n[..m]``, strings, regexes, ``".."`` ranges, ``%ignore`` --
# into the very tree Lark's parser builds (the input of its GrammarBuilder), and gives up (None)
# on anything else (``%import``, templates, ``%declare``/``%override``/``%extend``, line
# continuations, any token it does not expect), so Lark reads those grammars and reports their
# errors itself.

_TOKEN = re.compile(r"""
    (?P<ws>[ \t]+)
  | (?P<comment>//[^\n]*|\#[^\n]*)
  | (?P<nl>\n)
  | (?P<STRING>"(\\"|\\\\|[^"\n])*?"i?)
  | (?P<REGEXP>/(?!/)(\\/|\\\\|[^/])*?/[imslux]*)
  | (?P<MOD>(!|![?]?|[?]!?)(?=[_a-z]))
  | (?P<OP>[+*]|[?](?![a-z_]))
  | (?P<RULE>_?[a-z][_a-z0-9]*)
  | (?P<TERMINAL>_?[A-Z][_A-Z0-9]*)
  | (?P<NUMBER>[+-]?\d+)
  | (?P<TO>->)
  | (?P<DOTDOT>\.\.)
  | (?P<DOT>\.)
  | (?P<IGNORE>%ignore(?=[ \t]))
  | (?P<p>[():|\[\]~])
""", re.X)


class _Decline(Exception):
    """The fast reader does not handle this text (Lark's loader reads it instead)."""


def _tokens(text: str):
    """``[(kind, value, pos)]`` of ``text`` as Lark's grammar lexer splits it, with runs of
    newlines (and the comments and blank lines between them) as one ``("NL", ...)`` token, or
    ``("NL_OR", ...)`` when a ``|`` follows (a continued rule)."""
    out = []
    pos, n = 0, len(text)
    match = _TOKEN.match
    while pos < n:
        m = match(text, pos)
        if m is None:
            raise _Decline(pos)
        kind = m.lastgroup
        end = m.end()
        if kind == "nl":
            if not out or out[-1][0] != "NL":
                out.append(("NL", "\n", pos))
        elif kind == "NUMBER" or (kind == "OP" and end < n and text[end].isdigit()):
            # Lark lexes "+1" as a number: only after "~", ".." and a priority's "."
            if not out or out[-1][0] not in ("p", "DOTDOT", "DOT") or (out[-1][0] == "p" and out[-1][1] != "~"):
                raise _Decline(pos)
            if kind == "OP":
                raise _Decline(pos)
            out.append((kind, m.group(), pos))
        elif kind == "p" and m.group() == "|" and out and out[-1][0] == "NL":
            out[-1] = ("NL_OR", "\n", out[-1][2])
        elif kind not in ("ws", "comment"):
            out.append((kind, m.group(), pos))
        pos = end
    if not out or out[-1][0] != "NL":
        out.append(("NL", "\n", n))
    return out


def _parse_tree(text: str):
    """The tree Lark's grammar parser makes of ``text`` (after its ``PrepareGrammar`` pass: a
    ``start`` tree of ``rule`` / ``term`` / ``ignore`` statements), or None when the text uses
    syntax outside the subset read here (or is not valid Lark)."""
    from lark.grammar import NonTerminal, Terminal
    from lark.lexer import Token
    from lark.tree import Tree as ST

    if "\r" in text or "\\\n" in text:
        return None
    try:
        toks = _tokens(text)
    except _Decline:
        return None
    i = 0

    def peek():
        return toks[i][0]

    def take(kind, value=None):
        nonlocal i
        k, v, _ = toks[i]
        if k != kind or (value is not None and v != value):
            raise _Decline(i)
        i += 1
        return v

    def expansions():
        alts = [alias()]
        while peek() == "NL_OR" or (peek() == "p" and toks[i][1] == "|"):
            take(peek())
            alts.append(alias())
        return ST("expansions", alts)

    def alias():
        exp = expansion()
        if peek() == "TO":
            take("TO")
            return ST("alias", [exp, NonTerminal(take("RULE"))])
        return exp

    def expansion():
        items = []
        while True:
            k, v, _ = toks[i]
            if k in ("RULE", "TERMINAL", "STRING", "REGEXP") or (k == "p" and v in "(["):
                items.append(expr())
            else:
                return ST("expansion", items)

    def expr():
        a = atom()
        k, v, _ = toks[i]
        if k == "OP":
            take("OP")
            return ST("expr", [a, Token("OP", v)])
        if k == "p" and v == "~":
            take("p")
            args = [a, Token("TILDE", "~"), Token("NUMBER", take("NUMBER"))]
            if peek() == "DOTDOT":
                take("DOTDOT")
                args.append(Token("NUMBER", take("NUMBER")))
            return ST("expr", args)
        return a

    def atom():
        nonlocal i
        k, v, _ = toks[i]
        if k == "p" and v == "(":
            i += 1
            e = expansions()
            take("p", ")")
            return e
        if k == "p" and v == "[":
            i += 1
            e = expansions()
            take("p", "]")
            return ST("maybe", [e])
        i += 1
        if k == "RULE":
            if peek() == "p" and toks[i][1] == "{":  # (a template: never lexed, see _TOKEN)
                raise _Decline(i)
            return ST("value", [NonTerminal(v)])
        if k == "TERMINAL":
            return ST("value", [Terminal(v, filter_out=v.startswith("_"))])
        if k == "STRING" and peek() == "DOTDOT":
            take("DOTDOT")
            return ST("value", [ST("range", [Token("STRING", v), Token("STRING", take("STRING"))])])
        if k in ("STRING", "REGEXP"):
            return ST("value", [ST("literal", [Token(k, v)])])
        raise _Decline(i)

    def priority():
        if peek() == "DOT":
            take("DOT")
            return [Token("NUMBER", take("NUMBER"))]
        return []

    stmts = []
    try:
        while i < len(toks):
            k, v, _ = toks[i]
            if k == "NL":
                i += 1
                continue
            if k == "IGNORE":
                i += 1
                stmts.append(ST("ignore", [expansions()]))
            elif k in ("MOD", "RULE"):
                mods = [Token("RULE_MODIFIERS", take("MOD"))] if k == "MOD" else []
                name = take("RULE")
                prio = priority()
                take("p", ":")
                stmts.append(ST("rule", [ST("rule_modifiers", mods), Token("RULE", name), ST("template_params", []),
                                         ST("priority", prio), expansions()]))
            elif k == "TERMINAL":
                i += 1
                prio = priority()
                take("p", ":")
                stmts.append(ST("term", [Token("TERMINAL", v), *prio, expansions()]))
            else:
                raise _Decline(i)
            take("NL")
    except (_Decline, IndexError):
        return None
    finally:
        expansions = None  # the readers call each other in a ring of closures: break it for refcounting
    return ST("start", stmts)


def _fast_grammar(text: str):
    """Lark's ``Grammar`` of ``text`` built from :func:`_parse_tree` by Lark's own GrammarBuilder
    (what ``lark.load_grammar.load_grammar`` does after parsing), or None: the text is outside
    the subset read here, or Lark would reject it (the caller then runs Lark's loader, which
    reports the error)."""
    tree = _parse_tree(text)
    if tree is None:
        return None
    from lark.load_grammar import GrammarBuilder, resolve_term_references

    try:
        gb = GrammarBuilder(False, None)
        for stmt in tree.children:
            if stmt.data == "ignore":
                gb._ignore(*stmt.children)
            else:
                gb._define(*gb._unpack_definition(stmt, None))
        resolve_term_references({name: d.tree for name, d in gb._definitions.items() if d.is_term})
        return gb.build()
    except Exception:
        return None

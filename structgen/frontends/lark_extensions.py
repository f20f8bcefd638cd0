"""llguidance's extensions of Lark's syntax, read into plain Lark plus placeholders.

llguidance (``docs/syntax.md`` of guidance-ai/llguidance) extends Lark with:

- ``%json { ... }``: an inline JSON Schema used like a rule (``fun_call: %json {...}``);
- special tokens in rules: ``<|python_tag|>``, ``<think>`` (any text between ``<`` and ``>``: a
  special token's text), ``<[128010]>`` (an id), ``<[100-200,300]>`` (ids and inclusive ranges);
- ``x{M,N}``, ``x{N}``, ``x{M,}``, ``x{,N}`` for Lark's ``x~M..N``;
- rule options ``name[lazy]: ...`` (the shortest match of a rule made of terminals),
  ``name[suffix="..."]`` (lazy, then the suffix), ``name[capture]`` / ``[capture="..."]`` /
  ``stop_capture=`` (captures: no effect on the language);
- ``%llguidance { ... }`` grammar options.

:func:`read_extensions` rewrites the text into Lark that Lark's loader reads, each construct a
placeholder terminal ``_SGX<k>`` whose pattern is a private-use marker, and returns what each
placeholder stands for; :func:`extension_cfg` runs :func:`~structgen.frontends.lark.lark_to_cfg`
on it and applies the lazy rules.  The caller (:meth:`structgen.Grammar.from_lark`) replaces the
JSON and token placeholders by grammars.  Line numbers of the text are kept (a multi-line
``%json`` block's newlines move to the end of its line).

Not supported (:class:`~structgen.errors.Unsupported`, naming line and column): token sets with
``^`` or ``*`` (they hold ordinary tokens, which are not text), ``stop=``, ``max_tokens=``,
``temperature=``, ``%regex``, ``%lark``, ``@grammar`` references and ``%llguidance`` options
other than ``no_forcing``.  Special tokens and ``%json`` inside terminal definitions are errors,
as in llguidance.
"""
from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field

from ..automaton import ir
from ..cfg.compose import lazy
from ..errors import GrammarError, Unsupported
from .lark import lark_to_cfg, regex_to_ir

__all__ = ["Extensions", "read_extensions", "extension_cfg", "has_extensions"]

_SCAN = re.compile(r"""
    (?P<comment>//[^\n]*|\#[^\n]*)
  | (?P<string>"(?:\\.|[^"\\\n])*"i?)
  | (?P<regex>/(?![/*])(?:\\.|[^/\\\n])+/[imslux]*)
  | (?P<token><(?:\[[^\]\n]*\]|[^<>\s]+)>)
  | (?P<directive>%(?:json|llguidance|regex|lark)\b)
  | (?P<at>@[\w-]+)
  | (?P<nl>\n)
""", re.X)
_DEFINITION = re.compile(r"[ \t]*([?!]?)(_?[A-Za-z][\w]*)(\.-?\d+)?(\[[^\]\n]*\])?[ \t]*:")
_REPEAT = re.compile(r"\{[ \t]*(\d*)[ \t]*(?:(,)[ \t]*(\d*)[ \t]*)?\}")
_MARK = "\ue000"  # private use: a placeholder pattern no grammar text holds
_FLAGS = re.compile(r"[ \t]*(\w+)[ \t]*(?:=[ \t]*(\"(?:\\.|[^\"\\])*\"|/(?:\\.|[^/\\])+/|[\w.+-]+))?[ \t]*(?:,|$)")


@dataclass
class Extensions:
    """What :func:`read_extensions` found: ``text`` (plain Lark), ``json`` (placeholder ->
    (schema, line, column)), ``tokens`` (placeholder -> (("text", name) | ("ids", [(lo, hi)...]),
    line, column)), ``lazy`` (placeholder terminal -> suffix IR or None), ``regex_syntax`` (how
    ``/.../`` literals are read, see :func:`~structgen.frontends.lark.lark_to_cfg`)."""

    text: str
    json: dict = field(default_factory=dict)
    tokens: dict = field(default_factory=dict)
    lazy: dict = field(default_factory=dict)
    regex_syntax: str = "python"

    @property
    def any(self) -> bool:
        return bool(self.json or self.tokens or self.lazy)


def has_extensions(text: str) -> bool:
    """A cheap test: might ``text`` use llguidance's syntax (else it is plain Lark)?"""
    return "%json" in text or "<" in text or "%llguidance" in text or "[" in text and "]:" in text \
        or "{" in text


def _at(text: str, pos: int):
    return text.count("\n", 0, pos) + 1, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _is_terminal(name: str) -> bool:
    return name.lstrip("_")[:1].isupper()


def _token_spec(tok: str, where):
    """``("text", name)`` or ``("ids", [(lo, hi), ...])`` of a ``<...>`` token reference."""
    inner = tok[1:-1]
    if not (inner.startswith("[") and inner.endswith("]")):
        return ("text", tok)
    body = inner[1:-1].strip()
    if body.startswith("^") or "*" in body:
        raise Unsupported(f"token set {tok} holds ordinary tokens, which a grammar of text cannot name "
                          f"(only special tokens can be named by id)", f"line {where[0]}, column {where[1]}")
    ranges = []
    for part in body.split(","):
        m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", part)
        if m is None:
            raise GrammarError(f"Lark grammar: invalid token range {tok}", *where)
        lo = int(m.group(1))
        hi = int(m.group(2)) if m.group(2) is not None else lo
        if hi < lo:
            raise GrammarError(f"Lark grammar: invalid token range {tok} (end before start)", *where)
        ranges.append((lo, hi))
    if not ranges:
        raise GrammarError(f"Lark grammar: empty token range {tok}", *where)
    return ("ids", ranges)


def read_extensions(text: str, regex_syntax: str = "python") -> Extensions:
    """Plain Lark for ``text`` and its placeholders (see the module docstring)."""
    ext = Extensions(text, regex_syntax=regex_syntax)
    out, pos, pending, k = [], 0, 0, 0
    defs: list = []
    lhs = None  # the definition the current line belongs to
    names = set(re.findall(r"\w+", text))

    def fresh():
        nonlocal k
        while True:
            k += 1
            n = f"_SGX{k}"
            if n not in names:
                return n

    def line_start(p):
        nonlocal lhs
        m = _DEFINITION.match(text, p)
        if m is not None:
            lhs = m.group(2)
        elif re.match(r"[ \t]*%", text[p:p + 200]):
            lhs = "%"
        elif not re.match(r"[ \t]*(\||$|//|#)", text[p:p + 200]):
            lhs = None

    line_start(0)
    scan = 0
    while True:
        m = _SCAN.search(text, scan)
        if m is None:
            break
        scan = m.end()
        kind, s = m.lastgroup, m.group()
        if kind in ("comment", "string", "regex"):
            continue
        out.append(text[pos:m.start()])
        pos = m.end()
        where = _at(text, m.start())
        if kind == "nl":
            out.append("\n" * (1 + pending))
            pending = 0
            line_start(m.end())
            continue
        if kind == "at":
            raise Unsupported(f"grammar references ({s}) are not supported: write the grammar inline",
                              f"line {where[0]}, column {where[1]}")
        if kind == "token" or s == "%json":
            if lhs is not None and (lhs == "%" or _is_terminal(lhs)):
                what = "special tokens" if kind == "token" else "%json"
                raise GrammarError(f"Lark grammar: {what} cannot be used in terminals or directives ({s} in "
                                   f"{lhs if lhs != '%' else 'a directive'})", *where)
        if kind == "token":
            name = fresh()
            ext.tokens[name] = (_token_spec(s, where), *where)
            out.append(f" {name} ")
            defs.append(f'{name}: "{_MARK}{name}{_MARK}"')
            continue
        if s in ("%regex", "%lark"):
            raise Unsupported(f"{s} {{...}} is not supported", f"line {where[0]}, column {where[1]}")
        value, end = _json_value(text, pos, s, where)
        pending += text.count("\n", m.start(), end)
        pos = scan = end
        if s == "%llguidance":
            bad = sorted(set(value) - {"no_forcing"}) if isinstance(value, dict) else ["(not an object)"]
            if bad:
                raise Unsupported(f"%llguidance options {bad} are not supported", f"line {where[0]}, column {where[1]}")
            continue
        if not isinstance(value, (dict, bool)):
            raise GrammarError(f"Lark grammar: %json takes a JSON Schema (an object), not {type(value).__name__}",
                               *where)
        name = fresh()
        ext.json[name] = (value, *where)
        out.append(f" {name} ")
        defs.append(f'{name}: "{_MARK}{name}{_MARK}"')
    out.append(text[pos:])
    body = _rewrite_statements("".join(out), ext, fresh, defs)
    ext.text = body + ("\n" if not body.endswith("\n") else "") + "\n".join(defs) + ("\n" if defs else "")
    return ext


def _json_value(text: str, pos: int, directive: str, where):
    i = pos
    while i < len(text) and text[i] in " \t\r\n":
        i += 1
    try:
        return json.JSONDecoder().raw_decode(text, i)
    except json.JSONDecodeError as e:
        raise GrammarError(f"Lark grammar: {directive}: {e.msg}", *_at(text, e.pos)) from None


def _rewrite_statements(text: str, ext: Extensions, fresh, defs: list) -> str:
    """Rule options and ``{M,N}`` repetitions, line by line (strings, regexes and comments kept)."""
    lines = text.split("\n")
    out = []
    for no, line in enumerate(lines, 1):
        m = _DEFINITION.match(line)
        if m is not None and m.group(4):
            line = _rule_options(line, m, no, ext, fresh, defs)
        out.append(_repeats(line, no))
    return "\n".join(out)


def _rule_options(line: str, m, no: int, ext: Extensions, fresh, defs: list) -> str:
    name, flags = m.group(2), m.group(4)[1:-1]
    col = m.start(4) + 1
    opts, p = {}, 0
    while p < len(flags):
        f = _FLAGS.match(flags, p)
        if f is None or f.end() == p:
            raise GrammarError(f"Lark grammar: cannot read the options [{flags}] of {name}", no, col)
        opts[f.group(1)] = f.group(2)
        p = f.end()
    bad = sorted(set(opts) - {"lazy", "capture", "suffix", "stop_capture"})
    if bad:
        raise Unsupported(f"rule option{'s' if len(bad) > 1 else ''} {', '.join(bad)} of {name} "
                          f"({'they change sampling, not the language' if set(bad) <= {'temperature'} else 'not supported'})",
                          f"line {no}, column {col}")
    head = line[:m.start(4)] + line[m.end(4):m.end()]
    if "lazy" not in opts and "suffix" not in opts:
        return head + line[m.end():]
    if _is_terminal(name):
        raise Unsupported(f"lazy terminal {name}: put [lazy] on a rule", f"line {no}, column {col}")
    suffix = None
    if opts.get("suffix"):
        v = opts["suffix"]
        if v.startswith('"'):
            suffix = ir.literal(ast.literal_eval(v))
        elif v.startswith("/"):
            suffix = regex_to_ir(v[1:-1], f"suffix of {name}", ext.regex_syntax)
        else:
            raise Unsupported(f"suffix={v} of {name}: give a string or a /regex/", f"line {no}, column {col}")
    t = fresh()
    ext.lazy[t] = suffix
    defs.append(f"{m.group(1)}{name}: {t}")
    return line[:m.start(1)] + t + line[m.end(2):m.start(4)] + line[m.end(4):]


def _repeats(line: str, no: int) -> str:
    """``x{M,N}`` -> ``x~M..N`` (``{M,}``: ``x~M x*``) outside strings, regexes and comments."""
    if "{" not in line:
        return line
    spans = [(m.start(), m.end()) for m in re.finditer(r'//[^\n]*|\#[^\n]*|"(?:\\.|[^"\\])*"i?|/(?![/*])(?:\\.|[^/\\])+/[imslux]*', line)]

    def inside(p):
        return any(a <= p < b for a, b in spans)

    out, pos = [], 0
    for m in _REPEAT.finditer(line):
        if inside(m.start()) or m.start() == 0 or line[m.start() - 1] in " \t:|(":
            continue
        lo_s, comma, hi_s = m.group(1), m.group(2), m.group(3)
        if not lo_s and not (comma and hi_s):
            continue  # (a template's braces, or nothing to read)
        lo = int(lo_s) if lo_s else 0
        hi = lo if not comma else (int(hi_s) if hi_s else None)
        if hi is not None and hi < lo:
            raise GrammarError("Lark grammar: range end must be >= start", no, m.start() + 1)
        out.append(line[pos:m.start()])
        pos = m.end()
        if hi is not None:
            out.append(f"~{lo}" if lo == hi else f"~{lo}..{hi}")
            continue
        start = _atom_start(line, m.start())
        atom = line[start:m.start()]
        out.append("*" if lo == 0 else f"~{lo} {atom}*")
    out.append(line[pos:])
    return "".join(out)


def _atom_start(line: str, end: int) -> int:
    """Where the atom ending at ``end`` starts (a name, a string, a regex or a group)."""
    c = line[end - 1]
    if c == ")":
        depth, i = 0, end - 1
        while i >= 0:
            if line[i] == ")":
                depth += 1
            elif line[i] == "(":
                depth -= 1
                if depth == 0:
                    return i
            i -= 1
        return 0
    if c in "\"/":
        q = line.rfind(c, 0, end - 1)
        return max(q, 0)
    i = end
    while i > 0 and (line[i - 1].isalnum() or line[i - 1] == "_"):
        i -= 1
    return i


def extension_cfg(ext: Extensions, start: str = "start", import_paths=None, source_path=None):
    """The CFG of ``ext.text`` (placeholders as terminals) with its lazy rules applied."""
    cfg = lark_to_cfg(ext.text, start=start, import_paths=import_paths, source_path=source_path,
                      regex_syntax=ext.regex_syntax)
    for t, suffix in ext.lazy.items():
        node = cfg.terminals.get(t)
        if node is None:
            raise GrammarError(f"Lark grammar: a lazy rule must be made of terminals only ({t})")
        cfg.terminals[t] = lazy(ir.seq(node, suffix) if suffix is not None else node)
    for t in list(ext.json) + list(ext.tokens):
        if t not in cfg.terminals:
            continue  # (unused by the start rule)
        node = cfg.terminals[t]
        if node != ir.literal(f"{_MARK}{t}{_MARK}"):
            raise GrammarError(f"Lark grammar: %json and special tokens cannot be used in terminals ({t})")
    return cfg

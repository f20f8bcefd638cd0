"""Draft-07's content keywords as constraints: ``contentEncoding`` and ``contentMediaType``.

Draft-07 lets a validator assert that a string's content decodes (``contentEncoding``) and parses
as a media type (``contentMediaType``); the test suite's optional ``content.json`` expects it, so
structgen asserts what it can compile exactly and refuses the rest (2020-12 made both annotations:
there they constrain nothing).

- ``contentEncoding: "base64"`` (RFC 4648 section 4, the standard alphabet with ``=`` padding to a
  multiple of four characters, no line breaks) is a regular language of the decoded string: it
  becomes a ``pattern`` (:func:`content_as_keywords`), so every compiler takes it.
- ``contentMediaType: "application/json"`` asks that the decoded string be a JSON text
  (RFC 8259: whitespace, one value, whitespace).  That is context-free: the grammar compiler builds
  it from the pieces of :func:`json_text_pieces`, each piece's JSON-escaped spellings
  (:func:`structgen.frontends.json_schema.strings.encode`, exact since the escape code is uniquely
  decodable), so inside the outer string ``{"a": 1}`` is spelled ``{\\"a\\": 1}`` or with any
  other escapes of the same characters.
- Anything else (both keywords together: JSON under base64; other encodings or media types; JSON
  text beside other string keywords) raises :class:`~structgen.errors.Unsupported` with its
  pointer.
"""
from __future__ import annotations

from structgen.automaton import ir

from .strings import encode

#: RFC 4648 base64: groups of four alphabet characters, the last one maybe padded with ``=``
BASE64_PATTERN = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
CONTENT_KEYWORDS = ("contentEncoding", "contentMediaType")
#: keywords that constrain strings (beside JSON text they would need an intersection with a CFL)
_STRING_KEYWORDS = ("minLength", "maxLength", "pattern", "format", "enum", "const", "allOf", "anyOf", "oneOf",
                    "not", "if", "$ref")


def has_content(s) -> bool:
    return isinstance(s, dict) and any(k in s for k in CONTENT_KEYWORDS)


def refused_keyword(s: dict) -> str:
    """The content keyword to name when ``s``'s content is not compiled."""
    return "contentMediaType" if "contentMediaType" in s else "contentEncoding"


def content_as_keywords(s: dict):
    """``s`` with its content keywords turned into plain keywords when they are regular
    (``contentEncoding: "base64"`` alone: a ``pattern``), ``"json"`` when they ask for JSON text
    alone, else None (not compiled)."""
    enc, media = s.get("contentEncoding"), s.get("contentMediaType")
    if media is None and isinstance(enc, str) and enc.lower() == "base64":
        rest = {k: v for k, v in s.items() if k not in CONTENT_KEYWORDS}
        if "pattern" in rest:
            return {"allOf": [rest, {"pattern": BASE64_PATTERN}]}
        rest["pattern"] = BASE64_PATTERN
        return rest
    if enc is None and isinstance(media, str) and media.split(";")[0].strip().lower() == "application/json":
        return "json"
    return None


def json_text_split(s: dict):
    """``(non-string part, string part allowed)`` of a schema whose only content keyword is
    ``contentMediaType: "application/json"``: the schema for the values that are not strings (None
    when its type admits only strings) and whether strings are allowed at all; None when other
    string keywords stand beside it."""
    rest = {k: v for k, v in s.items() if k not in CONTENT_KEYWORDS}
    t = rest.get("type")
    types = None if t is None else (t if isinstance(t, list) else [t])
    if types is not None and "string" not in types:
        return rest, False  # no string: the keyword constrains nothing
    if any(k in rest for k in _STRING_KEYWORDS):
        return None
    others = [x for x in (types or ["null", "boolean", "number", "array", "object"]) if x != "string"]
    return (dict(rest, type=others) if others else None), True


def json_text_pieces() -> dict:
    """The lexemes of a JSON text inside a JSON string, JSON-escaped: ``{name: IR}`` for ``{``,
    ``}``, ``[``, ``]``, ``:``, ``,``, strings, numbers and literals, each with the whitespace
    before it, and ``end``: the whitespace after the value.  Code-point IR, as the string
    compilers make."""
    ws = ir.Repeat(ir.CharSet(((0x09, 0x0A), (0x0D, 0x0D), (0x20, 0x20))), 0, None)
    digit = ir.CharSet(((0x30, 0x39),))
    hexd = ir.CharSet(((0x30, 0x39), (0x41, 0x46), (0x61, 0x66)))
    plain = ir.CharSet(((0x20, 0x21), (0x23, 0x5B), (0x5D, 0x10FFFF)))
    escape = ir.seq(ir.literal("\\"), ir.alt(ir.CharSet(tuple((ord(c), ord(c)) for c in '"\\/bfnrt')),
                                             ir.seq(ir.literal("u"), ir.Repeat(hexd, 4, 4))))
    string = ir.seq(ir.literal('"'), ir.Repeat(ir.alt(plain, escape), 0, None), ir.literal('"'))
    integer = ir.alt(ir.literal("0"), ir.seq(ir.CharSet(((0x31, 0x39),)), ir.Repeat(digit, 0, None)))
    number = ir.seq(ir.optional(ir.literal("-")), integer,
                    ir.optional(ir.seq(ir.literal("."), ir.Repeat(digit, 1, None))),
                    ir.optional(ir.seq(ir.CharSet(((0x45, 0x45), (0x65, 0x65))),
                                       ir.optional(ir.CharSet(((0x2B, 0x2B), (0x2D, 0x2D)))),
                                       ir.Repeat(digit, 1, None))))
    lexemes = {"{": ir.literal("{"), "}": ir.literal("}"), "[": ir.literal("["), "]": ir.literal("]"),
               ":": ir.literal(":"), ",": ir.literal(","), "string": string, "number": number,
               "literal": ir.alt(ir.literal("true"), ir.literal("false"), ir.literal("null"))}
    out = {name: encode(ir.seq(ws, node)) for name, node in lexemes.items()}
    out["end"] = encode(ws)
    return out

"""Which engine a JSON Schema goes to: one DFA (:mod:`.json_schema`) or the grammar engine
(:mod:`.json_schema_cfg`).

``engine="auto"``:

1. a schema without ``$ref`` cycles goes to one token automaton when it is tiny (at most
   ``SMALL_SCHEMA`` objects in the document, no free-form value -- the DFA bounds their depth --
   and a DFA of at most ``SMALL_MAX_STATES`` states: the cheapest masks, a row lookup, and it can
   live on the accelerator), or when it *intersects object languages* (``allOf``, ``$ref`` with
   sibling keywords, ``dependentRequired`` / ``dependentSchemas`` / ``dependencies``) and its DFA
   fits ``dfa_max_states`` states (ten times that for intermediate ones) and ``dfa_time_limit``
   seconds: automaton intersection keeps those keywords independent of key order, where the
   grammar must merge them into one declared order;
2. otherwise (recursion, no intersection, or a DFA past the budget) the grammar engine: compile
   time linear in the schema, recursion and free-form values exact, every leaf's exact regular
   language kept -- faster to compile than the DFA on nearly every MaskBench schema;
3. when the grammar engine cannot take a schema (a combinator it cannot intersect over a
   recursive part, an empty language), the regular compiler gets the full budget; if that fails
   too, the grammar engine's error is raised (it names the keyword and pointer).

The budgets come from MaskBench measurements (``python -m structgen.bench.maskbench``).
"""
from __future__ import annotations

import time

from structgen.automaton import ir
from structgen.errors import LimitExceeded, StructgenError, Unsupported

DFA_MAX_STATES = 20_000
DFA_TIME_LIMIT = 0.5
SMALL_SCHEMA = 4           # sub-schemas: past a handful, the grammar engine compiles faster
SMALL_MAX_STATES = 1_000


def compile_with(engine: str, schema, *, dfa_max_states: int = DFA_MAX_STATES,
                 dfa_time_limit: float = DFA_TIME_LIMIT, **options):
    """``(engine used, SchemaReport)`` for ``engine`` in ``"auto"|"dfa"|"cfg"``.  With "dfa" (and
    when auto picks it) ``report.grammar`` may be an ``ir.Embed`` of the built DFA."""
    from .json_schema import compile_json_schema
    from .json_schema_cfg import CfgSchemaCompiler, compile_json_schema_cfg

    if engine == "dfa":
        return "dfa", compile_json_schema(schema, **options)
    if engine == "cfg":
        return "cfg", compile_json_schema_cfg(schema, **options)
    if engine != "auto":
        raise ValueError("engine must be 'auto', 'dfa' or 'cfg'")
    probe = CfgSchemaCompiler(schema, **options)
    if not probe.recursive(schema, None):
        budget = dfa_max_states if intersects_objects(schema) else \
            SMALL_MAX_STATES if schema_size(schema) <= SMALL_SCHEMA and not free_form(schema) else 0
        small = _small_dfa(schema, budget, dfa_time_limit, options) if budget else None
        if small is not None:
            return "dfa", small
    try:
        return "cfg", compile_json_schema_cfg(schema, **options)
    except (Unsupported, LimitExceeded) as first:
        try:
            return "dfa", compile_json_schema(schema, **options)
        except StructgenError:
            raise first from None


def _small_dfa(schema, max_states: int, seconds: float, options: dict):
    """The regular compilation of ``schema`` with its DFA built, or None past the budget."""
    from structgen.automaton.build import build_dfa

    from .json_schema import compile_json_schema

    t0 = time.perf_counter()
    opts = dict(options, max_states=10 * max_states, time_limit=seconds)
    try:
        report = compile_json_schema(schema, **opts)
        left = seconds - (time.perf_counter() - t0)
        if left <= 0:
            return None
        dfa = build_dfa(report.grammar, max_states=max_states, time_limit=left)
    except StructgenError:
        return None
    if time.perf_counter() - t0 > seconds:
        return None
    report.grammar = ir.NOTHING if dfa.is_empty() else ir.Embed(dfa)
    return report


def schema_size(schema, limit: int = 1000) -> int:
    """The number of objects in the schema document (sub-schemas and definitions; ``$ref`` is not
    followed): a cheap size measure that stops at ``limit``."""
    n, todo = 0, [schema]
    while todo and n < limit:
        s = todo.pop()
        if isinstance(s, list):
            todo += s
        elif isinstance(s, dict):
            n += 1
            for k, v in s.items():
                if isinstance(v, (dict, list)) and k not in ("enum", "const", "examples", "default"):
                    todo.append(v)
    return n


_FREE_KEYS = {"type", "additionalProperties", "title", "description", "default", "examples", "$comment"}


def free_form(schema) -> bool:
    """Does the schema hold a free-form value (``{}``, ``true``, or an object / array constrained by
    nothing but its type)?  The DFA bounds their nesting depth; the grammar engine does not."""
    todo = [schema]
    while todo:
        s = todo.pop()
        if s is True or s == {}:
            return True
        if isinstance(s, list):
            todo += s
            continue
        if not isinstance(s, dict):
            continue
        if s.get("type") in ("object", "array") and set(s) <= _FREE_KEYS and s.get("additionalProperties", True) \
                is not False:
            return True
        for k, v in s.items():
            if isinstance(v, (dict, list, bool)) and k not in ("enum", "const", "examples", "default", "required"):
                todo.append(v)
    return False


_INTERSECTING = ("allOf", "dependentRequired", "dependentSchemas", "dependencies")


def intersects_objects(schema) -> bool:
    """Does any sub-schema use a keyword that intersects (object) languages?"""
    todo = [schema]
    while todo:
        s = todo.pop()
        if isinstance(s, list):
            todo += s
            continue
        if not isinstance(s, dict):
            continue
        if any(k in s for k in _INTERSECTING):
            return True
        if "$ref" in s and any(k in s for k in ("properties", "required", "additionalProperties", "items", "type")):
            return True
        for k, v in s.items():
            if isinstance(v, (dict, list)) and k not in ("enum", "const", "examples", "default"):
                todo.append(v)
    return False


def choose_engine(schema, **options) -> str:
    """The engine ``engine="auto"`` uses for ``schema`` (compiles it to find out)."""
    return compile_with("auto", schema, **options)[0]

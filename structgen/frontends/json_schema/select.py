"""Which engine a JSON Schema goes to: one DFA (:mod:`.json_schema`) or the grammar engine
(:mod:`.json_schema_cfg`).

``engine="auto"``:

1. a schema without ``$ref`` cycles goes to one token automaton when it is tiny (at most
   ``SMALL_SCHEMA`` objects in the document, no free-form value -- the DFA bounds their depth --
   and a DFA of at most ``SMALL_MAX_STATES`` states: the cheapest masks, a row lookup, and it can
   live on the accelerator), or when it *intersects object languages* (``allOf``, ``$ref`` with
   sibling keywords, ``dependentRequired`` / ``dependentSchemas`` / ``dependencies``), has at most
   ``INTERSECT_SCHEMA`` objects in the document and its DFA fits ``dfa_max_states`` states:
   automaton intersection keeps those keywords independent of key order, where the grammar must
   merge them into one declared order;
2. otherwise (recursion, no intersection, or a DFA past the budget) the grammar engine: compile
   time linear in the schema, recursion and free-form values exact, every leaf's exact regular
   language kept -- faster to compile than the DFA on nearly every MaskBench schema;
3. when the grammar engine cannot take a schema (a combinator it cannot intersect over a
   recursive part, an empty language, a limit of a leaf), the regular compiler gets a large budget
   (``DFA_FALLBACK_BUDGET`` cells, the DFA built within it); if that fails too, the grammar
   engine's error is raised (it names the keyword and pointer).  Not when the grammar engine's
   error is the regular compiler's own ``Unsupported`` on a sub-schema: the regular compilation of
   the whole schema meets that sub-schema again (on MaskBench it failed every time, after up to
   seconds).

The DFA attempt of step 1 is bounded by *work*, not by time: ``dfa_work_budget`` cells of
automaton construction (:class:`structgen.automaton.build.WorkBudget`: states x byte classes of
every subset construction, product and minimisation, cache hits charged as if rebuilt), so the
same schema gets the same engine on every run and machine, cold caches or warm.  A million cells
are about 25-40 ms.  Schemas of at most ``INTERSECT_SMALL`` objects get ``DFA_WORK_BUDGET_SMALL``
cells (the official suite's ``allOf`` / ``$ref`` cases need up to 11 million with flexible
whitespace) in declared property order; larger ones, and every schema under ``property_order="any"``
(where the grammar engine is as exact, and a failed DFA attempt is TTFM lost),
``DFA_WORK_BUDGET``: on a MaskBench sample the DFAs that fit cost at
most 1.4 million cells, the next ones 5 million and up (and those compile in 10-30 ms with the
grammar engine), and every intersecting schema of more than ``INTERSECT_SCHEMA`` objects went past
the budget, so those are not tried at all.

The budgets come from MaskBench measurements (``python -m structgen.bench.maskbench``).
"""
from __future__ import annotations

from structgen.automaton import ir
from structgen.errors import LimitExceeded, StructgenError, Unsupported

DFA_MAX_STATES = 20_000
DFA_WORK_BUDGET = 4_000_000         # cells (see the module docstring): about 0.1 s
DFA_WORK_BUDGET_SMALL = 12_000_000  # cells for schemas of at most INTERSECT_SMALL objects
SMALL_SCHEMA = 4           # sub-schemas: past a handful, the grammar engine compiles faster
SMALL_MAX_STATES = 1_000
INTERSECT_SMALL = 10       # sub-schemas: the official suite's allOf / dependencies cases
INTERSECT_SCHEMA = 32      # sub-schemas: past a few dozen, an intersected DFA never fit the budget
DFA_FALLBACK_BUDGET = 60_000_000    # cells for step 3 (a couple of seconds)


def compile_with(engine: str, schema, *, dfa_max_states: int = DFA_MAX_STATES,
                 dfa_work_budget: int | None = None, **options):
    """``(engine used, SchemaReport)`` for ``engine`` in ``"auto"|"dfa"|"cfg"``.  With "dfa" (and
    when auto picks it) ``report.grammar`` may be an ``ir.Embed`` of the built DFA.
    ``dfa_work_budget`` (cells) overrides the work budget of auto's DFA attempt."""
    from .regular import compile_json_schema, for_declared_draft
    from .cfg import CfgSchemaCompiler, compile_json_schema_cfg

    schema = for_declared_draft(schema)

    if engine == "dfa":
        return "dfa", compile_json_schema(schema, **options)
    if engine == "cfg":
        return "cfg", compile_json_schema_cfg(schema, **options)
    if engine != "auto":
        raise ValueError("engine must be 'auto', 'dfa' or 'cfg'")
    probe = CfgSchemaCompiler(schema, **options)
    if not probe.recursive(schema, None):
        size = schema_size(schema, INTERSECT_SCHEMA + 1)
        if intersects_objects(schema):
            budget = dfa_max_states if size <= INTERSECT_SCHEMA else 0
        else:
            budget = SMALL_MAX_STATES if size <= SMALL_SCHEMA and not free_form(schema) else 0
        # declared order: the DFA keeps intersected objects independent of key order (the grammar
        # merges them into one order), worth a larger budget; in any order both are exact
        generous = size <= INTERSECT_SMALL and options.get("property_order", "declared") != "any"
        work = dfa_work_budget if dfa_work_budget is not None else \
            DFA_WORK_BUDGET_SMALL if generous else DFA_WORK_BUDGET
        small = _small_dfa(schema, budget, work, options) if budget else None
        if small is not None:
            return "dfa", small
    try:
        return "cfg", compile_json_schema_cfg(schema, **options)
    except (Unsupported, LimitExceeded) as first:
        if isinstance(first, Unsupported) and not getattr(first, "grammar_only", False):
            # the regular compiler could not take a sub-schema: the regular compilation of the whole
            # schema meets it again (on MaskBench it failed every time, after up to seconds)
            raise
        from structgen.automaton.build import DEFAULT_MAX_STATES

        states = options.get("max_states", DEFAULT_MAX_STATES)
        whole = _small_dfa(schema, states, DFA_FALLBACK_BUDGET, options, leaf_states=states)
        if whole is None:
            raise first from None
        return "dfa", whole


def _small_dfa(schema, max_states: int, work: int, options: dict, leaf_states: int | None = None):
    """The regular compilation of ``schema`` with its DFA built, or None past the budget (at most
    ``max_states`` states, ``leaf_states`` for the parts built on the way -- ten times
    ``max_states`` by default -- and ``work`` cells of construction work)."""
    from structgen.automaton.build import build_dfa, work_budget

    from .regular import compile_json_schema

    opts = dict(options, max_states=10 * max_states if leaf_states is None else leaf_states)
    try:
        with work_budget(work):
            report = compile_json_schema(schema, **opts)
            dfa = build_dfa(report.grammar, max_states=max_states)
    except StructgenError:
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


_SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")


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
            if k in _SCHEMA_MAPS and isinstance(v, dict):
                todo += v.values()
            elif isinstance(v, (dict, list, bool)) and k not in ("enum", "const", "examples", "default", "required"):
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
            if k in _SCHEMA_MAPS and isinstance(v, dict):
                todo += v.values()  # property names are not keywords
            elif isinstance(v, (dict, list)) and k not in ("enum", "const", "examples", "default"):
                todo.append(v)
    return False


def choose_engine(schema, **options) -> str:
    """The engine ``engine="auto"`` uses for ``schema`` (compiles it to find out)."""
    return compile_with("auto", schema, **options)[0]

"""Which engine a JSON Schema goes to: one DFA (:mod:`.regular`) or the grammar engine
(:mod:`.cfg`).  The schema is read once (:mod:`.reader`); the facts deciding the engine --
recursion, document size, free-form values, intersected object languages -- are the reader's,
and both compilers work from the same :class:`.reader.SchemaDocument`.

``engine="auto"``:

1. a schema without ``$ref`` cycles goes to one token automaton when it is tiny (at most
   ``SMALL_SCHEMA`` objects in the document, no free-form value -- the DFA bounds their depth,
   and an object open to extra members has them -- and a DFA of at most ``SMALL_MAX_STATES``
   states: the cheapest masks, a row lookup, and it can live on the accelerator), or, in declared
   property order, when it *intersects object languages* (``allOf`` or ``$ref`` with sibling
   keywords where two or more conjuncts constrain members, ``dependentRequired`` /
   ``dependentSchemas`` / ``dependencies``), has at most
   ``INTERSECT_SMALL`` objects in the document and its DFA fits ``dfa_max_states`` states:
   automaton intersection keeps those keywords independent of key order, where the grammar must
   merge them into one declared order (in any order the grammar is as exact);
2. otherwise (recursion, no intersection, or a DFA past the budget) the grammar engine: compile
   time linear in the schema, recursion and free-form values exact, every leaf's exact regular
   language kept -- faster to compile than the DFA on nearly every MaskBench schema;
3. when the grammar engine cannot take a schema (a combinator it cannot intersect over a
   recursive part, an empty language, a limit of a leaf), the regular compiler gets a large budget
   (``DFA_FALLBACK_BUDGET`` cells, the DFA built within it) if the document has at most
   ``FALLBACK_SMALL`` objects; if that fails too, or the document is larger, the grammar
   engine's error is raised (it names the keyword and pointer).  On the whole dev split 93
   schemas came here: the one DFA that fitted had 9 objects, the 92 that did not had 4 to 2,219
   (81 of them over 10) and took 37 s to fail, up to 1.9 s each; the official suite's (1-2
   objects) fit in milliseconds.  Not when the grammar engine's
   error is the regular compiler's own ``Unsupported`` on a sub-schema: the regular compilation of
   the whole schema meets that sub-schema again (on MaskBench it failed every time, after up to
   seconds).

The DFA attempt of step 1 is bounded by *work*, not by time: ``dfa_work_budget`` cells of
automaton construction (:class:`structgen.automaton.build.WorkBudget`: states x byte classes of
every subset construction, product and minimisation, cache hits charged as if rebuilt), so the
same schema gets the same engine on every run and machine, cold caches or warm.  A million cells
are about 25-40 ms.  Intersecting schemas get ``DFA_WORK_BUDGET_SMALL`` cells (the official
suite's ``allOf`` / ``$ref`` cases need up to 11 million with flexible whitespace), tiny ones
``DFA_WORK_BUDGET``.  Every attempt is TTFM: on 1,000 dev-split schemas the tiny DFAs that fit
cost at most 460,000 cells; the intersecting ones of more than ``INTERSECT_SMALL`` objects took
50-300 ms to try where the grammar engine compiles in 5-40 ms, failed one time in three, and
changed no schema's validation errors, so they are not tried.

The budgets come from MaskBench measurements (``python -m structgen.bench.maskbench``).

``hygiene`` (generation restrictions, :mod:`.hygiene`) goes to whichever compiler runs; when
the restricted language is empty the schema is compiled again exactly (noted in the report).
"""
from __future__ import annotations

from structgen.automaton import ir
from structgen.automaton.build import DEFAULT_MAX_STATES, build_dfa, work_budget
from structgen.errors import EmptyLanguage, LimitExceeded, StructgenError, Unsupported

from ..deep import call_deep
from .cfg import compile_json_schema_cfg
from .empty import empty_error
from .hygiene import with_hygiene
from .options import grammar_options, parse_json_text, regular_options
from .reader import SchemaDocument, for_declared_draft, read_schema, required_in_property_order
from .regular import compile_json_schema
from .dynamic_refs import resolve_dynamic_refs
from .unevaluated import rewrite_unevaluated
from .unique_items import unique_plan, without_open_unique

DFA_MAX_STATES = 20_000
DFA_WORK_BUDGET = 1_000_000         # cells for a tiny schema's DFA (module docstring): 25-40 ms
DFA_WORK_BUDGET_SMALL = 12_000_000  # cells for an intersecting schema of at most INTERSECT_SMALL objects
SMALL_SCHEMA = 4           # sub-schemas: past a handful, the grammar engine compiles faster
SMALL_MAX_STATES = 1_000
INTERSECT_SMALL = 10       # sub-schemas: the official suite's allOf / dependencies cases
DFA_FALLBACK_BUDGET = 60_000_000    # cells for step 3 (a couple of seconds)
FALLBACK_SMALL = 10        # sub-schemas: step 3 is tried up to this size (module docstring)


def compile_with(engine: str, schema, *, dfa_max_states: int = DFA_MAX_STATES,
                 dfa_work_budget: int | None = None, **options):
    """``(engine used, SchemaReport)`` for ``engine`` in ``"auto"|"dfa"|"cfg"``.  With "dfa" (and
    when auto picks it) ``report.grammar`` may be an ``ir.Embed`` of the built DFA.
    ``dfa_work_budget`` (cells) overrides the work budget of auto's DFA attempt.  Unknown
    ``options`` raise :class:`~structgen.errors.OptionError`.  Runs with room for deep recursion
    (:func:`structgen.frontends.deep.call_deep`)."""
    return call_deep(_compile_with, engine, schema, dfa_max_states, dfa_work_budget, options)


def _compile_with(engine, schema, dfa_max_states, dfa_work_budget, options):
    grammar_options(options)
    if engine not in ("auto", "dfa", "cfg"):
        raise ValueError("engine must be 'auto', 'dfa' or 'cfg'")
    schema = resolve_dynamic_refs(for_declared_draft(parse_json_text(schema), options.get("draft")),
                                  options.get("draft"))
    schema = rewrite_unevaluated(schema, options.get("draft"), options.get("lenient", False))
    schema = required_in_property_order(schema, options.get("draft"))
    schema, plan = _open_unique(schema, options)
    doc = read_schema(schema, options.get("draft"))
    options = with_hygiene(options)
    if options.get("hygiene") is None:
        used, report = _compile_doc(engine, doc, dfa_max_states, dfa_work_budget, options)
    else:
        try:
            used, report = _compile_doc(engine, doc, dfa_max_states, dfa_work_budget, options)
        except EmptyLanguage:
            # the restrictions leave no value: the exact language (or its own EmptyLanguage)
            exact = {k: v for k, v in options.items() if k != "hygiene"}
            used, report = _compile_doc(engine, doc, dfa_max_states, dfa_work_budget, exact)
            report.notes.append("generation hygiene is off for this schema: under its restrictions (integer "
                                "range, number digits, string cap) no value is left, so it is compiled exactly")
    report.unique_items = plan
    return used, report


def _open_unique(schema, options):
    """``(schema, plan)``: where ``uniqueItems`` ranges over open item sets and a path plan exists
    (:mod:`.unique_items`), the schema without those keywords and the plan of the guard that
    enforces them; else ``(schema, None)`` (the compilers then take or refuse it as before)."""
    if not _mentions_unique(schema):
        return schema, None
    plan = unique_plan(schema, options.get("draft"))
    if plan is None:
        return schema, None
    stripped = without_open_unique(schema, int(options.get("unique_items_limit", 6)), plan.conditional)
    return (schema, None) if stripped is schema else (stripped, plan)


def _mentions_unique(node) -> bool:
    if isinstance(node, dict):
        return node.get("uniqueItems") is True or any(
            _mentions_unique(v) for k, v in node.items() if k not in ("enum", "const", "examples", "default"))
    if isinstance(node, list):
        return any(_mentions_unique(x) for x in node)
    return False


def _compile_doc(engine, doc, dfa_max_states, dfa_work_budget, options):
    exact = []  # set when the grammar engine found the language empty (exactly: no recursion cut)
    try:
        used, report = _choose(engine, doc, dfa_max_states, dfa_work_budget, options, exact)
    except Unsupported as e:
        if not getattr(e, "empty_language", False):
            raise
        raise empty_error(doc, _exact_regular(options)) from None
    if isinstance(report.grammar, ir.Node) and report.grammar == ir.NOTHING:
        # the empty language, named at the sub-schema that empties it (not at the vocabulary)
        raise empty_error(doc, _exact_regular(options), () if exact else report.truncated)
    return used, report


def _exact_regular(options: dict) -> dict:
    """The regular compiler's options without hygiene (which only names an empty language as
    the exact compilation does)."""
    return regular_options({k: v for k, v in options.items() if k != "hygiene"}, drop_grammar=True)


def _choose(engine, doc, dfa_max_states, dfa_work_budget, options, exact: list):
    if engine == "dfa":
        report = compile_json_schema(doc, **options)
        if report.grammar != ir.NOTHING and not isinstance(report.grammar, ir.Embed):
            try:  # built here (as auto's DFA is) so that an empty language is named now
                dfa = build_dfa(report.grammar, max_states=options.get("max_states", DEFAULT_MAX_STATES),
                                time_limit=options.get("time_limit", 10.0))
                report.grammar = ir.NOTHING if dfa.is_empty() else ir.Embed(dfa)
            except LimitExceeded:
                pass  # left to compile() and its own limits
        return "dfa", report
    if engine == "cfg":
        return "cfg", compile_json_schema_cfg(doc, **options)
    if not doc.recursive():
        facts = doc.facts
        if facts.intersects_objects and facts.size <= INTERSECT_SMALL \
                and options.get("property_order", "declared") != "any":
            # declared order: the DFA keeps intersected objects independent of key order (the
            # grammar merges them into one order); in any order both are exact
            budget, work = dfa_max_states, DFA_WORK_BUDGET_SMALL
        elif facts.size <= SMALL_SCHEMA and not facts.free_form:
            budget, work = SMALL_MAX_STATES, DFA_WORK_BUDGET
        else:
            budget = work = 0
        work = dfa_work_budget if dfa_work_budget is not None else work
        small = _small_dfa(doc, budget, work, options) if budget else None
        if small is not None:
            return "dfa", small
    try:
        return "cfg", compile_json_schema_cfg(doc, **options)
    except (Unsupported, LimitExceeded) as first:
        if isinstance(first, Unsupported) and not getattr(first, "grammar_only", False):
            # the regular compiler could not take a sub-schema: the regular compilation of the whole
            # schema meets it again (on MaskBench it failed every time, after up to seconds)
            raise
        if getattr(first, "empty_language", False):
            exact.append(True)
        if doc.facts.size > FALLBACK_SMALL:
            raise first from None  # (module docstring: larger documents never fitted, after up to seconds)
        states = options.get("max_states", DEFAULT_MAX_STATES)
        whole = _small_dfa(doc, states, DFA_FALLBACK_BUDGET, options, leaf_states=states)
        if whole is None:
            raise first from None
        return "dfa", whole


def _small_dfa(doc: SchemaDocument, max_states: int, work: int, options: dict, leaf_states: int | None = None):
    """The regular compilation of the document with its DFA built, or None past the budget (at
    most ``max_states`` states, ``leaf_states`` for the parts built on the way -- ten times
    ``max_states`` by default -- and ``work`` cells of construction work).  The grammar
    compiler's own options do not concern it."""
    opts = regular_options(dict(options, max_states=10 * max_states if leaf_states is None else leaf_states),
                           drop_grammar=True)
    try:
        with work_budget(work):
            report = compile_json_schema(doc, **opts)
            dfa = build_dfa(report.grammar, max_states=max_states)
    except StructgenError:
        return None
    report.grammar = ir.NOTHING if dfa.is_empty() else ir.Embed(dfa)
    return report

"""Boolean combinations of sub-schemas for the grammar engine: ``not``, overlapping ``oneOf``,
``if``/``then``/``else``, ``allOf`` that does not merge, ``dependentSchemas`` /
``dependentRequired`` / ``dependencies``, ``propertyNames``, ``contains``, counted properties
and items -- without building an automaton of
whole values.

A schema becomes a *formula*: its applicators are Boolean operators (``allOf`` and, ``anyOf`` or,
``oneOf`` exactly one, ``not``, ``if`` as ``(if and then) or (not if and else)``, ``$ref``
followed) over *atoms*, the plain keywords of each sub-schema (``type``, ``properties``,
``minLength``...), and ``enum`` / ``const`` values.  A formula's values are split by JSON type,
since every atom speaks of one type at a time:

- scalars (null, boolean, number, string): the regular language of each atom, combined by
  automaton intersection and complement within that type -- small automata;
- objects: an automaton over *members*.  A member's key falls in a key class (a key some atom
  names, or keys no atom names, split by the ``patternProperties`` they match), and its value in a
  *value class*: which of the atoms' schemas for that key class it satisfies.  A member is one
  symbol (key class, value class) -- key classes are also split by the ``propertyNames`` they
  satisfy --, a state records which atoms a member has violated, which
  required keys are present and how many members were read (capped), and a state accepts when the
  formula holds for the atoms it satisfies.  The automaton is minimised and becomes rules; each
  value class is a formula again, compiled by the same method, so values nest to any depth and
  recursion through ``$ref`` ends in the memo (a formula met again is the same nonterminal);
- arrays: the same over elements, a symbol being (position, value class) with ``items`` /
  ``prefixItems`` / ``contains`` / counts as the atoms' element schemas.

A formula that is one atom without such keywords goes back to the ordinary grammar compiler.
Exactness: every value falls in exactly one value class of its key class, and a class's grammar
is exactly its language (or a subset of it, when a positive atom's ordinary grammar is narrowed:
sound).  Complements of scalars need exact regular languages: a ``format`` we check more strictly
than the oracle is complemented without the format (values the format would take then fall in no
class: sound, narrower, ``report.exact`` is False); another inexact language raises
:class:`Fallback`, as do the keywords this construction does not take (``uniqueItems``, more than
``keys.MAX_KEY_CELLS`` key cells of ``patternProperties``, ``MAX_VALUE_FORMULAS`` distinct value
schemas or ``MAX_VALUE_CLASSES`` value classes for one key class when no discriminator key splits the
object, ``max_states`` automaton states or ``MAX_TRANSITIONS`` transitions for the schema,
``MAX_RULES`` rules for one combination).  On :class:`Fallback` the caller compiles the sub-schema
the regular way, as before.  Only the value classes on live transitions of the minimised
automaton are compiled.

Objects compiled here take their members in any order and leave duplicate keys to the matcher's
key guard (``SchemaReport.unique_keys``).
"""
from __future__ import annotations

from structgen.automaton import ir
from structgen.errors import SchemaError

from . import numbers as json_numbers
from .combine_arrays import ArrayFormulas, Fallback
from .formulas import F, T, f_and, f_atoms, f_eval, f_negative_atoms, f_not, f_one, f_or
from .keys import MAX_KEY_CELLS, key_cells, other_keys_node
from .keywords import TYPES, UNSUPPORTED
from .language import ANY_STAR, pattern_finds
from .reader import always_false, as_list, escape_pointer
from .strings import encode
from .values import canon, json_type

CLASSES = ("null", "boolean", "number", "string", "object", "array")
_SCALAR_CLASS = {"null": frozenset(), "boolean": frozenset(),
                 "number": frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"}),
                 "string": frozenset({"minLength", "maxLength", "pattern", "format"})}
_OBJECT_ATOM = frozenset({"properties", "required", "additionalProperties", "patternProperties",
                          "propertyNames", "minProperties", "maxProperties"})
_ARRAY_ATOM = frozenset({"items", "prefixItems", "additionalItems", "minItems", "maxItems", "contains",
                         "minContains", "maxContains", "uniqueItems"})
_ATOM_KW = frozenset({"type"}) | _OBJECT_ATOM | _ARRAY_ATOM | _SCALAR_CLASS["number"] | _SCALAR_CLASS["string"]
MAX_VALUE_FORMULAS = 16     # distinct schemas for one key class / position
MAX_VALUE_CLASSES = 64      # value classes (sets of those a value satisfies) for one key class
MAX_NAME_SCHEMAS = 8        # distinct propertyNames schemas in one object formula
MAX_FORMULAS = 4000         # formulas compiled for one schema
MAX_TRANSITIONS = 20_000    # member / element automaton transitions (grammar alternatives) for one schema
MAX_RULES = 20_000          # grammar rules one combination (value classes included) may add


class TooManyClasses(Fallback):
    """A key class or array position has too many value classes."""


def _class_of(v) -> str:
    """The type class of a JSON value (integers are numbers)."""
    t = json_type(v)
    return "number" if t == "integer" else t


def _const_atom(v, cls: str) -> dict:
    """The schema of exactly the value ``v`` (of class ``cls``) in plain keywords."""
    if cls == "object":
        return {"type": "object", "properties": {k: {"const": x} for k, x in v.items()},
                "required": list(v), "additionalProperties": False}
    if cls == "array":
        return {"type": "array", "prefixItems": [{"const": x} for x in v], "items": False, "minItems": len(v)}
    return {"const": v}


class Combiner(ArrayFormulas):
    """Compiles formulas to grammar symbols for a :class:`~.cfg.CfgSchemaCompiler`
    (``owner``): its rules, terminals, memo and report."""

    def __init__(self, owner, max_states: int = 4096):
        self.o = owner
        self.rc = owner.rc
        self.max_states = int(max_states)
        self.atoms: list = []        # atom number -> (dict, base)
        self._atom_ids: dict = {}    # (id(dict), base) -> atom number
        self._keep: list = []        # dicts made here (their ids are keys)
        self._flat: dict = {}        # (id(schema), base) -> (schema, formula)
        self._restricted: dict = {}  # (atom, class) -> formula
        self._own: dict = {}         # id(schema) -> (schema, its plain keywords); tuple keys: made dicts
        self.memo: dict = {}        # formula -> symbol (None: no value)
        self._types: dict = {}       # atom -> frozenset of classes it allows
        self.transitions = 0         # kept automaton transitions so far (MAX_TRANSITIONS)
        self.rules_limit = None      # len(owner.rules) past which the current combination stops

    # ------------------------------------------------------------------ atoms
    def atom(self, d: dict, base) -> tuple:
        key = (id(d), base)
        n = self._atom_ids.get(key)
        if n is None:
            n = len(self.atoms)
            self.atoms.append((d, base))
            self._atom_ids[key] = n
            self._keep.append(d)
        return ("A", n)

    def flatten(self, s, base, ptr: str = "", depth: int = 0):
        """The formula of schema ``s``."""
        if s is True:
            return T
        if s is False:
            return F
        if not isinstance(s, dict):
            raise SchemaError(f"a schema must be an object or a boolean, got {type(s).__name__}", ptr)
        if not s:
            return T
        if depth > 64:
            raise Fallback("a $ref cycle that does not go through a property or an item")
        rc = self.rc
        base = rc.base_of.get(id(s), base)
        key = (id(s), base)
        hit = self._flat.get(key)
        if hit is not None and hit[0] is s:
            return hit[1]
        if always_false(s, rc.draft):
            return F
        if rc.draft == "draft7" and "$ref" in s:
            t, tb = rc.resolve(s["$ref"], base, ptr)
            out = self.flatten(t, tb, f"{ptr}/$ref", depth + 1)
            self._flat[key] = (s, out)
            return out
        for k in s:
            if k in UNSUPPORTED and s[k] is not True:
                raise Fallback(f"{k} is not supported")
        if rc.draft == "draft7" and ("contentMediaType" in s or "contentEncoding" in s):
            raise Fallback("content decoding")
        parts = []
        own = self._own.get(id(s))
        if own is None or own[0] is not s:
            own = (s, {k: v for k, v in s.items() if k in _ATOM_KW})
            self._own[id(s)] = own
        if own[1]:
            parts.append(self.atom(own[1], base))
        if "$ref" in s:
            t, tb = rc.resolve(s["$ref"], base, ptr)
            parts.append(self.flatten(t, tb, f"{ptr}/$ref", depth + 1))
        if "const" in s:
            parts.append(self.const(s["const"]))
        if "enum" in s:
            vals = as_list(s["enum"], "enum", ptr)
            parts.append(f_or([self.const(v) for v in vals]))
        for i, x in enumerate(as_list(s.get("allOf"), "allOf", ptr)):
            parts.append(self.flatten(x, base, f"{ptr}/allOf/{i}", depth + 1))
        if "anyOf" in s:
            parts.append(f_or([self.flatten(x, base, f"{ptr}/anyOf/{i}", depth + 1)
                               for i, x in enumerate(as_list(s["anyOf"], "anyOf", ptr))]))
        if "oneOf" in s:
            parts.append(f_one([self.flatten(x, base, f"{ptr}/oneOf/{i}", depth + 1)
                                for i, x in enumerate(as_list(s["oneOf"], "oneOf", ptr))]))
        if "not" in s:
            parts.append(f_not(self.flatten(s["not"], base, f"{ptr}/not", depth + 1)))
        if "if" in s and ("then" in s or "else" in s):
            c = self.flatten(s["if"], base, f"{ptr}/if", depth + 1)
            th = self.flatten(s.get("then", True), base, f"{ptr}/then", depth + 1)
            el = self.flatten(s.get("else", True), base, f"{ptr}/else", depth + 1)
            parts.append(f_or([f_and([c, th]), f_and([f_not(c), el])]))
        for kw in ("dependentRequired", "dependentSchemas", "dependencies"):
            v = s.get(kw)
            if not isinstance(v, dict):
                continue
            for k, x in v.items():
                has = self.atom(self._frozen(("has", k), {"type": "object", "required": [k]}), None)
                if kw == "dependentRequired" or isinstance(x, list):
                    then = self.atom(self._frozen(("req", tuple(x)), {"required": list(x)}), None)
                else:
                    then = self.flatten(x, base, f"{ptr}/{kw}/{escape_pointer(k)}", depth + 1)
                parts.append(f_or([f_not(has), then]))
        out = f_and(parts)
        self._flat[key] = (s, out)
        return out

    def _frozen(self, key, d: dict) -> dict:
        """One dict per ``key`` (atoms are identified by their dict)."""
        hit = self._own.get(key)
        if hit is None:
            hit = self._own[key] = (key, d)
        return hit[1]

    def const(self, v):
        return self.atom(self._frozen(("const", canon(v)), {"$structgen:const": v}), None)

    def restrict(self, n: int, cls: str):
        """Atom ``n`` as a formula over values of class ``cls``: T, F or a restricted atom."""
        key = (n, cls)
        hit = self._restricted.get(key)
        if hit is not None:
            return hit
        d, base = self.atoms[n]
        if "$structgen:const" in d:
            v = d["$structgen:const"]
            c = _class_of(v)
            out = F if c != cls else self.atom(self._frozen(("constc", canon(v)), _const_atom(v, c)), base)
            if c == cls and cls in ("object", "array"):
                out = self.restrict(out[1], cls)
            self._restricted[key] = out
            return out
        t = d.get("type")
        integer_only = False
        if t is not None:
            tl = set(t if isinstance(t, list) else [t])
            for x in tl:
                if x not in TYPES and x != "integer":
                    if x == "any":
                        tl = set(TYPES)
                        break
                    raise SchemaError(f"unknown type {x!r}", "/type")
            allowed = cls in tl or (cls == "number" and "integer" in tl)
            if not allowed:
                self._restricted[key] = F
                return F
            integer_only = cls == "number" and "number" not in tl
        kws = _SCALAR_CLASS[cls] if cls in _SCALAR_CLASS else _OBJECT_ATOM if cls == "object" else _ARRAY_ATOM
        rel = {k: d[k] for k in kws if k in d}
        if cls == "array" and not isinstance(rel.get("items"), list):
            rel.pop("additionalItems", None)  # only array-form (draft-07) items have additional items
        if cls == "array" and "contains" not in rel:
            rel.pop("minContains", None)
            rel.pop("maxContains", None)
        if not rel and not integer_only:
            out = T
        else:
            rel["type"] = "integer" if integer_only else cls
            out = self.atom(self._frozen(("r", n, cls), rel), base)
        self._restricted[key] = out
        return out

    def restrict_formula(self, f, cls: str):
        op = f[0]
        if op in ("T", "F"):
            return f
        if op == "A":
            return self.restrict(f[1], cls)
        if op == "N":
            return f_not(self.restrict_formula(f[1], cls))
        parts = [self.restrict_formula(x, cls) for x in f[1:]]
        return f_and(parts) if op == "&" else f_or(parts) if op == "|" else f_one(parts)

    def classes_of(self, f) -> frozenset:
        """A superset of the JSON classes ``f`` has values in (cheap)."""
        op = f[0]
        if op == "T" or op == "N":
            return frozenset(CLASSES)
        if op == "F":
            return frozenset()
        if op == "A":
            n = f[1]
            hit = self._types.get(n)
            if hit is None:
                hit = self._types[n] = frozenset(c for c in CLASSES if self.restrict(n, c) != F)
            return hit
        subs = [self.classes_of(x) for x in f[1:]]
        if op == "&":
            out = frozenset(CLASSES)
            for x in subs:
                out &= x
            return out
        out = frozenset()
        for x in subs:
            out |= x
        return out

    # ------------------------------------------------------------------ values
    def schema_value(self, s, ptr: str, base):
        """The symbol of the values of schema ``s`` (None: none); raises :class:`Fallback`."""
        outer = self.rules_limit is None
        if outer:
            self.rules_limit = len(self.o.rules) + MAX_RULES
        try:
            return self.value(self.flatten(s, base, ptr), ptr)
        finally:
            if outer:
                self.rules_limit = None

    def value(self, f, ptr: str = ""):
        """The symbol of the values satisfying formula ``f`` (None: none)."""
        if f in self.memo:
            return self.memo[f]
        o = self.o
        if f == T:
            return o.any_value()
        if f == F:
            return None
        if f[0] == "A" and self.plain(self.atoms[f[1]][0]):
            d, base = self.atoms[f[1]]
            sym = o.value(d, ptr, base)
            self.memo[f] = sym
            return sym
        if len(self.memo) >= MAX_FORMULAS:
            raise Fallback(f"more than {MAX_FORMULAS} formulas")
        if len(o.rules) > self.rules_limit:
            raise Fallback(f"more than {MAX_RULES} grammar rules")
        self.rc.check_time()
        name = o.fresh("B")
        self.memo[f] = name
        alts = []
        types = self.classes_of(f)
        for cls in [c for c in CLASSES if c in types]:
            g = self.restrict_formula(f, cls)
            if g == F:
                continue
            if cls == "object":
                alts += self.object(g, ptr)
            elif cls == "array":
                alts += self.array(g, ptr)
            else:
                sym = self.scalar(g, cls, ptr)
                if sym is not None:
                    alts.append((sym,))
        o.rules[name] = alts
        return name

    @staticmethod
    def plain(d: dict) -> bool:
        """Does the ordinary grammar compiler take this atom without coming back here?"""
        if "$structgen:const" in d:
            return False
        if any(k in d for k in ("propertyNames", "contains", "minProperties", "maxProperties")):
            return False
        return not (d.get("uniqueItems") is True)

    # ------------------------------------------------------------------ scalars
    def _universe(self, cls: str, complement: bool = False) -> ir.Node:
        """Every scalar of ``cls``; ``complement``: the universe a complement is taken in, where
        numbers are exponent-free (the numeric languages are exact only there: ``1e5`` is an
        integer that ``INTEGER`` does not spell, so ``not: {type: integer}`` must not take it)."""
        if cls == "number" and complement:
            return json_numbers.PLAIN_NUMBER
        if cls == "null":
            return ir.literal("null")
        if cls == "boolean":
            return ir.alt(ir.literal("true"), ir.literal("false"))
        if cls == "number":
            return json_numbers.NUMBER
        return self.rc.string_node()

    def scalar(self, f, cls: str, ptr: str):
        node = self._scalar_ir(f, cls, ptr, True)
        return self.o.term(node, cls[:3])

    def _scalar_ir(self, f, cls: str, ptr: str, positive: bool) -> ir.Node:
        op = f[0]
        if op == "T":
            return self._universe(cls)
        if op == "F":
            return ir.NOTHING
        if op == "A":
            d, base = self.atoms[f[1]]
            if "$structgen:const" in d:
                lang = self.rc.enum_const({"const": d["$structgen:const"]}, ptr)
            else:
                lang = self.rc.compile(d, ptr, base)
            if not lang.exact and not positive and "format" in d:
                # complemented below: use the language without the format (a superset of the
                # atom's), so the complement stays inside the true one; values the format would
                # take are then in no class (sound, narrower)
                d = self._frozen(("noformat", id(d)), {k: v for k, v in d.items() if k != "format"})
                lang = self.rc.compile(d, ptr, base)
                self.o.report.exact = False
            if not lang.exact:
                if not positive:
                    raise Fallback(f"the complement of a narrowed scalar language ({str(d)[:80]})")
                self.o.report.exact = False
            return lang.node
        if op == "N":
            inner = self._scalar_ir(f[1], cls, ptr, not positive)
            return ir.And((self._universe(cls, True), ir.Not(inner)))
        if op == "&":
            return ir.And(tuple(self._scalar_ir(x, cls, ptr, positive) for x in f[1:]))
        if op == "|":
            return ir.alt(*[self._scalar_ir(x, cls, ptr, positive) for x in f[1:]])
        pos = [self._scalar_ir(x, cls, ptr, positive) for x in f[1:]]
        neg = [self._scalar_ir(x, cls, ptr, not positive) for x in f[1:]]
        u = self._universe(cls, True)
        return ir.alt(*[ir.And((pos[i], *[ir.And((u, ir.Not(neg[j]))) for j in range(len(pos)) if j != i]))
                        for i in range(len(pos))])

    # ------------------------------------------------------------------ objects
    def object(self, f, ptr: str) -> list:
        """The alternatives (``{`` ... ``}``) of the objects satisfying ``f`` (atoms restricted to
        objects)."""
        o, rc = self.o, self.rc
        if f == T:
            o.any_value()  # defines "$members"
            return [(o.lit("{"), o.lit("}")), (o.lit("{"), "$members", o.lit("}"))]
        if f[0] == "A" and self.plain(self.atoms[f[1]][0]):
            return [(self.value(f, ptr),)]
        ids = f_atoms(f)
        atoms = []
        for n in ids:
            d, base = self.atoms[n]
            props = d.get("properties") or {}
            req = d.get("required") or []
            pats = d.get("patternProperties") or {}
            if not isinstance(props, dict) or not isinstance(req, list) or not isinstance(pats, dict):
                raise Fallback("malformed object keywords")
            lo = int(d.get("minProperties", 0))
            hi = d.get("maxProperties")
            atoms.append((n, base, props, list(dict.fromkeys(req)), pats, d.get("additionalProperties", True),
                          lo, None if hi is None else int(hi)))
        keys = list(dict.fromkeys([k for a in atoms for k in list(a[2]) + a[3]]))
        patterns = list(dict.fromkeys([p for a in atoms for p in a[4]]))
        pat_ir = [rc.pattern(p, f"{ptr}/patternProperties") for p in patterns]
        # propertyNames: key languages (quoted, like the keys) each atom's keys must be in
        names, name_of = [], []
        negative = f_negative_atoms(f)
        for n in ids:
            d, base = self.atoms[n]
            pn = d.get("propertyNames", True)
            if pn is True or pn == {}:
                name_of.append(None)
                continue
            j = next((j for j, (x, _, _) in enumerate(names) if x is pn), None)
            if j is None:
                lang = rc.compile(pn, f"{ptr}/propertyNames", base)
                j = len(names)
                names.append((pn, lang.node, lang.exact))
            if not names[j][2]:
                # a key outside the narrowed language makes the atom false: the object language
                # narrows only where no negation turns that into a wider one
                if n in negative:
                    raise Fallback("propertyNames with a narrowed language under a negation")
                o.report.exact = False
            name_of.append(j)
        if len(names) > MAX_NAME_SCHEMAS:
            raise Fallback(f"more than {MAX_NAME_SCHEMAS} propertyNames schemas")

        def named(vals, ok):
            """``vals`` with F for the atoms whose propertyNames the key fails (``ok[j]``: the key
            satisfies names[j])."""
            return [F if name_of[i] is not None and not ok[name_of[i]] else v for i, v in enumerate(vals)]

        required = [k for k in keys if any(k in a[3] for a in atoms)]
        bit = {k: 1 << i for i, k in enumerate(required)}
        colon = o.lit(":")

        # key classes: (key symbol, value formula per atom, presence bit)
        kclasses = []
        for k in keys:
            matched = {p for i, p in enumerate(patterns) if pattern_finds(k, pat_ir[i])}
            vals = []
            for (n, base, props, req, pats, addl, lo, hi) in atoms:
                parts = [self.flatten(props[k], base, f"{ptr}/properties/{escape_pointer(k)}")] if k in props else []
                parts += [self.flatten(v, base, f"{ptr}/patternProperties") for p, v in pats.items() if p in matched]
                vals.append(f_and(parts) if parts else self.flatten(addl, base, f"{ptr}/additionalProperties"))
            key_ir = rc.key_literal(k)
            ok = [rc.block(ir.And((key_ir, node))) != ir.NOTHING for _, node, _ in names]
            kclasses.append((o.term(key_ir, "key"), named(vals, ok), bit.get(k, 0)))
        not_declared = ir.Not(ir.alt(*[ir.literal(k) if k else ir.EMPTY for k in keys])) if keys else None
        if patterns:
            cells = key_cells(tuple(pat_ir), keys)
            if cells is None:
                raise Fallback(f"patternProperties split keys into more than {MAX_KEY_CELLS} cells")
        else:
            key_ir = other_keys_node(keys) if keys else rc.key_node()
            if key_ir is None:
                key_ir = ir.seq(ir.literal('"'), encode(ir.And((ANY_STAR, not_declared)), "key"), ir.literal('"'))
            cells = [((), key_ir)]
        for matched, key_ir in cells:
            chosen = {patterns[i] for i in matched}
            vals = []
            for (n, base, props, req, pats, addl, lo, hi) in atoms:
                parts = [self.flatten(v, base, f"{ptr}/patternProperties") for p, v in pats.items() if p in chosen]
                vals.append(f_and(parts) if parts else self.flatten(addl, base, f"{ptr}/additionalProperties"))
            for lang, ok in self._name_classes(key_ir, [node for _, node, _ in names]):
                key = o.term(lang, "xkey")
                if key is not None:
                    kclasses.append((key, named(vals, ok), 0))

        bounds = [b for a in atoms for b in (a[6], a[7]) if b is not None]
        cap = max(bounds) + 1 if bounds else 0

        def accepts(state):
            present, viol, count = state
            sat = set()
            for i, (n, base, props, req, pats, addl, lo, hi) in enumerate(atoms):
                if viol >> i & 1 or any(not present & bit[k] for k in req):
                    continue
                if count < lo or (hi is not None and count > hi):
                    continue
                sat.add(n)
            return f_eval(f, sat)

        def step(state, eff):
            present, viol, count = state
            b, vm = eff
            if present & b:
                return None
            return (present | b, viol | vm, min(count + 1, cap))

        def members(skip=None, dead=0):
            """(presence bit, violation mask) -> [(key symbol, value formula)] for every key class
            but ``skip``; atoms in ``dead`` are violated already, so their schemas do not split
            values into classes."""
            effects = {}
            for j, (key, vals, b) in enumerate(kclasses):
                if j != skip:
                    vals = [T if dead >> i & 1 else v for i, v in enumerate(vals)]
                    for vf, vm in self.value_classes(vals, ptr):
                        effects.setdefault((b, vm), []).append(((key, colon), vf))
            return effects

        try:
            return self.sequence("{", "}", (0, 0, 0), members(), step, accepts, ptr)
        except TooManyClasses:
            pass
        # Too many value classes while every atom may still hold.  A discriminator -- a key whose
        # schemas under the atoms are pairwise disjoint (const / enum values, types) -- settles
        # most atoms as soon as its value is known: one automaton per value class of it, where
        # the atoms that class violates no longer split the other keys' values.  Objects
        # without the discriminator keep only the atoms that do not require it; if they still
        # have too many classes, they are left out (sound, narrower: report.exact is False).
        extra_bit = 1 << len(required)
        for j, (dkey, dvals, dbit) in enumerate(kclasses[:len(keys)]):
            distinct = [v for v in dict.fromkeys(dvals) if v not in (T, F)]
            if len(distinct) < 2 or not all(self._disjoint(a, b, self._finite(a), self._finite(b))
                                            for x, a in enumerate(distinct) for b in distinct[x + 1:]):
                continue
            b_d = dbit or extra_bit
            alts = []
            try:
                for vf, vm in self.value_classes(dvals, ptr):
                    effects = members(skip=j, dead=vm)
                    effects.setdefault((b_d, vm), []).append(((dkey, colon), vf))
                    alts += self.sequence("{", "}", (0, vm, 0), effects, step,
                                           lambda st: bool(st[0] & b_d) and accepts(st), ptr)
            except TooManyClasses:
                continue
            need_d = sum(1 << i for i, a in enumerate(atoms) if keys[j] in a[3])
            try:
                alts += self.sequence("{", "}", (0, need_d, 0), members(skip=j, dead=need_d), step, accepts, ptr)
            except TooManyClasses:
                self.o.report.exact = False
            return alts
        raise TooManyClasses(f"more than {MAX_VALUE_CLASSES} value classes for one key, no discriminator")

    def _name_classes(self, key_ir, names: list) -> list:
        """``[(key language, [satisfies names[j]])]``: the keys of ``key_ir`` split by the
        propertyNames languages they satisfy, empty parts left out (found branch by branch)."""
        out = []

        def grow(node, ok):
            if len(ok) == len(names):
                out.append((node, ok))
                return
            for yes in (True, False):
                nxt = self.rc.block(ir.And((node, names[len(ok)] if yes else ir.Not(names[len(ok)]))))
                if nxt != ir.NOTHING:
                    grow(nxt, ok + [yes])

        try:
            grow(key_ir if not names else self.rc.block(key_ir), [])
        finally:
            grow = None  # a recursive closure holding the combiner: break the cycle for refcounting
        return out

    def value_classes(self, vals: list, ptr: str) -> list:
        """``[(formula, violation mask)]``: the value classes of a key class (or an array
        position) whose schema under atom ``i`` is ``vals[i]``; the mask has bit ``i`` when a
        value of the class violates ``vals[i]``."""
        distinct = []
        for v in vals:
            if v not in (T, F) and v not in distinct:
                distinct.append(v)
        if len(distinct) > MAX_VALUE_FORMULAS:
            raise TooManyClasses(f"more than {MAX_VALUE_FORMULAS} different schemas for one key")
        always = 0
        for i, v in enumerate(vals):
            if v == F:
                always |= 1 << i
        n = len(distinct)
        types = [self.classes_of(d) for d in distinct]
        finite = [self._finite(d) for d in distinct]
        classes = []   # bit sets of the formulas a class satisfies, without two known disjoint

        def grow(j, c, common):
            if len(classes) > MAX_VALUE_CLASSES:
                raise TooManyClasses(f"more than {MAX_VALUE_CLASSES} value classes for one key")
            if j == n:
                classes.append(c)
                return
            grow(j + 1, c, common)
            both = common & types[j]
            if both and not any(c >> i & 1 and self._disjoint(distinct[i], distinct[j], finite[i], finite[j])
                                for i in range(j)):
                grow(j + 1, c | 1 << j, both)

        try:
            grow(0, 0, frozenset(CLASSES))
        finally:
            grow = None  # a recursive closure holding the combiner: break the cycle for refcounting
        out = []
        for c in classes:
            vf = f_and([distinct[j] if c >> j & 1 else f_not(distinct[j]) for j in range(n)])
            if vf == F:
                continue
            vm = always
            for i, v in enumerate(vals):
                if v not in (T, F) and not c >> distinct.index(v) & 1:
                    vm |= 1 << i
            out.append((vf, vm))
        return out

    def _finite(self, f):
        """The canonical values of ``f`` when it is a ``const`` / ``enum`` (a union of ``const``
        atoms), else None."""
        if f[0] == "A":
            d = self.atoms[f[1]][0]
            return {canon(d["$structgen:const"])} if "$structgen:const" in d else None
        if f[0] == "|":
            out = set()
            for x in f[1:]:
                v = self._finite(x)
                if v is None:
                    return None
                out |= v
            return out
        if f[0] == "&":
            sets = [self._finite(x) for x in f[1:]]
            sets = [x for x in sets if x is not None]
            if sets:
                out = sets[0]
                for x in sets[1:]:
                    out = out & x
                return out
        return None

    def _disjoint(self, a, b, fa, fb) -> bool:
        """No value satisfies both ``a`` and ``b`` (a cheap, incomplete test): no common type,
        disjoint finite sets, or one excludes (``not``) a finite set holding the other."""
        if not self.classes_of(a) & self.classes_of(b):
            return True
        if fa is not None and fb is not None:
            return not fa & fb
        for x, fy in ((a, fb), (b, fa)):
            if fy is not None:
                for part in (x[1:] if x[0] == "&" else (x,)):
                    if part[0] == "N":
                        excluded = self._finite(part[1])
                        if excluded is not None and fy <= excluded:
                            return True
        return False

    def sequence(self, open_: str, close: str, start, effects: dict, step, accepts, ptr: str) -> list:
        """Rules for ``open_ (item ("," item)*)? close`` where items are read by the automaton
        ``step`` from ``start``: its states explored, minimised and trimmed, one nonterminal pair
        per state.  ``effects`` maps a symbol's effect (the argument of ``step``) to its items
        ``(prefix symbols, value formula)``; only the values on live transitions are compiled (a
        class that can only lead to rejection costs nothing, even a complement that would not be
        exact)."""
        o = self.o
        effs = list(effects)
        index = {start: 0}
        states = [start]
        delta = []
        i = 0
        while i < len(states):
            if not i & 255:
                self.rc.check_time()
            row = []
            for e in effs:
                t = step(states[i], e)
                if t is None:
                    row.append(-1)
                    continue
                j = index.get(t)
                if j is None:
                    if len(states) >= self.max_states:
                        raise Fallback(f"more than {self.max_states} member states")
                    j = index[t] = len(states)
                    states.append(t)
                row.append(j)
            delta.append(row)
            i += 1
        acc = [accepts(s) for s in states]
        # Moore minimisation
        block = [1 if a else 0 for a in acc]
        n_blocks = len(set(block))
        while True:
            sig = {}
            new = []
            for q in range(len(states)):
                key = (block[q], *[block[t] if t >= 0 else -1 for t in delta[q]])
                new.append(sig.setdefault(key, len(sig)))
            if len(sig) == n_blocks:
                break
            block, n_blocks = new, len(sig)
        rep = {}
        for q in range(len(states)):
            rep.setdefault(block[q], q)
        # live blocks: reach an accepting one
        bdelta = {b: [block[t] if t >= 0 else -1 for t in delta[q]] for b, q in rep.items()}
        bacc = {b: acc[q] for b, q in rep.items()}
        live = {b for b in rep if bacc[b]}
        changed = True
        while changed:
            changed = False
            for b in rep:
                if b not in live and any(t in live for t in bdelta[b]):
                    live.add(b)
                    changed = True
        b0 = block[0]
        lb, rb, comma = o.lit(open_), o.lit(close), o.lit(",")
        if b0 not in live:
            return []
        used = {e for b in live for e, t in zip(effs, bdelta[b]) if t in live}
        self.transitions += sum(1 for b in live for t in bdelta[b] if t in live)
        if self.transitions > MAX_TRANSITIONS:
            raise Fallback(f"more than {MAX_TRANSITIONS} member automaton transitions")
        mem = {}
        for e in effs:
            if e in used:
                alts = []
                for prefix, vf in effects[e]:
                    sym = self.value(vf, ptr)
                    if sym is not None:
                        alts.append((*prefix, sym))
                mem[e] = o.rule("M", alts)
        fn = {b: o.fresh("F") for b in live}
        gn = {b: o.fresh("G") for b in live}
        for b in live:
            by_target: dict = {}
            for e, t in zip(effs, bdelta[b]):
                if t in live:
                    by_target.setdefault(t, []).append(e)
            alts = []
            for t, es in by_target.items():
                m = mem[es[0]] if len(es) == 1 else o.rule("M", [(mem[e],) for e in es])
                alts.append((m, gn[t]))
            o.rules[fn[b]] = alts
        for b in live:
            o.rules[gn[b]] = ([(comma, fn[b])] if o.rules[fn[b]] else []) + ([()] if bacc[b] else [])
        out = [(lb, fn[b0], rb)] if o.rules[fn[b0]] else []
        if bacc[b0]:
            out.append((lb, rb))
        return out

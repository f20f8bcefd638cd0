"""The user API: ``generate``, ``Generator`` and the ``@function`` decorator.

    import structgen as sg
    r = sg.generate(model, tokenizer, "Extract: Ann is 31.", schema=Person)
    r.value            # Person(name='Ann', age=31)
    r.text, r.token_ids, r.forward_passes, r.timings, r.projection_tax

    gen = sg.Generator(model, tokenizer)          # compile once, call many
    gen("...", schema=Person); gen(["a", "b", "c"], regex=r"\\d+")   # a list in, a list out
    for chunk in gen.stream("...", schema=Person): print(chunk, end="")

    @sg.function(model=model, tokenizer=tokenizer)
    def extract(text: str) -> Person:
        '''Extract the person described in: {text}'''

Constraints: exactly one of ``schema=`` (a Pydantic model, any type Pydantic's
TypeAdapter accepts, a JSON Schema dict or JSON text), ``regex=``, ``grammar=``
(a :class:`Grammar`, Lark text, or GBNF text when it contains ``::=``) and
``choices=``, or ``items=`` (an :class:`ItemIndex` / :class:`ItemCatalog` of token sequences);
none means unconstrained.  Decoding is the batched loop of
:mod:`structgen.decoding.autoregressive` (KV cache, left padding, fast-forward).
"""
from __future__ import annotations

import codecs
import inspect
import json
import os
import re
import threading
import time
import typing
from typing import Iterator

import torch

from . import caching
from .automaton.dfa import ByteDFA
from .compiler import CompiledGrammar, CompileStats, slicing_of
from .compiler import compile as _compile
from .decoding.autoregressive import DecodeStats, Row, decode_steps
from .decoding.options import check_generate_options
from .decoding.result import GenerationResult, clip_text
from .decoding.speculative import Speculative, speculative_decode_steps
from .constraints import Constraint, choice_strings, constraint_from_annotation, identity, resolve_constraint, \
    string_choices
from .errors import GenerationError, OptionError, StructgenError, Unsupported, VocabularyError
from .grammar import Grammar
from .index.catalog import ItemCatalog
from .index.items import ItemIndex, ItemSubset
from .index.token_dfa import TokenDFA
from .runtime.item_matcher import ItemMatcher
from .models import load_demo, model_logits_width
from .tools import parse_output
from .vocab import Vocabulary

__all__ = ["generate", "Generator", "GenerationResult", "GenerationError", "Constraint", "TextStream",
           "function", "constraint_from_annotation", "CHOICES_INDEX_THRESHOLD"]

#: ``choices=`` lists longer than this are decoded through an :class:`ItemIndex` of each choice's
#: canonical tokenization (a trie: memory and build time linear in the choices) instead of a
#: regular automaton (which admits every tokenization of each choice but does not scale to
#: millions).  Falls back to the automaton when the tokenizer does not round-trip a choice.
CHOICES_INDEX_THRESHOLD = 2000


def token_text(vocab, ids) -> bytes:
    """The bytes of ``ids`` with special tokens as their text (EOS left out)."""
    eos = set(vocab.eos_ids.tolist())
    return b"".join(vocab.token_bytes(t) if vocab.is_normal[t] else
                    vocab.special_tokens.get(int(t), "").encode("utf-8") if int(t) not in eos else b""
                    for t in ids)


# ----------------------------------------------------------------------------- prompts
def _is_messages(x) -> bool:
    return isinstance(x, (list, tuple)) and len(x) > 0 and all(isinstance(m, dict) and "role" in m for m in x)


def _split_batch(prompt) -> tuple[list, bool]:
    """(list of single prompts, was it a batch)."""
    if isinstance(prompt, str) or _is_messages(prompt):
        return [prompt], False
    if isinstance(prompt, (list, tuple)):
        if not prompt:
            raise ValueError("the batch of prompts is empty")
        for i, p in enumerate(prompt):
            if not (isinstance(p, str) or _is_messages(p)):
                raise TypeError(f"prompt {i} is a {type(p).__name__}: each prompt is a string or a list of "
                                "chat messages ({'role': ..., 'content': ...})")
        return list(prompt), True
    raise TypeError(f"prompt must be a string, a list of chat messages, or a list of those; "
                    f"got {type(prompt).__name__}")


def _encode_prompt(tokenizer, prompt, chat: bool | None, system: str | None) -> tuple[list[int], str]:
    messages = prompt if _is_messages(prompt) else None
    if messages is None and chat:
        messages = [{"role": "user", "content": prompt}]
    if messages is not None:
        if system is not None and messages[0].get("role") != "system":
            messages = [{"role": "system", "content": system}] + list(messages)
        if not getattr(tokenizer, "chat_template", None):
            raise StructgenError("this tokenizer has no chat template: pass a plain prompt with chat=False")
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    else:
        text = prompt
        ids = tokenizer(text)["input_ids"]
    return [int(i) for i in ids], text


# ----------------------------------------------------------------------------- vocabularies
_VOCABS = caching.LRU(8, name="api.vocabularies")  # (id(tokenizer), width, eos ids) -> (tokenizer, vocab)
_VOCAB_LOCK = threading.Lock()


def vocabulary_for(model, tokenizer):
    """The :class:`Vocabulary` of ``tokenizer`` at the model's logits width, with the model's
    generation-config EOS ids added; cached per (tokenizer, width)."""
    width = model_logits_width(model) if model is not None else None
    gen_eos = getattr(getattr(model, "generation_config", None), "eos_token_id", None)
    extra = [] if gen_eos is None else ([gen_eos] if isinstance(gen_eos, int) else list(gen_eos))
    key = (id(tokenizer), width, tuple(extra))
    with _VOCAB_LOCK:
        hit = _VOCABS.get(key)
        if hit is not None and hit[0] is tokenizer:
            return hit[1]
        vocab = Vocabulary.from_tokenizer(tokenizer, logits_width=width, eos_ids=extra)
        _VOCABS.put(key, (tokenizer, vocab))
        return vocab


# ----------------------------------------------------------------------------- the generator
class Generator:
    """A model and tokenizer, ready to generate under constraints many times.

    Compiled constraints are cached in memory per (constraint, vocabulary) and, with
    ``cache_dir``, regular ones also on disk (their byte DFA under ``cache_dir/dfa`` in the format of
    :mod:`structgen.caching`, keyed by the
    constraint and the vocabulary fingerprint).  Keyword defaults given here
    (``max_new_tokens``, ``temperature``, ``chat``, ``system``, ``whitespace``, ...)
    apply to every call unless a call overrides them.  ``model=None`` (with
    ``tokenizer=None``) loads the demo model and its tokenizer
    (:func:`structgen.models.load_demo`); a tokenizer without a model raises
    :class:`~structgen.errors.OptionError` (the demo's logits would not fit it).
    """

    def __init__(self, model=None, tokenizer=None, *, vocab=None, cache_dir: str | os.PathLike | None = None,
                 **defaults):
        if model is None and tokenizer is not None:
            raise OptionError("model=None with a tokenizer: model=None stands for the demo model "
                              "(structgen.models.load_demo), which brings its own tokenizer; pass the model that "
                              "goes with this tokenizer, or neither")
        check_generate_options({k: v for k, v in defaults.items() if k in _GEN_OPTIONS})
        if model is None:
            model, tokenizer = load_demo()
            defaults.setdefault("chat", True)
        if tokenizer is None:
            raise TypeError("Generator needs the model's tokenizer (tokenizer=...)")
        self.model = model
        self.tokenizer = tokenizer
        self.vocab = vocab if vocab is not None else vocabulary_for(model, tokenizer)
        self.cache_dir = os.fspath(cache_dir) if cache_dir is not None else None
        self._disk = caching.DiskCache("dfa", self.cache_dir) if self.cache_dir is not None else None
        self.defaults = defaults
        # per generator, registered (weakly) so that sg.clear_caches() and sg.cache_info() see them
        self._compiled = caching.LRU(128)
        self._constraints = caching.LRU(128)
        caching.register_group("api.generator.compiled").add(self._compiled)
        caching.register_group("api.generator.constraints").add(self._constraints)
        self._bad_defaults = set(defaults) - set(_GEN_OPTIONS) - set(_CONSTRAINT_OPTIONS)
        if self._bad_defaults:
            raise TypeError(f"unknown Generator options: {sorted(self._bad_defaults)}")

    # -- compiling
    def constraint(self, **spec) -> Constraint:
        """Resolve ``schema=/regex=/grammar=/choices=`` (plus ``whitespace=``, ``schema_options=``),
        cached: the front-ends (JSON Schema -> IR, ...) run once per distinct spec."""
        for k in ("whitespace", "schema_options", "property_order"):
            if k in self.defaults and k not in spec:
                spec[k] = self.defaults[k]
        key = _spec_key(spec)
        hit = self._constraints.get(key) if key is not None else None
        if hit is not None:
            return hit
        c = resolve_constraint(**spec)
        if key is not None:
            self._constraints.put(key, c)
        return c

    def compile(self, grammar: Grammar) -> CompiledGrammar:
        """``grammar`` compiled for this vocabulary (memory cache, then disk cache, then compile)."""
        key = grammar.key
        hit = self._compiled.get(key)
        if hit is not None:
            return hit
        cg = self._load_from_disk(grammar)
        if cg is None:
            cg = _compile(grammar, self.vocab)
            self._save_to_disk(grammar, cg)
        self._compiled.put(key, cg)
        return cg

    def _disk_key(self, grammar: Grammar) -> bytes | None:
        if self._disk is None or not grammar.is_regular or grammar.specials:
            return None  # (a grammar naming special tokens compiles against another vocabulary view)
        return repr(grammar.key).encode("utf-8", "surrogatepass") + b"\0" + self.vocab.fingerprint.encode()

    def _load_from_disk(self, grammar: Grammar) -> CompiledGrammar | None:
        key = self._disk_key(grammar)
        if key is None:
            return None
        t0 = time.perf_counter()
        z = self._disk.load(key)
        if not isinstance(z, dict):
            return None
        try:
            dfa = ByteDFA(z["byte_class"], z["transitions"], z["accepting"], int(z["start"]))
            t1 = time.perf_counter()
            tdfa = TokenDFA(dfa, self.vocab, slicing=slicing_of(grammar))  # the slices a fresh compile uses
        except Exception:
            return None  # a damaged cache entry: compile again
        stats = CompileStats("regular", states=dfa.n_states, byte_classes=dfa.n_classes, dfa_seconds=t1 - t0,
                             index_seconds=time.perf_counter() - t1, extra={"disk_cache": self._disk.path(key)})
        return CompiledGrammar(grammar, self.vocab, token_dfa=tdfa, stats=stats)

    def _save_to_disk(self, grammar: Grammar, cg: CompiledGrammar) -> None:
        key = self._disk_key(grammar)
        if key is None or cg.token_dfa is None:
            return
        dfa = cg.token_dfa.dfa
        self._disk.store(key, {"byte_class": dfa.byte_class, "transitions": dfa.transitions,
                               "accepting": dfa.accepting, "start": int(dfa.start)})

    # -- generating
    def __call__(self, prompt, **kw):
        return self.generate(prompt, **kw)

    def generate(self, prompt, **kw):
        """Generate for one prompt (-> :class:`GenerationResult`) or a list (-> list).

        See :func:`structgen.generate` for the keyword arguments.
        """
        run = self._prepare(prompt, kw)
        for _ in run.steps():
            pass
        results = run.results()
        return results if run.batched else results[0]

    def stream(self, prompt, **kw) -> "TextStream":
        """Text chunks of one prompt's output as they are produced; after the loop the
        stream's ``result`` holds the :class:`GenerationResult`."""
        run = self._prepare(prompt, kw)
        if run.batched:
            raise TypeError("stream() takes one prompt, not a batch")
        return TextStream(run, self.vocab, run.show_specials)

    def _prepare(self, prompt, kw) -> "_Run":
        unknown = set(kw) - set(_GEN_OPTIONS) - set(_CONSTRAINT_OPTIONS)
        if unknown:
            raise TypeError(f"unknown generate() options: {sorted(unknown)}")
        opts = {**_GEN_OPTIONS, **{k: v for k, v in self.defaults.items() if k in _GEN_OPTIONS},
                **{k: v for k, v in kw.items() if k in _GEN_OPTIONS}}
        check_generate_options(opts)  # before any compile or forward pass
        spec = {k: v for k, v in kw.items() if k in _CONSTRAINT_OPTIONS and v is not None}
        t0 = time.perf_counter()
        ch = spec.get("choices")
        if ch is not None and not isinstance(ch, (str, list, tuple)):
            spec["choices"] = ch = list(ch)   # (an iterator: counted once, read once)
        n_choices = None if ch is None or isinstance(ch, str) else len(ch)
        items = self._item_set(spec)
        compiled = None
        if items is not None:
            # (items= with choices= raises above, so n_choices is set only for the switched list)
            what = f"{n_choices} choices" if n_choices is not None else f"{int(items.cum[-1]) if isinstance(items, ItemSubset) else len(items)} items"
            constraint = Constraint(None, identity, f"one of {what}")
            make_matcher = lambda: ItemMatcher(items, self.vocab)  # noqa: E731
        else:
            constraint = spec.pop("constraint", None) or self.constraint(**spec)
            compiled = self.compile(constraint.grammar) if constraint.grammar is not None else None
            make_matcher = compiled.matcher if compiled is not None else lambda: None
        compile_s = time.perf_counter() - t0
        prompts, batched = _split_batch(prompt)
        rows, texts = [], []
        for p in prompts:
            ids, text = _encode_prompt(self.tokenizer, p, opts["chat"], opts["system"])
            heal = b""
            if opts["token_healing"] and len(ids) > 1 and self.vocab.is_normal[ids[-1]]:
                heal = self.vocab.token_bytes(ids[-1])
                ids = ids[:-1]
            rows.append(Row(ids, make_matcher(), heal=heal))
            texts.append(text)
        return _Run(self, rows, texts, constraint, opts, compile_s, batched, compiled)


    def _item_set(self, spec: dict):
        """The item set to decode with (``items=``, or a ``choices=`` list longer than
        :data:`CHOICES_INDEX_THRESHOLD`), popped from ``spec``; None for the other constraints."""
        items = spec.pop("items", None)
        if items is not None:
            other = sorted(k for k in spec if k in ("schema", "regex", "grammar", "choices", "tools", "constraint"))
            if other:
                raise TypeError(f"pass at most one of items=, {', '.join(k + '=' for k in other)}")
            if not isinstance(items, (ItemIndex, ItemSubset, ItemCatalog)):
                raise OptionError(f"items= takes a structgen.ItemIndex, an ItemCatalog or an index's subset(), "
                                  f"not {type(items).__name__}")
            return items
        choices = spec.get("choices")
        if choices is None or isinstance(choices, str) or len(choices) <= CHOICES_INDEX_THRESHOLD \
                or any(k in spec for k in ("schema", "regex", "grammar", "tools")):
            return None
        opts = choice_strings(choices)
        key = ("choices-index", tuple(opts))
        hit = self._compiled.get(key)
        if hit is None:
            try:
                hit = ItemIndex.from_strings(opts, self.vocab)
            except VocabularyError:
                hit = False   # a choice the tokenizer does not round-trip: the automaton spells it
            self._compiled.put(key, hit)
        if hit is False:
            return None
        spec.pop("choices")
        return hit


def _spec_key(spec: dict):
    """A hashable key for a constraint spec, or None when it has none (then no caching)."""
    def freeze(v):
        if isinstance(v, (dict, list)):
            # objects inside (tools= classes) by identity: the cached constraint keeps them alive
            return ("json", json.dumps(v, sort_keys=True, default=lambda o: f"{o!r}@{id(o)}"))
        if isinstance(v, (tuple, set, frozenset)):
            return tuple(freeze(x) for x in v)
        if isinstance(v, Grammar):
            return ("grammar", id(v))   # a Grammar object is its own spec: keep it alive below
        hash(v)
        return v

    try:
        return tuple(sorted((k, freeze(v)) for k, v in spec.items()))
    except TypeError:
        return None
    finally:
        freeze = None  # a recursive closure is a reference cycle: break it, so refcounting frees what it holds


_GEN_OPTIONS = {"max_new_tokens": 256, "temperature": 0.0, "top_p": 1.0, "top_k": 0, "seed": None,
                "chat": None, "system": None, "fast_forward": True, "token_healing": False, "speculative": None}
_CONSTRAINT_OPTIONS = {"schema", "regex", "grammar", "choices", "items", "whitespace", "schema_options", "property_order",
                       "constraint", "tools", "tool_format"}


class _Run:
    """One batched decode in progress."""

    def __init__(self, gen: Generator, rows, texts, constraint, opts, compile_s, batched, compiled=None):
        self.gen, self.rows, self.texts, self.constraint = gen, rows, texts, constraint
        self.opts, self.compile_s, self.batched = opts, compile_s, batched
        self.stats = DecodeStats()
        # a grammar naming special tokens shows them in the text (the tokens it was built around)
        self.show_specials = compiled is not None and compiled.vocab is not gen.vocab
        g = constraint.grammar
        self.cut = None
        if g is not None and g.structure is not None:
            vocab = gen.vocab
            self.cut = lambda ids: parse_output(g, vocab, ids)

    def steps(self):
        o = self.opts
        g = None
        if o["temperature"] and o["temperature"] > 0:
            dev = next(self.gen.model.parameters()).device
            g = torch.Generator(device=dev)
            if o["seed"] is not None:
                g.manual_seed(int(o["seed"]))
            else:
                g.seed()
        pad = getattr(self.gen.tokenizer, "pad_token_id", None)
        kw = dict(max_new_tokens=int(o["max_new_tokens"]), temperature=float(o["temperature"] or 0.0),
                  top_k=int(o["top_k"] or 0), top_p=float(o["top_p"] if o["top_p"] is not None else 1.0),
                  generator=g, fast_forward=bool(o["fast_forward"]), pad_id=pad, stats=self.stats)
        spec = o.get("speculative")
        if spec is not None:
            spec = Speculative() if spec is True else spec
            return speculative_decode_steps(self.gen.model, self.rows, self.gen.vocab, spec, **kw)
        return decode_steps(self.gen.model, self.rows, self.gen.vocab, **kw)

    def output_bytes(self, row: Row) -> bytes:
        data = token_text(self.gen.vocab, row.output_ids) if self.show_specials else self.gen.vocab.decode(row.output_ids)
        return data[row.healed_prefix_len:]

    def results(self) -> list[GenerationResult]:
        s = self.stats
        timings = {"compile": self.compile_s, "decode": s.total_seconds, "forward": s.forward_seconds,
                   "mask": s.mask_seconds, "sample": s.sample_seconds, "first_token": s.first_token_seconds,
                   "batch_forward_passes": s.forward_passes, "batch_draft_forward_passes": s.draft_forward_passes}
        out = []
        for row, text in zip(self.rows, self.texts):
            m = row.matcher
            if m is None:
                complete = row.finish_reason == "stop"
            else:
                complete = m.is_terminated() or m.is_accepting()
            out.append(GenerationResult(
                text=self.output_bytes(row).decode("utf-8", errors="replace"), token_ids=list(row.output_ids),
                prompt=text, prompt_tokens=len(row.prompt_ids) + (1 if row.heal else 0),
                finish_reason=row.finish_reason or "length", complete=complete, sampled_tokens=row.sampled,
                forced_tokens=row.forced, forward_passes=row.forward_passes,
                draft_forward_passes=row.draft_forward_passes, draft_proposed=dict(row.draft_proposed),
                draft_accepted=dict(row.draft_accepted),
                log_kept_mass=list(row.log_kept_mass), timings=dict(timings),
                constraint=self.constraint.description, _parse=self.constraint.parse, _cut=self.cut))
        return out


class TextStream:
    """Iterator of text chunks for one prompt; ``result`` is set when it is exhausted."""

    def __init__(self, run: _Run, vocab, show_specials: bool = False):
        self._run = run
        self._vocab = vocab
        self._show = show_specials
        self.result: GenerationResult | None = None

    def __iter__(self) -> Iterator[str]:
        dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
        row = self._run.rows[0]
        skip = row.healed_prefix_len if row.heal else 0
        for events in self._run.steps():
            ids = [t for _, new in events for t in new]
            data = token_text(self._vocab, ids) if self._show else b"".join(self._vocab.token_bytes(t) for t in ids)
            if skip and data:
                cut = min(skip, len(data))
                data, skip = data[cut:], skip - cut
            chunk = dec.decode(data)
            if chunk:
                yield chunk
        tail = dec.decode(b"", final=True)
        if tail:
            yield tail
        self.result = self._run.results()[0]


# ----------------------------------------------------------------------------- generate()
_GENERATORS = caching.LRU(4, name="api.generators")  # (id(model), id(tokenizer)) -> Generator


def generate(model, tokenizer, prompt, *, schema=None, regex=None, grammar=None, choices=None, items=None,
             max_new_tokens: int = 256, temperature: float = 0.0, top_p: float = 1.0, top_k: int = 0,
             seed: int | None = None, whitespace: str | None = None, chat: bool | None = None,
             system: str | None = None, fast_forward: bool = True, token_healing: bool = False,
             schema_options: dict | None = None, property_order: str | None = None,
             speculative: Speculative | bool | None = None, tools=None, tool_format: str | None = None):
    """Generate under a constraint with any transformers causal LM (CPU or GPU).

    ``prompt``: a string, a list of chat messages, or a list of those (a batch, decoded
    together with a KV cache; returns a list).  ``chat=True`` wraps a string prompt as a
    user message and applies the tokenizer's chat template (messages always are);
    ``system`` adds a system message.  Constraint: one of ``schema``, ``regex``,
    ``grammar``, ``choices`` (none = unconstrained); ``whitespace`` ("dumps", the
    default: json.dumps' separators; "compact"; or "flexible") and ``schema_options`` go to the
    JSON Schema compiler; for Pydantic types
    and JSON Schemas alike, objects without ``additionalProperties``/``patternProperties`` are
    closed (no extra keys) unless ``schema_options={"strict": False}``, and generation hygiene
    is on (integer literals in the 64-bit range, bounded number digits and exponents, short
    whitespace runs, extra members last: :class:`structgen.JsonHygiene`) unless
    ``schema_options={"hygiene": False}`` (exact JSON Schema semantics; a dict or a
    ``JsonHygiene`` changes the settings).  ``property_order``:
    ``"declared"`` (the default: object members in the order the schema lists them) or ``"any"``
    (any order, each key at most once; see :mod:`structgen.frontends.json_schema.property_order`).  Sampling:
    ``temperature=0`` is greedy; else ``top_k``/``top_p``/``seed`` (values are checked first:
    see :mod:`structgen.decoding.options`; ``OptionError`` otherwise).  ``fast_forward``
    feeds text the constraint forces in one pass instead of sampling it token by token;
    ``token_healing`` re-generates the prompt's last token so the output may merge with it.
    ``speculative=sg.Speculative(...)`` (or ``True`` for the defaults) decodes speculatively
    from grammar, prompt-lookup and draft-model drafts with exactly the same output
    distribution (:mod:`structgen.decoding.speculative`); results then report
    ``draft_proposed`` / ``draft_accepted`` per source.

    ``model`` and ``tokenizer`` go together: ``None`` for both is the demo model (see
    :class:`Generator`); one without the other raises.

    ``items=``: an :class:`ItemIndex` (or an :class:`ItemCatalog`, or ``index.subset(...)``):
    the output is one of its token sequences, then EOS (the vocabulary's EOS ids, where an item
    ends); greedy or sampled like any other constraint, ``.text`` its bytes (with
    ``token_healing`` the first token may span the prompt's end and the item, so ``.text``, not
    ``.token_ids``, spells the item).  ``choices=`` lists
    longer than :data:`CHOICES_INDEX_THRESHOLD` take this path too (each choice's canonical
    tokenization only; shorter lists admit every tokenization of each choice).

    ``tools=[...]`` (Pydantic models or JSON Schemas) with ``tool_format="hermes"|"llama3"|"mistral"``
    constrains the output to free text and tool calls in that format (:func:`structgen.tools.tool_calls`;
    the same as ``grammar=sg.tool_calls(tools, format=...)``): ``result.tool_calls`` are the calls,
    their arguments validated, ``result.content`` the text around them.

    Returns a :class:`GenerationResult` (``.value``, ``.text``, ``.token_ids``,
    ``.forward_passes``, ``.timings``, ``.projection_tax``, ...).
    """
    key = (id(model), id(tokenizer))
    gen = _GENERATORS.get(key)
    if gen is None or gen.model is not model or gen.tokenizer is not tokenizer:
        gen = Generator(model, tokenizer)
        _GENERATORS.put(key, gen)
    return gen.generate(prompt, schema=schema, regex=regex, grammar=grammar, choices=choices, items=items,
                        max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, top_k=top_k,
                        seed=seed, whitespace=whitespace, chat=chat, system=system, fast_forward=fast_forward,
                        token_healing=token_healing, schema_options=schema_options, property_order=property_order,
                        speculative=speculative, tools=tools, tool_format=tool_format)


# ----------------------------------------------------------------------------- @function
_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _describe_output(constraint: Constraint, tp) -> str:
    if constraint.grammar is None:
        return ""
    choices = string_choices(tp)
    if choices is not None:
        return "Answer with exactly one of: " + ", ".join(choices) + "."
    try:
        from pydantic import TypeAdapter

        schema = TypeAdapter(tp).json_schema()
    except Exception:
        return ""
    if schema.get("type") == "object" and "properties" in schema:
        fields = ", ".join(f'"{k}"' for k in schema["properties"])
        return f"Answer with a JSON object with the fields {fields}."
    return f"Answer in JSON ({schema.get('type', 'value')})."


def function(fn=None, *, model=None, tokenizer=None, generator: Generator | None = None,
             max_new_tokens: int = 256, chat: bool = True, system: str | None = None,
             describe_output: bool = True, whitespace: str | None = None, property_order: str | None = None,
             **options):
    """Turn a typed, documented Python function into a constrained LLM call.

    The docstring is the prompt: ``{arg}`` placeholders are filled with the call's
    arguments, and arguments it does not mention are appended as ``name: value`` lines.
    With ``describe_output`` a short sentence naming the expected output (the JSON
    fields, or the choices) is appended.  The return annotation is the constraint (see
    :func:`constraint_from_annotation`); calling the function returns a validated value
    or raises :class:`GenerationError` (e.g. when ``max_new_tokens`` is reached first).
    ``model=None`` uses the embedded demo model.  The function body is never run.
    ``property_order="any"``: the returned object's fields may come in any order.
    """
    if fn is None:
        return lambda f: function(f, model=model, tokenizer=tokenizer, generator=generator,
                                  max_new_tokens=max_new_tokens, chat=chat, system=system,
                                  describe_output=describe_output, whitespace=whitespace,
                                  property_order=property_order, **options)
    check_generate_options({"max_new_tokens": max_new_tokens, "chat": chat, "system": system,
                            **{k: v for k, v in options.items() if k in _GEN_OPTIONS}})  # at decoration, not call
    sig = inspect.signature(fn)
    try:
        hints = typing.get_type_hints(fn, include_extras=False)
    except Exception as e:
        raise Unsupported(f"cannot resolve the annotations of {fn.__qualname__}(): {e}", where=fn.__qualname__) from None
    ret = hints.get("return", inspect.Signature.empty)
    constraint = constraint_from_annotation(ret, whitespace=whitespace, property_order=property_order,
                                            where=f"return annotation of {fn.__qualname__}()")
    template = inspect.cleandoc(fn.__doc__ or "")
    suffix = _describe_output(constraint, ret) if describe_output else ""
    state = {"generator": generator}
    lock = threading.Lock()

    def build_prompt(*args, **kwargs) -> str:
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        used = set()

        def fill(m):
            name = m.group(1)
            if name in bound.arguments:
                used.add(name)
                return str(bound.arguments[name])
            return m.group(0)

        text = _PLACEHOLDER.sub(fill, template) if template else f"{fn.__name__}"
        rest = [f"{k}: {v}" for k, v in bound.arguments.items() if k not in used]
        parts = [text] + (["\n".join(rest)] if rest else []) + ([suffix] if suffix else [])
        return "\n\n".join(p for p in parts if p)

    def get_generator() -> Generator:
        with lock:
            if state["generator"] is None:
                state["generator"] = Generator(model, tokenizer)
            return state["generator"]

    def wrapper(*args, **kwargs):
        gen = get_generator()
        prompt = build_prompt(*args, **kwargs)
        result = gen.generate(prompt, constraint=constraint, max_new_tokens=max_new_tokens, chat=chat,
                              system=system, **options)
        wrapper.last_result = result
        if not result.complete:
            raise GenerationError(f"{fn.__qualname__}(): the model reached max_new_tokens={max_new_tokens} before "
                                  f"finishing a {constraint.description}; raise max_new_tokens. "
                                  f"Text so far: {clip_text(result.text)}", result)
        return result.value

    wrapper.__name__ = fn.__name__
    wrapper.__qualname__ = fn.__qualname__
    wrapper.__doc__ = fn.__doc__
    wrapper.__wrapped__ = fn
    wrapper.__signature__ = sig
    wrapper.prompt = build_prompt
    wrapper.constraint = constraint
    wrapper.generator = get_generator
    wrapper.last_result = None
    return wrapper

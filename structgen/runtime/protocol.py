"""The Matcher protocol: the per-sequence cursor every decoder and integration talks to.

A matcher holds one sequence's position in a compiled constraint (a regular
language, a grammar, a guarded JSON grammar...).  Decoders, logits processors
and wrappers use **only** the methods below -- never an implementation's
attributes -- so any object implementing :class:`Matcher` plugs into all of them.

Contract (every implementation keeps it; ``tests/test_matcher_protocol.py`` checks it
for each matcher kind the compiler returns):

- *Steps.*  ``advance(token)``, an accepted ``advance_bytes(data)`` and an accepted EOS
  are one *step* each; ``accepted_tokens()`` counts the steps since the start (or the
  last ``reset``) and ``rollback(n)`` undoes exactly the last ``n``.  A rejected call
  changes nothing.
- *EOS* (any of the vocabulary's EOS ids) is accepted exactly when ``is_accepting()``
  and terminates the matcher: afterwards every ``advance``/``advance_bytes`` is
  rejected until a rollback, restore or reset.
- *Masks.*  ``fill_bitmask`` writes bit ``t`` of row ``row`` (word ``t // 32``, bit
  ``t % 32``) set exactly when ``advance(t)`` would return True.  A terminated matcher
  allows EOS only, so a sampler never sees an all ``-inf`` row.
- *Snapshots.*  ``snapshot()`` is cheap (no copy of the state that grows with the
  sequence) and ``restore(s)`` returns the matcher to exactly that point -- state,
  mask and history (what ``rollback`` can undo) -- from anywhere: after more advances,
  after rolling back below it, after ``reset``.  A snapshot is valid on the matcher it
  was taken on and on every matcher forked from it or from which it was forked (one
  *lineage*); restoring a snapshot of another lineage raises ``ValueError``.
- ``fork()`` is independent: nothing done to a fork changes the original or back.

:class:`ByteStateView` is a small extra protocol for matchers whose position is a set of
states of one byte automaton (the regular matcher and the grammar engine's); the key
guard's liveness check uses it instead of reading private state.

*Arguments.*  Token ids are integers (Python ints, numpy or torch integer scalars and
arrays): a float (even ``2.0``), a bool, a string or ``None`` raises
:class:`~structgen.errors.TokenError` from ``advance``, ``advance_many`` and ``validate``
alike -- never truncated into an id.  An integer outside the vocabulary (negative, ``>= V``,
an id without bytes) is not an error: it is rejected like any disallowed token (``advance``
returns False, ``validate`` stops there).  ``fill_bitmask`` checks its bitmask and row first
(:func:`~structgen.runtime.checks.check_bitmask_row`): anything but an int32 2-D array or
tensor of ``ceil(V/32)`` words per row, or a row that is not an integer in ``[0, rows)`` --
``None`` included, which numpy would read as "every row" -- raises
:class:`~structgen.errors.BitmaskError` naming the expected dtype and shape.

This module imports nothing of structgen but the forced-text tokenizer (:mod:`.tokenize`)
and the argument checks (:mod:`.checks`).
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Sequence

import numpy as np

from .checks import check_tokens
from .tokenize import allowed_token_crosses, tokenize_exact

__all__ = ["Matcher", "Snapshot", "ByteStateView", "accepted_prefix"]


class Snapshot:
    """An opaque point of a matcher's history, from :meth:`Matcher.snapshot`.

    Two snapshots compare equal when they name the same point of the same lineage (which
    implies the same state); ``validate`` and an advance followed by a rollback leave the
    matcher at a point equal to the one before."""

    __slots__ = ("lineage", "point")

    def __init__(self, lineage: object, point: tuple):
        self.lineage = lineage
        self.point = point

    def __eq__(self, other) -> bool:
        if not isinstance(other, Snapshot) or other.lineage is not self.lineage:
            return False
        if len(self.point) != len(other.point):
            return False
        return all(a is b or (isinstance(a, Snapshot) and a == b) for a, b in zip(self.point, other.point))

    def __hash__(self) -> int:
        return hash((id(self.lineage), len(self.point)))

    def __repr__(self) -> str:
        return f"Snapshot(lineage={id(self.lineage):#x})"


class Matcher(ABC):
    """A per-sequence cursor over a compiled constraint (see the module docstring).

    Subclasses implement the abstract methods; ``advance_many``, ``validate``,
    ``mask_words``, ``allowed_tokens`` and ``forced_tokens`` have shared implementations
    on top of them that a subclass may override with faster ones of the same meaning."""

    __slots__ = ()

    # ------------------------------------------------------------------ identity
    @property
    @abstractmethod
    def vocab(self):
        """The :class:`~structgen.Vocabulary` the constraint was compiled for (token bytes,
        EOS ids, ``logits_width`` = the mask's ``V``)."""

    # ------------------------------------------------------------------ steps
    @abstractmethod
    def advance(self, token: int) -> bool:
        """Accept one token.

        Args:
            token: an integer token id; EOS ids, ids without bytes, negative ids and ids
                ``>= V`` included (the last three are simply rejected).
        Returns:
            True when the constraint allows ``token`` here (the state moved on, one step
            more to roll back); False otherwise, with the state unchanged.  EOS returns True
            exactly when :meth:`is_accepting` and terminates the matcher.  After
            termination every token is rejected.
        Raises:
            TokenError: ``token`` is not an integer (a float, bool, string, None...).
            Nothing for any integer.
        """

    def advance_many(self, tokens: Sequence[int]) -> int:
        """Advance through ``tokens`` until one is rejected.

        Args:
            tokens: token ids (any sequence, iterable, 1-D numpy array or torch tensor of
                integers).
        Returns:
            How many leading tokens were accepted (each is one step; the rejected one and
            those after it change nothing).
        Raises:
            TokenError: some id is not an integer, or ``tokens`` is not 1-D (checked before
                any step, so nothing has moved).
        """
        n = 0
        for t in check_tokens(tokens).tolist():
            if not self.advance(int(t)):
                break
            n += 1
        return n

    @abstractmethod
    def advance_bytes(self, data: bytes) -> bool:
        """Consume raw bytes with no token boundary implied (token healing, fast-forward by
        text, byte-level drafts).

        Args:
            data: the bytes; they may end inside a token or a UTF-8 character.
        Returns:
            True when some valid output starts with what was accepted so far plus ``data``
            and could still be completed by tokens: the bytes are consumed as **one** step
            (``rollback(1)`` undoes them all).  ``b""`` is accepted (an empty step) unless
            the matcher is terminated.  False leaves the state unchanged; a terminated
            matcher always returns False.
        """

    @abstractmethod
    def rollback(self, n: int = 1) -> None:
        """Undo exactly the last ``n`` steps (tokens, byte chunks, EOS).

        Args:
            n: ``0 <= n <= accepted_tokens()``.
        Raises:
            ValueError: ``n`` is negative or larger than :meth:`accepted_tokens`.
        """

    @abstractmethod
    def accepted_tokens(self) -> int:
        """The number of steps :meth:`rollback` can undo (steps since the start or the last
        :meth:`reset`; after :meth:`restore`, those of the restored point)."""

    @abstractmethod
    def reset(self) -> None:
        """Back to the start of the constraint, with no step to roll back.  Snapshots taken
        before stay valid."""

    @abstractmethod
    def fork(self) -> "Matcher":
        """An independent copy at the same point with the same history (it can roll back as
        far as this one), sharing only the immutable compiled constraint.  Its snapshots
        and this matcher's are interchangeable (same lineage)."""

    # ------------------------------------------------------------------ snapshots
    @abstractmethod
    def snapshot(self) -> Snapshot:
        """The current point (state and history), cheaply: O(1) for regular constraints, a
        few small arrays for the key guard; nothing proportional to the sequence.

        Returns:
            An opaque :class:`Snapshot` for :meth:`restore`."""

    @abstractmethod
    def restore(self, snapshot: Snapshot) -> None:
        """Return to exactly the point of ``snapshot``: state, mask, termination and history
        (``accepted_tokens()`` and what ``rollback`` undoes are those of that point).
        Always valid for snapshots of this lineage, whatever happened since (advances,
        rollbacks below it, reset).  Cost: O(1) for regular constraints; for the grammar
        engine and the key guard at most a replay of the steps between the snapshot and
        the nearest point the two histories share.

        Raises:
            ValueError: ``snapshot`` was taken on a matcher of another lineage.
        """

    # ------------------------------------------------------------------ masks
    @abstractmethod
    def fill_bitmask(self, bitmask, row: int = 0) -> None:
        """Write the allowed tokens into one row of a bitmask.

        Args:
            bitmask: int32 ``[B, ceil(V/32)]``, a numpy array or a torch tensor (any
                device); bit ``t % 32`` of word ``t // 32`` = token ``t`` allowed.
            row: the row to overwrite, an integer ``0 <= row < B`` (the other rows are
                untouched).
        Raises:
            BitmaskError: the bitmask is not int32, not 2-D or not ``ceil(V/32)`` words
                wide, or ``row`` is not an integer in range (``None`` included); nothing is
                written.  Implementations start with
                :func:`~structgen.runtime.checks.check_bitmask_row`.
        """

    def mask_words(self) -> np.ndarray:
        """The allowed tokens as uint32 words (``ceil(V/32)`` of them, the layout of one
        bitmask row).

        Returns:
            A uint32 array.  A read-only array (``flags.writeable`` False) may be shared
            with a cache: copy it before modifying; a writeable one is the caller's."""
        row = np.zeros((1, (self.vocab.logits_width + 31) // 32), np.int32)
        self.fill_bitmask(row, 0)
        return row[0].view(np.uint32)

    def allowed_tokens(self) -> np.ndarray:
        """The allowed token ids, ascending (int64; EOS included in accepting states)."""
        w = np.ascontiguousarray(self.mask_words(), np.uint32)
        bits = np.unpackbits(w.view(np.uint8), bitorder="little")
        return np.flatnonzero(bits[:self.vocab.logits_width])

    def validate(self, tokens: Sequence[int]) -> int:
        """How many leading tokens of a draft would be accepted one after another.

        Args:
            tokens: token ids, as for :meth:`advance_many` (EOS may end the draft).
        Returns:
            The length of the longest accepted prefix.  The matcher's point is unchanged
            (``snapshot()`` before and after compare equal).
        Raises:
            TokenError: as :meth:`advance_many`.
        """
        n = self.advance_many(check_tokens(tokens))
        self.rollback(n)
        return n

    # ------------------------------------------------------------------ state queries
    @abstractmethod
    def is_accepting(self) -> bool:
        """True when the output so far is a complete sentence: EOS would be accepted now.
        False once terminated."""

    @abstractmethod
    def is_terminated(self) -> bool:
        """True when EOS was accepted (and not rolled back)."""

    # ------------------------------------------------------------------ forced text
    @abstractmethod
    def forced_bytes(self) -> bytes:
        """Bytes every valid continuation starts with (possibly empty): what the constraint
        forces next, stopping where EOS or a choice is possible (an implementation may stop
        earlier, never later).  ``b""`` when terminated."""

    def forced_tokens(self, max_back_off: int = 4) -> list[int]:
        """Canonical tokens of the forced text, safe to append without sampling.

        The forced bytes (cut to whole UTF-8 characters) are tokenized as the tokenizer
        would; the last of those tokens are dropped (up to ``max_back_off``) while some
        allowed token could start at them and run past the forced text, since text after
        it may be tokenized differently.

        Returns:
            Token ids that :meth:`advance_many` accepts in full (possibly none).
        """
        if self.is_terminated():
            return []
        forced = _whole_characters(self.forced_bytes())
        if not forced:
            return []
        v = self.vocab
        tokens = tokenize_exact(v, forced)
        if not tokens:
            return []
        m = self.fork()
        if m.advance_many(tokens) != len(tokens):
            return []
        offsets = np.cumsum([0] + [len(v.token_bytes(t)) for t in tokens])
        keep = len(tokens)
        for k in range(len(tokens) - 1, max(len(tokens) - max_back_off, 0) - 1, -1):
            m.rollback(1)
            if allowed_token_crosses(m.mask_words(), v, forced[offsets[k]:]):
                keep = k
        return tokens[:keep]


def accepted_prefix(matcher: "Matcher", data: bytes) -> bytes:
    """The longest prefix of ``data`` that ``matcher.advance_bytes`` accepts from where it is, for
    guards whose refusals are monotone in the length (a refused prefix is never extended into an
    accepted one); the matcher is left where it was."""
    lo, hi = 0, len(data)  # data[:lo] accepted
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if matcher.advance_bytes(data[:mid]):
            matcher.rollback(1)
            lo = mid
        else:
            hi = mid - 1
    return data[:lo]


def _whole_characters(data: bytes) -> bytes:
    """``data`` cut before its first incomplete or invalid UTF-8 character (only text can
    be tokenized)."""
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as e:
        return data[:e.start]
    return data


class ByteStateView(ABC):
    """The position of a matcher as states of one byte automaton (a small extra protocol).

    For the regular matcher the automaton is its byte DFA and the position one state; for
    the grammar engine the automaton is the union of its lexer DFAs and the position the
    lexer states of the lexemes in progress.  Nothing here knows what the bytes mean: a
    wrapper such as the key guard asks which states a byte string leads to."""

    __slots__ = ()

    @abstractmethod
    def byte_automaton(self):
        """``(trans, byte_class, lexeme_end)``, shared and read-only: ``trans[s, byte_class[b]]``
        is the state after byte ``b`` from ``s`` (-1: none); ``lexeme_end[s] != 0`` when a
        lexeme may end in ``s`` and the grammar go on with a fresh run of the automaton (all
        zero for a single DFA).  The same arrays for the matcher's whole life."""

    @abstractmethod
    def byte_states(self) -> np.ndarray:
        """The automaton states of the current position (int64, distinct; empty when
        terminated).  The array is shared: do not modify it."""

    @abstractmethod
    def byte_states_after(self, data: bytes):
        """The automaton states after the raw bytes ``data`` (int64), or None when the
        constraint refuses them.  The matcher's point is unchanged."""

    def byte_states_after_each(self, probes) -> list:
        """:meth:`byte_states_after` of each byte string of ``probes``, in order (a matcher whose
        probes cost a kernel call each answers them in one)."""
        return [self.byte_states_after(p) for p in probes]

    def leads_key(self, leads):
        """A hashable key of this point for the byte strings ``leads``, or None: two points of
        this matcher where the same ``leads`` get the same key give the same
        :meth:`byte_states_after` of every probe that starts with one of the leads (keys of
        other lead lists are not comparable).  Keys hold until the matcher rolls back (they may name
        its history).  This default says nothing (None)."""
        return None

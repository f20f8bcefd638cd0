"""What a JSON Schema compilation reports besides its grammar (:class:`SchemaReport`), shared by
the regular compiler, the grammar compiler and engine selection."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class SchemaReport:
    """What a compilation did besides succeeding: keywords ignored (lenient mode), refs cut, the
    generation restrictions it applied."""

    grammar: Any = None
    ignored: list = field(default_factory=list)     # [(keyword, pointer, why)]
    truncated: list = field(default_factory=list)   # [pointer of a $ref cut at the recursion bound]
    exact: bool = True                               # False: sound, but narrower than the schema (hygiene: below)
    notes: list = field(default_factory=list)       # [str]: remarks on sound fallbacks
    unique_keys: bool = False                        # property_order="any": matchers must reject duplicate keys
    live_keys: bool = False                          # ... and keys only used ones complete (closed objects repeated)
    unique_items: Any = None                         # a unique_items.UniquePlan: matchers must reject duplicate items
    hygiene: dict | None = None                      # generation restrictions used (see .hygiene); None: exact

    @property
    def guarded(self) -> bool:
        """Do matchers need a runtime guard (duplicate keys or items) beside the grammar?"""
        return bool(self.unique_keys) or self.unique_items is not None

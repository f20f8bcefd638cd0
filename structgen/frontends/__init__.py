"""Front ends: specifications -> the IR the lower layers compile.

Holds one module (or package) per kind of specification: :mod:`.regex` (Python / ECMA regex
syntax -> regular IR), :mod:`.json_schema` (JSON Schema -> regular IR or a CFG), :mod:`.pydantic`
(Pydantic models -> JSON Schema), :mod:`.lark` and :mod:`.gbnf` (grammar text -> CFG).

May import: :mod:`structgen.errors`, :mod:`structgen.caching`, :mod:`structgen.automaton` (IR, DFAs
and their operations), :mod:`structgen.index` (vocabulary slice definitions) and :mod:`structgen.cfg`
(the CFG type, its disk cache).  Nothing below imports a front end.
"""
from .regex import parse_regex, search_to_full
from .lark import lark_to_cfg
from .gbnf import gbnf_to_cfg

__all__ = ["parse_regex", "search_to_full", "lark_to_cfg", "gbnf_to_cfg"]

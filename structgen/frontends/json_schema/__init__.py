"""JSON Schema front end: a schema is read once (:mod:`.reader`: draft, ``$id``/``$ref`` index,
engine-selection facts; :mod:`.records`: typed keyword groups with their JSON pointers;
:mod:`.keywords`: the one keyword table), then compiled to regular IR (:mod:`.regular`, with
:mod:`.regular_objects` and :mod:`.regular_arrays`) or to a CFG for the grammar engine
(:mod:`.cfg`, with :mod:`.cfg_objects`, :mod:`.merge` and :mod:`.keys`; Boolean combinations in
:mod:`.combine`, :mod:`.combine_arrays` and :mod:`.formulas`); :mod:`.select` picks one per schema.
Shared pieces: :mod:`.language` (compiled sub-schemas, patterns), :mod:`.values` (JSON value
equality), :mod:`.options`, :mod:`.report`; :mod:`.checks` (keyword value types and nesting
depth, before any compiler walks the document) and :mod:`.empty` (the sub-schema that empties
a schema, for :class:`structgen.errors.EmptyLanguage`).  Leaves: :mod:`.strings`, :mod:`.numbers`,
:mod:`.formats`; :mod:`.property_order` is the any-order object form; :mod:`.hygiene` the
generation restrictions (exact language ∩ bounded numbers, whitespace, strings).  Imports point one way:
keywords/values/report/options <- reader <- records <- regular parts <- regular <- merge/keys
<- combine <- cfg <- select.
"""

"""JSON Schema front end: a schema -> regular IR (:mod:`.regular`) or a CFG for the grammar
engine (:mod:`.cfg`, with Boolean combinations in :mod:`.combine`); :mod:`.select` picks one per
schema.  Leaves: :mod:`.strings`, :mod:`.numbers`, :mod:`.formats`; :mod:`.property_order` is the
any-order object form.
"""

"""Benchmark runners: MaskBench / JSONSchemaBench (:mod:`.maskbench`) and the official
JSON-Schema-Test-Suite (:mod:`.testsuite`)."""

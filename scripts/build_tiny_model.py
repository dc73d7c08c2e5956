"""Build a deterministic tiny Qwen3 model with random weights and a locally trained tokenizer.

Runs in the vLLM venv (it has torch, transformers and tokenizers). No hub access: the config, the weights
and the tokenizer are all made here, so the same command gives the same bytes on any machine.
Shape: 2 layers, hidden 128, 4 heads / 2 KV heads, head_dim 32 (a head size vLLM's CPU attention supports),
so the KV cache costs 512 bytes per token (reference/vllm.md §5).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
WORDS = " ".join(
    (
        "the a of to and in is it that for on with as was at by be this from or an are have not but what",
        "all were when we there can been has more if will one would so no out up about into than them",
        "only other new some time could these two may then do first any my now such like our over man me",
        "even most made after also did many before must through back years where much your way well down",
        "should because each just those people how too little state good very make world still own see",
        "men work long get here between both life being under never day same another know while last",
        "might us great old year off come since against go came right used take three gpu memory cache",
        "token batch server request latency throughput model weights kernel prefill decode queue",
        "scheduler concurrency quantization attention tensor parallel bandwidth",
    )
).split()


def corpus(lines: int = 4000, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        n = rng.randint(4, 24)
        words = [rng.choice(WORDS) for _ in range(n)]
        out.append(
            " ".join(words).capitalize() + rng.choice([".", "?", "!", ","]) + f" {rng.randint(0, 9999)}"
        )
    return out


def build(out_dir: Path) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

    out_dir.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=2048, special_tokens=SPECIAL, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>", bos_token=None
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.model_max_length = 4096
    fast.save_pretrained(out_dir)

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=len(fast),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=32,
        max_position_embeddings=4096,
        tie_word_embeddings=True,
        eos_token_id=fast.convert_tokens_to_ids("<|im_end|>"),
        pad_token_id=fast.convert_tokens_to_ids("<|endoftext|>"),
        bos_token_id=None,
        torch_dtype="bfloat16",
    )
    model = Qwen3ForCausalLM(config).to(torch.bfloat16)
    model.save_pretrained(out_dir, safe_serialization=True)
    (out_dir / "llmopt-tiny.json").write_text(json.dumps({"built_by": "scripts/build_tiny_model.py"}) + "\n")


if __name__ == "__main__":
    target = Path(sys.argv[1] if len(sys.argv) > 1 else "models/tiny-qwen3")
    if (target / "llmopt-tiny.json").exists() and (target / "model.safetensors").exists():
        print(f"tiny model ready: {target}")
        sys.exit(0)
    build(target)
    print(f"tiny model built: {target}")

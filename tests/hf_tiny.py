"""Tiny transformers checkpoints built offline for fast hf-backend tests.

A byte-level BPE tokenizer trained on a short text (a tokenizer unlike Gemma's SentencePiece
one) and a 2-layer Llama with random weights. Nothing is downloaded.
"""

from __future__ import annotations

from pathlib import Path

BOS, EOS = "<s>", "</s>"


def byte_bpe_tokenizer(text: str, vocab_size: int):
    """A GPT-2-style byte-level BPE tokenizer trained on `text`; it prepends BOS like Llama."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[BOS, EOS], initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([text], trainer)
    tok.post_processor = processors.TemplateProcessing(single=f"{BOS} $A", special_tokens=[(BOS, tok.token_to_id(BOS))])
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=BOS, eos_token=EOS)


def tiny_llama_dir(
    path: Path, text: str, vocab_size: int = 1024, seed: int = 0, softcap: float | None = None, model_vocab: int | None = None, max_positions: int = 2048
) -> Path:
    """Save a random-weight 2-layer Llama (or Gemma 2 when `softcap` is set) with a byte-level tokenizer in `path`;
    `model_vocab` widens the model's vocabulary (embedding and head rows) beyond the tokenizer's."""
    import torch
    from transformers import Gemma2Config, Gemma2ForCausalLM, LlamaConfig, LlamaForCausalLM

    tokenizer = byte_bpe_tokenizer(text, vocab_size)
    common = dict(
        vocab_size=model_vocab or len(tokenizer),
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=max_positions,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        initializer_range=0.3,  # peaked, varied distributions rather than near-uniform ones
        tie_word_embeddings=False,
    )
    torch.manual_seed(seed)
    if softcap is None:
        model = LlamaForCausalLM(LlamaConfig(**common))
    else:
        model = Gemma2ForCausalLM(Gemma2Config(**common, final_logit_softcapping=softcap, sliding_window=64, query_pre_attn_scalar=16))
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path


def tiny_gemma3_dir(path: Path, text: str, vocab_size: int = 512, seed: int = 0, sliding_window: int = 16) -> Path:
    """A random-weight 4-layer Gemma 3 (text) whose layers alternate sliding-window and full
    attention, as Gemma 3's do (5 : 1 in the real model), with a byte-level tokenizer."""
    import torch
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    tokenizer = byte_bpe_tokenizer(text, vocab_size)
    config = Gemma3TextConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=2,
        head_dim=16, query_pre_attn_scalar=16, sliding_window=sliding_window, max_position_embeddings=2048,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
        bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.eos_token_id, initializer_range=0.3,
    )
    torch.manual_seed(seed)
    model = Gemma3ForCausalLM(config)
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(path))
    tokenizer.save_pretrained(str(path))
    return path

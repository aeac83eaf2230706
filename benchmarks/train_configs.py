"""The settings the tools train with in bench_train.py, as a JoeyNMT 2.3.0 config, an Eole
0.6.4 config and an mtkit config: transformer-small (mtkit takes it from its preset, the peers
get it spelled out; bench_train.py prints each tool's parameter count), Adam, inverse-sqrt
warmup, label smoothing, clipping, fp32 on CPU, and no validation inside the measured window."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

SRC, TGT = "en", "de"
VOCAB_SIZE = 8000
LAYERS, D_MODEL, HEADS, FFN, DROPOUT = 3, 256, 4, 1024, 0.1
LR, WARMUP, BETAS, LABEL_SMOOTHING, CLIP = 7e-4, 4000, [0.9, 0.98], 0.1, 1.0


def joeynmt_config(work: Path, data: Path, spm_model: Path, args: argparse.Namespace) -> dict:
    side = {"level": "bpe", "lowercase": False, "voc_file": str(data / "vocab.txt")}
    side |= {"tokenizer_type": "sentencepiece", "tokenizer_cfg": {"model_file": str(spm_model)}}
    stack = {
        "type": "transformer",
        "num_layers": LAYERS,
        "num_heads": HEADS,
        "embeddings": {"embedding_dim": D_MODEL, "scale": True, "dropout": DROPOUT},
        "hidden_size": D_MODEL,
        "ff_size": FFN,
        "dropout": DROPOUT,
        "layer_norm": "post",
    }
    return {
        "name": "bench_train",
        "model_dir": str(work / "model"),
        "use_cuda": False,
        "fp16": False,
        "random_seed": 1,
        "data": {
            "train": str(data / "train"),
            "dev": str(data / "valid"),
            "dataset_type": "plain",
            "src": {"lang": SRC, **side},
            "trg": {"lang": TGT, **side},
        },
        "testing": {"beam_size": 1, "eval_metrics": ["bleu"]},
        "training": {
            "optimizer": "adam",
            "adam_betas": BETAS,
            "learning_rate": LR,
            "learning_rate_min": 1e-7,
            "scheduling": "warmupinversesquareroot",
            "learning_rate_warmup": WARMUP,
            "label_smoothing": LABEL_SMOOTHING,
            "normalization": "tokens",
            "clip_grad_norm": CLIP,
            "weight_decay": 0.0,
            "batch_type": "token",
            "batch_size": args.joeynmt_max_tokens or args.max_tokens,
            "batch_multiplier": 1,
            "epochs": 1000,
            "updates": args.warmup + args.updates + 1,
            "logging_freq": args.log_every,
            "validation_freq": 10**8,
            "keep_best_ckpts": 1,
            "shuffle": True,
            "overwrite": True,
            "print_valid_sents": [],
            "num_workers": 0,
        },
        "model": {
            "initializer": "xavier_uniform",
            "bias_initializer": "zeros",
            "embed_initializer": "normal",
            "embed_init_weight": D_MODEL**-0.5,
            "tied_embeddings": True,
            "tied_softmax": True,
            "encoder": stack,
            "decoder": dict(stack),
        },
    }


def mtkit_config(args: argparse.Namespace, precision: str = "fp32", compile: bool = False) -> dict:
    """TrainConfig fields plus a model mapping, matched to the JoeyNMT config (fp32; mtkit's
    bf16 rows differ in ``precision`` only, its compiled rows in ``compile: on`` only)."""
    cfg = {
        "preset": "transformer-small",
        "device": "cpu",
        "precision": precision,
        "seed": 1,
        "max_tokens": args.max_tokens,
        "update_freq": 1,
        "lr": LR,
        "warmup_updates": WARMUP,
        "warmup_init_lr": 1e-7,
        "adam_betas": BETAS,
        "weight_decay": 0.0,
        "clip_norm": CLIP,
        "label_smoothing": LABEL_SMOOTHING,
        "max_updates": args.warmup + args.updates,
        "validate_every": 0,
        "save_every": 0,
        "keep_last": 1,
        "log_every": args.log_every,
        "num_workers": 0,
        # JoeyNMT drops out after the FFN's ReLU too, at the same rate
        "model": {
            "dropout": DROPOUT,
            "attention_dropout": DROPOUT,
            "activation_dropout": DROPOUT,
            "pre_norm": False,
        },
    }
    return cfg | ({"compile": "on"} if compile else {})


def eole_config(work: Path, data: Path, args: argparse.Namespace, precision: str = "fp32") -> dict:
    """An Eole 0.6.4 ``eole train`` config for the same model, data and optimiser.

    ``data`` holds the corpus already cut into the spm pieces, space-separated, and
    ``vocab.txt`` (the pieces; train_runs.prepare_eole): Eole reads whitespace tokens with no
    transform, so its loop pays no sentencepiece encoding, as mtkit's (binarized) does not.

    Where Eole cannot match exactly: its decoder layer is pre-LN only (no post-LN option), so
    both stacks are pre-LN with a final LayerNorm each (Eole's standard NMT transformer; the
    same matmuls, one LayerNorm more per stack). Its noam schedule is the same inverse-sqrt
    curve, with ``learning_rate`` scaled so the peak at update WARMUP is LR. Its token batches
    count max(src, BOS + tgt + EOS) x sentences, which the benchmark's batch size is given as
    (see NOTES in train_report.py). ``use_amp`` stays on (the default): with it Eole builds
    torch.optim.Adam, as the others use, instead of torch-optimi's. ``precision: bf16`` sets
    ``compute_dtype: bf16`` (CPU autocast, fp32 weights), Eole's mixed precision. The
    attention entropy Eole logs by default is turned off (it is not training).
    """
    stack = {"layers": LAYERS, "hidden_size": D_MODEL}
    return {
        "seed": 1,
        "overwrite": True,
        "save_data": str(work / "data"),
        "report_every": args.log_every,
        "src_vocab": str(data / "vocab.txt"),
        "tgt_vocab": str(data / "vocab.txt"),
        "share_vocab": True,
        "pad_token": "<pad>",  # the spm model's own piece 0, so the vocabulary is its 8000 pieces
        "src_vocab_size": VOCAB_SIZE,
        "tgt_vocab_size": VOCAB_SIZE,
        "vocab_size_multiple": 1,
        "n_sample": 0,
        "data": {
            "corpus_1": {
                "path_src": str(data / f"train.{SRC}"),
                "path_tgt": str(data / f"train.{TGT}"),
            }
        },
        "transforms": [],
        "training": {
            "model_path": str(work / "model"),
            "save_checkpoint_steps": 0,
            "keep_checkpoint": 1,
            "train_steps": args.warmup + args.updates + 1,
            "valid_steps": 10**8,
            "world_size": 1,
            "gpu_ranks": [],
            "num_workers": 0,
            "batch_type": "tokens",
            "batch_size": args.eole_max_tokens or args.max_tokens,
            "batch_size_multiple": 1,
            "accum_count": [1],
            "normalization": "tokens",
            "compute_dtype": precision,
            "use_amp": True,
            "optim": "adam",
            "adam_beta1": BETAS[0],
            "adam_beta2": BETAS[1],
            "weight_decay": 0.0,
            "decay_method": "noam",
            "warmup_steps": WARMUP,
            "learning_rate": LR * math.sqrt(D_MODEL * WARMUP),
            "max_grad_norm": CLIP,
            "label_smoothing": LABEL_SMOOTHING,
            "dropout": [DROPOUT],
            "attention_dropout": [DROPOUT],
            "dropout_steps": [0],
            "param_init_method": "xavier_uniform",
            "log_attention_entropy": False,  # a diagnostic, on by default; no other tool has it
        },
        "model": {
            "architecture": "transformer",
            "hidden_size": D_MODEL,
            "layers": LAYERS,
            "heads": HEADS,
            "transformer_ff": FFN,
            "mlp_activation_fn": "relu",
            "layer_norm": "standard",
            "add_qkvbias": True,
            "add_ffnbias": True,
            "add_final_linear_bias": True,
            "generator_bias": False,
            "share_embeddings": True,
            "share_decoder_embeddings": True,
            "embeddings": {
                "word_vec_size": D_MODEL,
                "position_encoding_type": "SinusoidalInterleaved",
            },
            "encoder": dict(stack),
            "decoder": dict(stack),
        },
    }

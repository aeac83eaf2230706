"""The settings both tools train with in bench_train.py, as a JoeyNMT 2.3.0 config and an
mtkit config: transformer-small (mtkit takes it from its preset, JoeyNMT gets it spelled out;
bench_train.py checks that both report the same parameter count), Adam, inverse-sqrt warmup,
label smoothing, clipping, fp32 on CPU, and no validation inside the measured window."""

from __future__ import annotations

import argparse
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


def mtkit_config(args: argparse.Namespace, precision: str = "fp32") -> dict:
    """TrainConfig fields plus a model mapping, matched to the JoeyNMT config (fp32; mtkit's
    bf16 rows differ in ``precision`` only)."""
    return {
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

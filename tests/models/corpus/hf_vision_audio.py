"""Corpus: transformers vision and audio models from tiny configs (32x32 images, 400-sample
waveforms, 16-bin spectrograms), random weights, nothing downloaded."""

from __future__ import annotations

from typing import Any

import torch

from tests.models.builders import Builder, Built, hf_model, pixels, randomized, token_ids

ENCODER = {"num_hidden_layers": 2, "num_attention_heads": 2, "hidden_size": 32,
           "intermediate_size": 64}
VIT = {**ENCODER, "image_size": 32, "patch_size": 8}
AUDIO = {**ENCODER, "conv_dim": (16, 16), "conv_stride": (5, 2), "conv_kernel": (10, 3),
         "num_conv_pos_embeddings": 16, "num_conv_pos_embedding_groups": 2}


def _audio() -> torch.Tensor:
    return torch.randn(1, 400, generator=torch.Generator().manual_seed(4))


def _build(family: str, config: dict[str, Any], inputs: str = "pixels",
           field: str = "last_hidden_state", model: str = "Model") -> Built:
    import transformers

    cfg = getattr(transformers, f"{family}Config")(**config)
    model_cls = getattr(transformers, f"{family}{model}")
    if inputs == "pixels":
        model, example = hf_model(model_cls, cfg, (pixels(),), ("pixel_values",), field)
        return randomized(model, reinit_convs=True), example
    if inputs == "audio":
        return hf_model(model_cls, cfg, (_audio(),), ("input_values",), field)
    if inputs == "spectrogram":  # AST: [batch, frames, mel bins]
        feats = torch.randn(1, 32, 16, generator=torch.Generator().manual_seed(3))
        return hf_model(model_cls, cfg, (feats,), ("input_values",), field)
    # whisper: log-mel features plus decoder tokens
    feats = torch.randn(1, 16, 32, generator=torch.Generator().manual_seed(3))
    return hf_model(model_cls, cfg, (feats, token_ids(96, batch=1, length=5)),
                    ("input_features", "decoder_input_ids"), field)


def _entry(family: str, config: dict[str, Any], **kw: str) -> Builder:
    return lambda: _build(family, config, **kw)


POOLED = {"field": "pooler_output"}
VISION: dict[str, Builder] = {
    "vit": _entry("ViT", VIT),
    "deit": _entry("DeiT", VIT),
    "beit": _entry("Beit", {**VIT, "use_relative_position_bias": True}),
    "data2vec_vision": _entry("Data2VecVision", VIT),
    "dinov2": _entry("Dinov2", {**VIT, "layerscale_value": 0.5}),
    "clip_vision": _entry("CLIPVision", VIT, **POOLED),
    "siglip_vision": _entry("SiglipVision", VIT, **POOLED),
    "swin": _entry("Swin", {"image_size": 32, "patch_size": 4, "embed_dim": 16,
                            "depths": [2, 1], "num_heads": [2, 2], "window_size": 4}),
    "swinv2": _entry("Swinv2", {"image_size": 32, "patch_size": 4, "embed_dim": 16,
                                "depths": [2, 1], "num_heads": [2, 2], "window_size": 4}),
    "convnext": _entry("ConvNext", {"hidden_sizes": [8, 16], "depths": [1, 1],
                                    "num_stages": 2}, **POOLED),
    "convnextv2": _entry("ConvNextV2", {"hidden_sizes": [8, 16], "depths": [1, 1],
                                        "num_stages": 2}, **POOLED),
    "resnet": _entry("ResNet", {"embedding_size": 8, "hidden_sizes": [8, 16],
                                "depths": [1, 1], "layer_type": "bottleneck"}, **POOLED),
    "regnet": _entry("RegNet", {"embedding_size": 8, "hidden_sizes": [8, 16],
                                "depths": [1, 1], "groups_width": 4}, **POOLED),
    "bit": _entry("Bit", {"embedding_size": 8, "hidden_sizes": [8, 16], "depths": [1, 1],
                          "num_groups": 4}, **POOLED),
    "mobilenet_v1": _entry("MobileNetV1", {"image_size": 32, "depth_multiplier": 0.25},
                           **POOLED),
    "mobilenet_v2": _entry("MobileNetV2", {"image_size": 32, "depth_multiplier": 0.35},
                           **POOLED),
    "efficientnet": _entry("EfficientNet", {"image_size": 32, "width_coefficient": 0.25,
                                            "depth_coefficient": 0.2, "hidden_dim": 320},
                           **POOLED),
    "mobilevit": _entry("MobileViT", {"image_size": 32, "patch_size": 2,
                                      "hidden_sizes": [16, 24, 32],
                                      "neck_hidden_sizes": [8, 8, 16, 16, 24, 24, 32]},
                        **POOLED),
    "levit": _entry("Levit", {"image_size": 32, "hidden_sizes": [16, 24, 32],
                              "num_attention_heads": [1, 2, 2], "depths": [1, 1, 1],
                              "key_dim": [8, 8, 8]}, **POOLED),
    "poolformer": _entry("PoolFormer", {"hidden_sizes": [8, 16, 16, 32],
                                        "depths": [1, 1, 1, 1]}),
    "segformer": _entry("Segformer", {"hidden_sizes": [8, 16, 16, 32], "depths": [1, 1, 1, 1],
                                      "num_attention_heads": [1, 1, 2, 2],
                                      "decoder_hidden_size": 32}),
    # CvtStage indexes its drop-path rates by the stage number: depth[i] must exceed i
    "cvt": _entry("Cvt", {"embed_dim": [16, 32, 32], "num_heads": [1, 2, 2],
                          "depth": [1, 2, 3]}),
    "pvt": _entry("Pvt", {"image_size": 32, "hidden_sizes": [8, 16, 16, 32],
                          "depths": [1, 1, 1, 1], "num_attention_heads": [1, 1, 2, 2]}),
    "pvt_v2": _entry("PvtV2", {"image_size": 32, "hidden_sizes": [8, 16, 16, 32],
                               "depths": [1, 1, 1, 1], "num_attention_heads": [1, 1, 2, 2]}),
    "focalnet": _entry("FocalNet", {"image_size": 32, "patch_size": 4, "embed_dim": 16,
                                    "depths": [1, 1], "hidden_sizes": [16, 32]}),
    "glpn": _entry("GLPN", {"hidden_sizes": [8, 16, 16, 32], "depths": [1, 1, 1, 1],
                            "num_attention_heads": [1, 1, 2, 2], "decoder_hidden_size": 16}),
}

AUDIO_MODELS: dict[str, Builder] = {
    "wav2vec2": _entry("Wav2Vec2", AUDIO, inputs="audio"),
    "hubert": _entry("Hubert", AUDIO, inputs="audio"),
    "wavlm": _entry("WavLM", AUDIO, inputs="audio"),
    "data2vec_audio": _entry("Data2VecAudio", AUDIO, inputs="audio"),
    "unispeech": _entry("UniSpeech", AUDIO, inputs="audio"),
    "sew": _entry("SEW", {**AUDIO, "squeeze_factor": 2}, inputs="audio"),
    "wav2vec2_conformer": _entry("Wav2Vec2Conformer", AUDIO, inputs="audio"),
    "ast": _entry("AST",
                  {**ENCODER, "num_mel_bins": 16, "max_length": 32, "patch_size": 8,
                   "frequency_stride": 8, "time_stride": 8}, inputs="spectrogram"),
    "whisper": _entry("Whisper", {"encoder_layers": 2, "decoder_layers": 2, "d_model": 32,
                                  "encoder_attention_heads": 2, "decoder_attention_heads": 2,
                                  "encoder_ffn_dim": 64, "decoder_ffn_dim": 64,
                                  "num_mel_bins": 16, "max_source_positions": 16,
                                  "max_target_positions": 16, "vocab_size": 96,
                                  "pad_token_id": 1, "bos_token_id": 0, "eos_token_id": 2,
                                  "decoder_start_token_id": 0, "use_cache": False},
                       inputs="whisper"),
}

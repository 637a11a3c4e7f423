"""Models for the end-to-end tests, built from configs with random weights (no downloads).

Each builder returns ``(module, example_inputs)`` with the module in eval mode. Hugging Face
models are wrapped so that they return plain tensors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from coreai_torch.examples import TinyConvNet
from tests.models.builders import Builder, hf_model, pixels, plain, token_ids


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 32), nn.Tanh(),
                                 nn.LayerNorm(32), nn.Linear(32, 5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)


class Recurrent(nn.Module):
    def __init__(self, kind: type[nn.Module]) -> None:
        super().__init__()
        self.rnn = kind(input_size=8, hidden_size=16, num_layers=2, batch_first=True)
        self.head = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.rnn(x)
        return self.head(out)


class UNet(nn.Module):
    """Two-level UNet: strided convs down, bilinear/nearest upsampling, skip concatenation."""

    def __init__(self) -> None:
        super().__init__()
        self.enc1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.enc2 = nn.Sequential(nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU())
        self.bottom = nn.Sequential(nn.MaxPool2d(2), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        self.dec2 = nn.Conv2d(32, 8, 3, padding=1)
        self.dec1 = nn.Conv2d(16, 2, 1)
        self.up = nn.ConvTranspose2d(8, 8, 2, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e1 = self.enc1(x)
        e2 = self.enc2(e1)
        b = F.interpolate(self.bottom(e2), scale_factor=2, mode="bilinear", align_corners=False)
        d2 = F.relu(self.dec2(torch.cat([b, e2], dim=1)))
        d1 = torch.cat([self.up(d2), F.interpolate(e1, size=e1.shape[-2:], mode="nearest")], 1)
        return self.dec1(d1)


class CondModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(6, 6)
        self.b = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cond(x.mean() > 0, lambda x: self.a(x).relu(), lambda x: self.b(x).tanh(),
                          (x,))


def gpt2(attn: str) -> tuple[nn.Module, tuple[Any, ...]]:
    from transformers import GPT2Config, GPT2Model

    cfg = GPT2Config(n_layer=2, n_head=2, n_embd=32, vocab_size=96, n_positions=32,
                     use_cache=False, bos_token_id=0, eos_token_id=0, attn_implementation=attn)
    return hf_model(GPT2Model, cfg, (token_ids(),), ("input_ids",))


def bert(attn: str) -> tuple[nn.Module, tuple[Any, ...]]:
    from transformers import BertConfig, BertModel

    cfg = BertConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32,
                     intermediate_size=64, vocab_size=96, attn_implementation=attn)
    mask = torch.ones(2, 11, dtype=torch.int64)
    mask[1, 7:] = 0
    return hf_model(BertModel, cfg, (token_ids(), mask), ("input_ids", "attention_mask"))


def _decoder(cls_name: str, attn: str) -> tuple[nn.Module, tuple[Any, ...]]:
    import transformers

    config_cls = getattr(transformers, f"{cls_name}Config")
    model_cls = getattr(transformers, f"{cls_name}Model")
    cfg = config_cls(num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                     hidden_size=32, intermediate_size=64, vocab_size=96, use_cache=False,
                     max_position_embeddings=64, attn_implementation=attn)
    return hf_model(model_cls, cfg, (token_ids(),), ("input_ids",))


def t5_encoder(attn: str) -> tuple[nn.Module, tuple[Any, ...]]:
    from transformers import T5Config, T5EncoderModel

    cfg = T5Config(num_layers=2, num_heads=2, d_model=32, d_kv=16, d_ff=64, vocab_size=96,
                   attn_implementation=attn)
    return hf_model(T5EncoderModel, cfg, (token_ids(),), ("input_ids",))


def vit(attn: str) -> tuple[nn.Module, tuple[Any, ...]]:
    from transformers import ViTConfig, ViTModel

    cfg = ViTConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32,
                    intermediate_size=64, image_size=32, patch_size=8, attn_implementation=attn)
    return hf_model(ViTModel, cfg, (pixels(),), ("pixel_values",))


def swin(attn: str) -> tuple[nn.Module, tuple[Any, ...]]:
    from transformers import SwinConfig, SwinModel

    cfg = SwinConfig(image_size=32, patch_size=4, embed_dim=16, depths=[1, 1], num_heads=[2, 2],
                     window_size=4, attn_implementation=attn)
    return hf_model(SwinModel, cfg, (pixels(),), ("pixel_values",))


def convnext(attn: str) -> tuple[nn.Module, tuple[Any, ...]]:
    from transformers import ConvNextConfig, ConvNextModel

    cfg = ConvNextConfig(num_channels=3, num_stages=2, hidden_sizes=[8, 16], depths=[1, 1],
                         image_size=32)
    return hf_model(ConvNextModel, cfg, (pixels(),), ("pixel_values",), "pooler_output")


def resnet(attn: str) -> tuple[nn.Module, tuple[Any, ...]]:
    from transformers import ResNetConfig, ResNetModel

    cfg = ResNetConfig(embedding_size=8, hidden_sizes=[8, 16], depths=[1, 1],
                       layer_type="bottleneck")
    return hf_model(ResNetModel, cfg, (pixels(),), ("pixel_values",), "pooler_output")


def mobilenet_v2(attn: str) -> tuple[nn.Module, tuple[Any, ...]]:
    from transformers import MobileNetV2Config, MobileNetV2Model

    cfg = MobileNetV2Config(image_size=32, depth_multiplier=0.35)
    return hf_model(MobileNetV2Model, cfg, (pixels(),), ("pixel_values",), "pooler_output")


def whisper_encoder(attn: str) -> tuple[nn.Module, tuple[Any, ...]]:
    from transformers import WhisperConfig
    from transformers.models.whisper.modeling_whisper import WhisperEncoder

    cfg = WhisperConfig(encoder_layers=2, encoder_attention_heads=2, d_model=32,
                        encoder_ffn_dim=64, num_mel_bins=16, max_source_positions=16,
                        attn_implementation=attn)
    feats = torch.randn(1, 16, 32, generator=torch.Generator().manual_seed(3))
    return hf_model(WhisperEncoder, cfg, (feats,), ("input_features",))


def wav2vec2(attn: str) -> tuple[nn.Module, tuple[Any, ...]]:
    from transformers import Wav2Vec2Config, Wav2Vec2Model

    cfg = Wav2Vec2Config(num_hidden_layers=2, num_attention_heads=2, hidden_size=32,
                         intermediate_size=64, conv_dim=(16, 16), conv_stride=(5, 2),
                         conv_kernel=(10, 3), num_conv_pos_embeddings=16,
                         num_conv_pos_embedding_groups=2, attn_implementation=attn)
    audio = torch.randn(1, 400, generator=torch.Generator().manual_seed(4))
    return hf_model(Wav2Vec2Model, cfg, (audio,), ("input_values",))


def clip_text(attn: str) -> tuple[nn.Module, tuple[Any, ...]]:
    from transformers import CLIPTextConfig, CLIPTextModel

    cfg = CLIPTextConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32,
                         intermediate_size=64, vocab_size=96, max_position_embeddings=32,
                         attn_implementation=attn)
    return hf_model(CLIPTextModel, cfg, (token_ids(),), ("input_ids",), "pooler_output")


def clip_vision(attn: str) -> tuple[nn.Module, tuple[Any, ...]]:
    from transformers import CLIPVisionConfig, CLIPVisionModel

    cfg = CLIPVisionConfig(num_hidden_layers=2, num_attention_heads=2, hidden_size=32,
                           intermediate_size=64, image_size=32, patch_size=8,
                           attn_implementation=attn)
    return hf_model(CLIPVisionModel, cfg, (pixels(),), ("pixel_values",), "pooler_output")


def _transformer_encoder() -> nn.Module:
    layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True)
    return nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)


g = torch.Generator().manual_seed(5)
PLAIN: dict[str, Builder] = {
    "mlp": plain(MLP, torch.randn(3, 16, generator=g)),
    "cnn_batchnorm": plain(TinyConvNet, torch.randn(2, 3, 32, 32, generator=g)),
    "transformer_encoder": plain(_transformer_encoder, torch.randn(2, 9, 32, generator=g)),
    "lstm": plain(lambda: Recurrent(nn.LSTM), torch.randn(2, 7, 8, generator=g)),
    "gru": plain(lambda: Recurrent(nn.GRU), torch.randn(2, 7, 8, generator=g)),
    "unet": plain(UNet, torch.randn(1, 3, 16, 16, generator=g)),
    "cond": plain(CondModel, torch.randn(4, 6, generator=g)),
}
ATTENTION = ("sdpa", "eager")
HF_ATTENTION: dict[str, Callable[[str], tuple[nn.Module, tuple[Any, ...]]]] = {
    "gpt2": gpt2, "bert": bert, "llama": lambda a: _decoder("Llama", a),
    "qwen2": lambda a: _decoder("Qwen2", a), "mistral": lambda a: _decoder("Mistral", a),
    "t5_encoder": t5_encoder, "vit": vit, "swin": swin, "whisper_encoder": whisper_encoder,
    "wav2vec2": wav2vec2, "clip_text": clip_text, "clip_vision": clip_vision,
}
HF_CONV: dict[str, Callable[[str], tuple[nn.Module, tuple[Any, ...]]]] = {
    "convnext": convnext, "resnet": resnet, "mobilenet_v2": mobilenet_v2,
}


def all_models() -> dict[str, Builder]:
    """Every model-test case by id."""
    out = dict(PLAIN)
    for name, fn in HF_ATTENTION.items():
        for attn in ATTENTION:
            out[f"{name}[{attn}]"] = (lambda fn=fn, attn=attn: fn(attn))
    for name, fn in HF_CONV.items():
        out[name] = (lambda fn=fn: fn("eager"))
    return out

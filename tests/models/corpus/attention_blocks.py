"""Corpus: hand-built attention and token-mixing families rebuilt with plain torch at toy size
(LeViT's attention bias, MaxViT/CoAtNet with chunked projections, Swin's shifted windows,
MLP-Mixer, HaloNet's blocks with halos). Batch norms are randomized like the convolutional
blocks."""

from __future__ import annotations

import itertools

import torch
import torch.nn.functional as F
from torch import nn

from tests.models.builders import Builder
from tests.models.corpus.conv_blocks import InvertedResidual, block, conv_bn


class LinearBN(nn.Sequential):
    """LeViT's Linear followed by BatchNorm1d over the flattened tokens."""

    def __init__(self, cin: int, cout: int) -> None:
        super().__init__(nn.Linear(cin, cout, bias=False), nn.BatchNorm1d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        return self[1](self[0](x).flatten(0, 1)).reshape(b, n, -1)


class LeViTAttention(nn.Module):
    """Multi-head attention with a learned bias per head and relative offset, gathered through
    an index buffer; hard-swish before the output projection."""

    def __init__(self, dim: int = 32, heads: int = 2, key_dim: int = 8, res: int = 4) -> None:
        super().__init__()
        self.heads, self.key_dim, self.scale = heads, key_dim, key_dim ** -0.5
        self.qkv = LinearBN(dim, heads * key_dim * 4)  # q, k: key_dim; v: 2 * key_dim
        self.proj = nn.Sequential(nn.Hardswish(), LinearBN(heads * key_dim * 2, dim))
        points = list(itertools.product(range(res), range(res)))
        offsets: dict[tuple[int, int], int] = {}
        idxs = []
        for p1 in points:
            for p2 in points:
                off = (abs(p1[0] - p2[0]), abs(p1[1] - p2[1]))
                idxs.append(offsets.setdefault(off, len(offsets)))
        self.attention_biases = nn.Parameter(torch.randn(heads, len(offsets)) * 0.5)
        self.register_buffer("bias_idxs", torch.tensor(idxs).view(len(points), len(points)))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, _ = x.shape
        qkv = self.qkv(x).view(b, n, self.heads, -1)
        q, k, v = qkv.split([self.key_dim, self.key_dim, 2 * self.key_dim], dim=3)
        q, k, v = q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)
        attn = q @ k.transpose(-2, -1) * self.scale + self.attention_biases[:, self.bias_idxs]
        out = (attn.softmax(-1) @ v).transpose(1, 2).reshape(b, n, -1)
        return x + self.proj(out)


class LeViT(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(conv_bn(3, 16, 3, 2, act=nn.Hardswish),
                                  conv_bn(16, 32, 3, 2, act=nn.Hardswish),
                                  conv_bn(32, 32, 3, 2))
        self.attn = LeViTAttention()
        self.mlp = nn.Sequential(LinearBN(32, 64), nn.Hardswish(), LinearBN(64, 32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = self.attn(self.stem(x).flatten(2).transpose(1, 2))
        return (t + self.mlp(t)).mean(1)


class ChunkedAttention(nn.Module):
    """CoAtNet/MaxViT-style attention over 2-d tokens: a 1x1-conv qkv projection chunked in
    three, the query scaled and the value batch-normed (affine chains on split results), a
    relative position bias."""

    def __init__(self, c: int, heads: int, window: int, grid: bool) -> None:
        super().__init__()
        self.c, self.heads, self.window, self.grid = c, heads, window, grid
        self.qkv = nn.Conv2d(c, 3 * c, 1)
        self.v_norm = nn.BatchNorm2d(c)
        self.proj = nn.Conv2d(c, c, 1)
        self.rel_bias = nn.Parameter(torch.randn(heads, window * window, window * window) * 0.3)
        self.scale = (c // heads) ** -0.5

    def _partition(self, t: torch.Tensor) -> torch.Tensor:
        b, c, h, w = t.shape
        ws = self.window
        if self.grid:  # MaxViT grid attention: tokens strided across the whole map
            t = t.view(b, c, ws, h // ws, ws, w // ws).permute(0, 3, 5, 2, 4, 1)
        else:  # block (window) attention
            t = t.view(b, c, h // ws, ws, w // ws, ws).permute(0, 2, 4, 3, 5, 1)
        return t.reshape(-1, ws * ws, self.heads, c // self.heads).transpose(1, 2)

    def _merge(self, t: torch.Tensor, b: int, h: int, w: int) -> torch.Tensor:
        ws, c = self.window, self.c
        t = t.transpose(1, 2).reshape(b, -1, ws, ws, c)
        if self.grid:
            t = t.view(b, h // ws, w // ws, ws, ws, c).permute(0, 5, 3, 1, 4, 2)
        else:
            t = t.view(b, h // ws, w // ws, ws, ws, c).permute(0, 5, 1, 3, 2, 4)
        return t.reshape(b, c, h, w)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, _, h, w = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=1)
        q = q * self.scale
        v = self.v_norm(v)
        q, k, v = self._partition(q), self._partition(k), self._partition(v)
        attn = (q @ k.transpose(-2, -1) + self.rel_bias).softmax(-1)
        return x + self.proj(self._merge(attn @ v, b, h, w))


class MaxViT(nn.Module):
    """MBConv, then block attention, then grid attention (MaxViT); CoAtNet without grid."""

    def __init__(self, grid: bool) -> None:
        super().__init__()
        self.stem = conv_bn(3, 16, 3, 2, act=nn.GELU)
        self.mbconv = InvertedResidual(16, 64, 32, 3, 2, nn.GELU, nn.SiLU, nn.Sigmoid)
        self.block_attn = ChunkedAttention(32, 2, 4, grid=False)
        self.grid_attn = ChunkedAttention(32, 2, 4, grid=True) if grid else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.grid_attn(self.block_attn(self.mbconv(self.stem(x))))


class SwinBlock(nn.Module):
    """Swin: (shifted) window attention with a relative position bias table and the
    shifted-window mask, then an MLP; channels-last tokens."""

    def __init__(self, dim: int, heads: int, window: int, res: int, shift: int) -> None:
        super().__init__()
        self.dim, self.heads, self.window, self.res, self.shift = dim, heads, window, res, shift
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.qkv, self.proj = nn.Linear(dim, 3 * dim), nn.Linear(dim, dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))
        self.table = nn.Parameter(torch.randn((2 * window - 1) ** 2, heads) * 0.3)
        coords = torch.stack(torch.meshgrid(torch.arange(window), torch.arange(window),
                                            indexing="ij")).flatten(1)
        rel = (coords[:, :, None] - coords[:, None, :]).permute(1, 2, 0) + window - 1
        self.register_buffer("index", rel[..., 0] * (2 * window - 1) + rel[..., 1])
        self.register_buffer("mask", self._mask() if shift else None)

    def _windows(self, t: torch.Tensor) -> torch.Tensor:
        b, h, w, c = t.shape
        ws = self.window
        t = t.view(b, h // ws, ws, w // ws, ws, c).permute(0, 1, 3, 2, 4, 5)
        return t.reshape(-1, ws * ws, c)

    def _mask(self) -> torch.Tensor:
        img = torch.zeros(1, self.res, self.res, 1)
        cuts = (slice(0, -self.window), slice(-self.window, -self.shift),
                slice(-self.shift, None))
        for i, (hs, ws) in enumerate(itertools.product(cuts, cuts)):
            img[:, hs, ws, :] = i
        ids = self._windows(img).squeeze(-1)
        diff = ids[:, None, :] - ids[:, :, None]
        return torch.where(diff != 0, -100.0, 0.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, c = x.shape
        h = w = self.res
        y = self.norm1(x).view(b, h, w, c)
        if self.shift:
            y = torch.roll(y, (-self.shift, -self.shift), (1, 2))
        win = self._windows(y)
        nw, t = win.shape[:2]
        qkv = self.qkv(win).view(nw, t, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv.unbind(0)
        attn = q @ k.transpose(-2, -1) * (c // self.heads) ** -0.5
        attn = attn + self.table[self.index.view(-1)].view(t, t, -1).permute(2, 0, 1)
        if self.mask is not None:
            attn = attn.view(b, -1, self.heads, t, t) + self.mask[None, :, None]
            attn = attn.view(-1, self.heads, t, t)
        out = self.proj((attn.softmax(-1) @ v).transpose(1, 2).reshape(nw, t, c))
        ws = self.window
        out = out.view(b, h // ws, w // ws, ws, ws, c).permute(0, 1, 3, 2, 4, 5)
        out = out.reshape(b, h, w, c)
        if self.shift:
            out = torch.roll(out, (self.shift, self.shift), (1, 2))
        x = x + out.reshape(b, n, c)
        return x + self.mlp(self.norm2(x))


class Swin(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Conv2d(3, 32, 4, 4)
        self.blocks = nn.Sequential(SwinBlock(32, 2, 4, 8, 0), SwinBlock(32, 2, 4, 8, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.blocks(self.embed(x).flatten(2).transpose(1, 2))


class MixerBlock(nn.Module):
    """MLP-Mixer: a token-mixing MLP across patches, then a channel-mixing MLP."""

    def __init__(self, tokens: int, dim: int) -> None:
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(dim), nn.LayerNorm(dim)
        self.tokens = nn.Sequential(nn.Linear(tokens, 2 * tokens), nn.GELU(),
                                    nn.Linear(2 * tokens, tokens))
        self.channels = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(),
                                      nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.tokens(self.norm1(x).transpose(1, 2)).transpose(1, 2)
        return x + self.channels(self.norm2(x))


class Mixer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Conv2d(3, 32, 4, 4)
        self.blocks = nn.Sequential(MixerBlock(64, 32), MixerBlock(64, 32))
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = self.blocks(self.embed(x).flatten(2).transpose(1, 2))
        return self.head(F.layer_norm(t, (32,)).mean(1))


class HaloAttention(nn.Module):
    """HaloNet's blocked local attention (timm's ``HaloAttn``, no relative position embedding):
    each query block attends to its block padded by a halo, cut out of the padded keys/values
    by two ``unfold`` calls, the second over the first's strided, overlapping view (issue 36:
    ``as_strided`` of a non-dense view)."""

    def __init__(self, dim: int = 16, heads: int = 2, block_size: int = 4, halo: int = 1) -> None:
        super().__init__()
        self.heads, self.block, self.halo = heads, block_size, halo
        self.head_dim = dim // heads
        self.q = nn.Conv2d(dim, dim, 1, bias=False)
        self.kv = nn.Conv2d(dim, 2 * dim, 1, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        bs, hd, nh, nw = self.block, self.head_dim, h // self.block, w // self.block
        blocks, win = nh * nw, self.block + 2 * self.halo
        q = self.q(x).reshape(-1, hd, nh, bs, nw, bs).permute(0, 1, 3, 5, 2, 4)
        q = q.reshape(b * self.heads, hd, -1, blocks).transpose(1, 3)
        kv = F.pad(self.kv(x), [self.halo] * 4)
        kv = kv.unfold(2, win, bs).unfold(3, win, bs).reshape(
            b * self.heads, 2 * hd, blocks, -1).permute(0, 2, 3, 1)
        k, v = torch.split(kv, [hd, hd], dim=-1)
        attn = ((q @ k.transpose(-1, -2)) * hd ** -0.5).softmax(dim=-1)
        out = (attn @ v).transpose(1, 3).reshape(-1, bs, bs, nh, nw)
        return out.permute(0, 3, 1, 4, 2).reshape(b, c, h, w)


class HaloNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = conv_bn(3, 16, 3, 2, act=nn.ReLU)
        self.attn = HaloAttention()
        self.norm = nn.BatchNorm2d(16)
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.stem(x)
        y = F.relu(self.norm(y + self.attn(y)))
        return self.head(y.mean((2, 3)))


ATTENTION_BLOCKS: dict[str, Builder] = {
    "levit_attention_bias": block(LeViT, 1, 3, 32, 32),
    "maxvit_blocks": block(lambda: MaxViT(grid=True), 1, 3, 32, 32),
    "coatnet_blocks": block(lambda: MaxViT(grid=False), 1, 3, 32, 32),
    "swin_shifted_windows": block(Swin, 1, 3, 32, 32),
    "mlp_mixer": block(Mixer, 1, 3, 32, 32),
    "halonet_blocks": block(HaloNet, 1, 3, 32, 32),
}

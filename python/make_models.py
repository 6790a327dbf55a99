"""Export a small zoo of randomly initialised PyTorch models to ONNX.

These models are the test inputs for the pipeline-opt ONNX importer. Each one
is small enough to be trained on CPU in tests, and each covers a different set
of ONNX operators:

  mlp          Flatten + 3 Linear layers with ReLU. The simplest case: Gemm,
               Relu, Flatten. Static input "input" [8, 1, 28, 28].
  resnet18     torchvision resnet18 (num_classes=10). Conv, BatchNormalization
               in training mode, residual Add, MaxPool, GlobalAveragePool.
               Input "input" [2, 3, 32, 32] with a SYMBOLIC batch dimension
               (dynamic_axes), to exercise the importer's --batch-size flag.
  vgg11        torchvision vgg11 (num_classes=10) adapted to 32x32 inputs:
               `features` is kept as is, `avgpool` becomes
               AdaptiveAvgPool2d((1, 1)) and `classifier` becomes
               Linear(512,512)-ReLU-Dropout-Linear(512,512)-ReLU-Dropout-
               Linear(512,10). The stock 4096-wide classifier after a 7x7
               adaptive pool does not export for 1x1 feature maps (torch
               rejects a 7x7 output that is not a factor of the 1x1 input)
               and would hold ~129M parameters. Adds Dropout in training mode.
               Static input "input" [2, 3, 32, 32].
  transformer  Linear(16,32) -> nn.TransformerEncoder (2 layers, d_model 32,
               4 heads, ff 64, batch_first) -> mean over sequence -> Linear(32,
               10). Covers the attention ops torch emits for the built-in
               encoder (MatMul, Softmax, LayerNormalization, Reshape/Transpose)
               plus shape arithmetic. Input "input" [B=4, 8, 16] with a
               symbolic batch dimension.
  gpt          A tiny GPT-style decoder written by hand (vocab 64, context 16,
               d_model 32, 2 heads, 2 pre-LayerNorm blocks): token + learned
               position embeddings (Gather), causal self-attention masked with
               masked_fill from a bool buffer (Where), GELU MLP, and an output
               projection tied to the token embedding. Sequences are always
               exactly `context` tokens, so reshapes use Python ints and the
               graph has no shape arithmetic. Static int64 input "tokens"
               [4, 16], output logits [4, 16, 64].
  padnet       Two Conv2d behind reflect and replicate (edge) padding and a
               constant 0.5 border, then Linear: Pad in every mode. Static
               input "input" [8, 3, 8, 8].
  tied         Linear(16,64)-ReLU, four Linear(64,64)-ReLU hidden layers of
               which the first and the third are one module (one initializer
               read by two Gemms, as torch's export also makes of equal-valued
               weights), Linear(64,10). Pipelined with 2 chunks per device,
               the two reads land on stages s and s + p of one device. Static
               input "input" [8, 16].

All exports use opset 17, TrainingMode.TRAINING (so BatchNorm/Dropout appear in
their training form), no constant folding, and output name "logits". Every
file is checked with onnx.checker. torch.manual_seed(0) is set before building
each model, so the output is deterministic.

Usage:
  /usr/bin/python3 python/make_models.py --out DIR [--models mlp,gpt,...]
"""

import argparse
import math
import os
import warnings

import onnx
import torch
import torch.nn as nn
import torchvision


def make_mlp():
    model = nn.Sequential(
        nn.Flatten(),
        nn.Linear(784, 128), nn.ReLU(),
        nn.Linear(128, 64), nn.ReLU(),
        nn.Linear(64, 10),
    )
    return model, torch.randn(8, 1, 28, 28), "input", None


def make_resnet18():
    model = torchvision.models.resnet18(weights=None, num_classes=10)
    dynamic = {"input": {0: "batch"}, "logits": {0: "batch"}}
    return model, torch.randn(2, 3, 32, 32), "input", dynamic


def make_vgg11():
    model = torchvision.models.vgg11(weights=None, num_classes=10)
    model.avgpool = nn.AdaptiveAvgPool2d((1, 1))
    model.classifier = nn.Sequential(
        nn.Linear(512, 512), nn.ReLU(True), nn.Dropout(),
        nn.Linear(512, 512), nn.ReLU(True), nn.Dropout(),
        nn.Linear(512, 10),
    )
    return model, torch.randn(2, 3, 32, 32), "input", None


class TransformerClassifier(nn.Module):
    def __init__(self, in_features=16, d_model=32, num_classes=10):
        super().__init__()
        self.proj = nn.Linear(in_features, d_model)
        layer = nn.TransformerEncoderLayer(
            d_model=d_model, nhead=4, dim_feedforward=64, dropout=0.1,
            batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2)
        self.head = nn.Linear(d_model, num_classes)

    def forward(self, x):
        h = self.encoder(self.proj(x))
        return self.head(h.mean(dim=1))


def make_transformer():
    dynamic = {"input": {0: "batch"}, "logits": {0: "batch"}}
    return TransformerClassifier(), torch.randn(4, 8, 16), "input", dynamic


class CausalSelfAttention(nn.Module):
    def __init__(self, d_model, n_head, context, dropout, fused_qkv=True):
        super().__init__()
        self.n_head, self.head_dim = n_head, d_model // n_head
        self.context, self.d_model = context, d_model
        if fused_qkv:
            self.qkv = nn.Linear(d_model, 3 * d_model)
        else:
            self.q, self.k, self.v = (nn.Linear(d_model, d_model)
                                      for _ in range(3))
        self.out = nn.Linear(d_model, d_model)
        self.drop = nn.Dropout(dropout)
        # bool (not float) so it is not mistaken for a trainable weight.
        mask = torch.ones(context, context, dtype=torch.bool).triu(1)
        self.register_buffer("mask", mask)

    def forward(self, x):
        # Shapes come from Python ints (sequences are always `context` long),
        # not x.shape, so the traced graph has no shape arithmetic.
        heads = (-1, self.context, self.n_head, self.head_dim)
        if hasattr(self, "qkv"):
            q, k, v = self.qkv(x).split(self.d_model, dim=2)
        else:
            q, k, v = self.q(x), self.k(x), self.v(x)
        q = q.view(heads).transpose(1, 2)
        k = k.view(heads).transpose(1, 2)
        v = v.view(heads).transpose(1, 2)
        att = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)
        att = att.masked_fill(self.mask, float("-inf"))
        att = self.drop(att.softmax(dim=-1))
        y = (att @ v).transpose(1, 2).reshape(-1, self.context, self.d_model)
        return self.out(y)


class Block(nn.Module):
    def __init__(self, d_model, n_head, context, dropout, fused_qkv=True):
        super().__init__()
        self.ln1 = nn.LayerNorm(d_model)
        self.attn = CausalSelfAttention(d_model, n_head, context, dropout,
                                        fused_qkv)
        self.ln2 = nn.LayerNorm(d_model)
        self.mlp = nn.Sequential(
            nn.Linear(d_model, 4 * d_model), nn.GELU(),
            nn.Linear(4 * d_model, d_model))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyGPT(nn.Module):
    def __init__(self, vocab=64, context=16, d_model=32, n_head=2,
                 n_layer=2, dropout=0.1, fused_qkv=True):
        super().__init__()
        self.tok_emb = nn.Embedding(vocab, d_model)
        self.pos_emb = nn.Embedding(context, d_model)
        self.register_buffer("pos", torch.arange(context, dtype=torch.int64))
        self.blocks = nn.Sequential(
            *[Block(d_model, n_head, context, dropout, fused_qkv)
              for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(d_model)
        self.lm_head = nn.Linear(d_model, vocab, bias=False)
        self.lm_head.weight = self.tok_emb.weight  # tied

    def forward(self, tokens):
        x = self.tok_emb(tokens) + self.pos_emb(self.pos)
        return self.lm_head(self.ln_f(self.blocks(x)))


def make_gpt(n_layer=2, d_model=32, n_head=2, context=16, batch=4,
             dropout=0.1, fused_qkv=True, vocab=64):
    # The keywords are for scaling benchmarks and plans
    # (bench/plan_pipeline.py, python/check_plan_precision.py,
    # bench/gpu_bench.py) and for tensor parallelism
    # (python/check_tensor_parallel.py: separate Q, K, V projections); the
    # test model keeps the defaults.
    tokens = torch.randint(0, vocab, (batch, context), dtype=torch.int64)
    return (TinyGPT(vocab=vocab, n_layer=n_layer, d_model=d_model,
                    n_head=n_head, context=context, dropout=dropout,
                    fused_qkv=fused_qkv),
            tokens, "tokens", None)


class TiedMLP(nn.Module):
    def __init__(self, width=64):
        super().__init__()
        self.inp = nn.Linear(16, width)
        shared = nn.Linear(width, width)
        self.hidden = nn.ModuleList(
            [shared, nn.Linear(width, width), shared, nn.Linear(width, width)])
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        x = torch.relu(self.inp(x))
        for layer in self.hidden:
            x = torch.relu(layer(x))
        return self.head(x)


def make_tied():
    return TiedMLP(), torch.randn(8, 16), "input", None


class PadNet(nn.Module):
    """Convolutions behind each padding mode: reflect, replicate (ONNX
    edge) with uneven pads, and a constant 0.5 border."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 3)
        self.conv2 = nn.Conv2d(4, 4, 3)
        self.fc = nn.Linear(4 * 11 * 9, 10)

    def forward(self, x):
        x = torch.relu(self.conv1(nn.functional.pad(x, (1, 1, 1, 1),
                                                    mode="reflect")))
        x = torch.relu(self.conv2(nn.functional.pad(x, (1, 0, 2, 1),
                                                    mode="replicate")))
        x = nn.functional.pad(x, (1, 1, 1, 1), value=0.5)
        return self.fc(torch.flatten(x, 1))


def make_padnet():
    return PadNet(), torch.randn(8, 3, 8, 8), "input", None


def make_widemlp():
    """The compute-bound MLP of bench/model_steps.py: 8 layers of 1024 x 1024
    and a head, batch 256 (issue 16)."""
    layers = []
    for _ in range(8):
        layers += [nn.Linear(1024, 1024), nn.ReLU()]
    model = nn.Sequential(*layers, nn.Linear(1024, 10))
    return model, torch.randn(256, 1024), "input", None


def make_swin():
    """A small Swin Transformer (torchvision's, 2 stages of 2 blocks):
    shifted windows export as Mod (paddings), ScatterND (the attention
    mask) and Slices to the end (the roll)."""
    from torchvision.models.swin_transformer import SwinTransformer
    model = SwinTransformer(patch_size=[4, 4], embed_dim=16, depths=[2, 2],
                            num_heads=[2, 2], window_size=[4, 4],
                            stochastic_depth_prob=0.0, num_classes=10)
    return model, torch.randn(2, 3, 32, 32), "input", None


class EinsumAttention(nn.Module):
    """Single-head attention written with torch.einsum (as maxvit_t's):
    exports Einsum nodes, which the importer decomposes. Besides the
    batched products it has a diagonal (each token's score with itself
    weights the pooling) and a broadcast (a learned per-feature gate of
    shape 1 x 1 x d against b x i x d)."""

    def __init__(self, in_features=16, d_model=32, num_classes=10):
        super().__init__()
        self.qkv = nn.Linear(in_features, 3 * d_model)
        self.head = nn.Linear(d_model, num_classes)
        self.scale = d_model ** -0.5
        self.gate = nn.Parameter(torch.linspace(0.5, 1.5, d_model)
                                 .reshape(1, 1, d_model))

    def forward(self, x):
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        scores = torch.einsum("bid,bjd->bij", q, k) * self.scale
        mixed = torch.einsum("bij,bjd->bid", scores.softmax(dim=-1), v)
        gated = torch.einsum("bid,bid->bid", mixed, self.gate)
        weights = torch.einsum("bii->bi", scores).softmax(dim=-1)
        return self.head(torch.einsum("bid,bi->bd", gated, weights))


def make_einsum():
    return EinsumAttention(), torch.randn(4, 8, 16), "input", None


class Activations(nn.Module):
    """An MLP through the activations and elementwise ops that the other
    models lack: PReLU (one slope per feature), ELU, SELU, CELU, Softplus,
    Softsign, sin and cos, torch.maximum / torch.minimum, L1 and L2 norms
    (ReduceL1, ReduceL2), a <= mask (LessOrEqual), an upper triangle
    (Trilu), torch.gather (GatherElements), torch.cumsum (CumSum) and a
    one-hot of argmax (ArgMax)."""

    def __init__(self, in_features=16, width=32, num_classes=10):
        super().__init__()
        self.fc1 = nn.Linear(in_features, width)
        self.prelu = nn.PReLU(width, init=0.2)
        self.fc2 = nn.Linear(width, width)
        self.fc3 = nn.Linear(width, width)
        self.head = nn.Linear(width, num_classes)
        # Every row reads its features in one fixed shuffled order (the same
        # for every sample, so micro-batches compute what the batch does).
        self.register_buffer(
            "order", torch.randperm(width, generator=torch.Generator()
                                    .manual_seed(1)).reshape(1, width))

    def forward(self, x):
        h = self.prelu(self.fc1(x))
        a = nn.functional.elu(self.fc2(h), alpha=0.7)
        b = nn.functional.selu(self.fc3(h))
        m = torch.maximum(a, b) + torch.minimum(
            nn.functional.celu(a, alpha=0.5), nn.functional.softplus(b))
        s = nn.functional.softsign(m) + torch.sin(m) * torch.cos(h)
        s = s + torch.triu(s.reshape(-1, 4, 8), diagonal=1).reshape(s.shape)
        s = s + 0.5 * torch.gather(s, 1, self.order.expand(s.shape[0], -1))
        s = s + 0.05 * torch.cumsum(h, dim=1)
        top = s.argmax(dim=1, keepdim=True) == torch.arange(s.shape[1])
        s = s + 0.1 * top.to(s.dtype)
        l2 = torch.norm(s, p=2, dim=-1, keepdim=True)
        l1 = torch.norm(h, p=1, dim=-1, keepdim=True)
        s = torch.where(x[:, :1] <= 0.0, s / (l2 + 1), s * l1 / (l1 + 1))
        return self.head(s)


def make_activations():
    return Activations(), torch.randn(8, 16), "input", None


# Segmentation models (per-pixel logits [N, C, H, W]): their classes.
SEGMENTATION_CLASSES = {"segnet": 4}


class Decoder(nn.Module):
    """A small U-Net-like decoder: a strided convolution down, ConvTranspose2d
    up (stride 2 with output_padding, then grouped and dilated), GroupNorm
    (exported as InstanceNormalization between Reshapes), nearest upsampling
    by 2 and bilinear by 1.5 (Resize), pixel shuffle (DepthToSpace), a skip
    connection."""

    def __init__(self, num_classes=10):
        super().__init__()
        self.down = nn.Conv2d(3, 8, 3, stride=2, padding=1)
        self.up = nn.ConvTranspose2d(8, 8, 3, stride=2, padding=1,
                                     output_padding=1)
        self.norm = nn.GroupNorm(2, 8)
        self.up2 = nn.ConvTranspose2d(8, 4, 2, dilation=2, groups=2)
        self.near = nn.Upsample(scale_factor=2, mode="nearest")
        self.smooth = nn.Upsample(scale_factor=1.5, mode="bilinear",
                                  align_corners=False)
        self.head = nn.Linear(8 + 4 + 2, num_classes)

    def forward(self, x):
        d = torch.relu(self.down(x))                    # [n, 8, 4, 4]
        u = torch.relu(self.norm(self.up(d))) + self.near(d)  # [n, 8, 8, 8]
        s = self.smooth(self.up2(u))                    # [n, 4, 15, 15]
        p = nn.functional.pixel_shuffle(u, 2)           # [n, 2, 16, 16]
        pooled = torch.cat([u.mean(dim=(2, 3)), s.mean(dim=(2, 3)),
                            p.mean(dim=(2, 3))], dim=1)
        return self.head(pooled)


def make_decoder():
    return Decoder(), torch.randn(4, 3, 8, 8), "input", None


class SegNet(nn.Module):
    """A small fully convolutional segmentation net: per-pixel logits
    [N, classes, H, W] from a full-resolution branch (Conv, BatchNorm) and
    a half-resolution one (strided Conv, ConvTranspose back up)."""

    def __init__(self, num_classes=SEGMENTATION_CLASSES["segnet"]):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.norm = nn.BatchNorm2d(8)
        self.down = nn.Conv2d(8, 8, 3, stride=2, padding=1)
        self.up = nn.ConvTranspose2d(8, 8, 2, stride=2)
        self.head = nn.Conv2d(16, num_classes, 1)

    def forward(self, x):
        a = torch.relu(self.norm(self.conv(x)))   # [n, 8, 8, 8]
        u = torch.relu(self.up(torch.relu(self.down(a))))
        return self.head(torch.cat([a, u], dim=1))  # [n, classes, 8, 8]


def make_segnet():
    return SegNet(), torch.randn(4, 3, 8, 8), "input", None


class Recurrent(nn.Module):
    """A sequence classifier: a bidirectional LSTM (batch first), a GRU over
    its outputs and a plain RNN, then a head on the last step. The importer
    unrolls each over the 6 steps (lib/Import/ONNX/Recurrent.cpp)."""

    def __init__(self, features=5, num_classes=10):
        super().__init__()
        self.lstm = nn.LSTM(features, 6, batch_first=True, bidirectional=True)
        self.gru = nn.GRU(12, 7)
        self.rnn = nn.RNN(7, 4, nonlinearity="relu")
        self.head = nn.Linear(4, num_classes)

    def forward(self, x):                           # [n, 6, 5]
        y, _ = self.lstm(x)                         # [n, 6, 12]
        g, _ = self.gru(y.transpose(0, 1))          # [6, n, 7]
        r, _ = self.rnn(g)                          # [6, n, 4]
        return self.head(r[-1])


def make_recurrent():
    return Recurrent(), torch.randn(4, 6, 5), "input", None


MODELS = {
    "mlp": make_mlp,
    "resnet18": make_resnet18,
    "vgg11": make_vgg11,
    "transformer": make_transformer,
    "gpt": make_gpt,
    "tied": make_tied,
    "padnet": make_padnet,
    "widemlp": make_widemlp,
    "swin": make_swin,
    "einsum": make_einsum,
    "activations": make_activations,
    "decoder": make_decoder,
    "recurrent": make_recurrent,
    "segnet": make_segnet,
}
# Benchmark models the test suite does not export (34 MB of weights).
BENCH_ONLY = {"widemlp"}
# Exported only by the tests that check them (python/torch_reference.py).
ON_DEMAND = {"swin", "einsum", "activations", "decoder", "recurrent",
             "segnet"}


def export(name, out_dir, **model_kwargs):
    """Writes out_dir/<name>.onnx; model_kwargs go to the MODELS builder."""
    torch.manual_seed(0)
    model, example, input_name, dynamic_axes = MODELS[name](**model_kwargs)
    model.train()
    path = os.path.join(out_dir, name + ".onnx")
    torch.onnx.export(
        model, (example,), path,
        opset_version=17,
        training=torch.onnx.TrainingMode.TRAINING,
        do_constant_folding=False,
        input_names=[input_name],
        output_names=["logits"],
        dynamic_axes=dynamic_axes,
    )
    proto = onnx.load(path)
    onnx.checker.check_model(proto)
    ops = sorted({n.op_type for n in proto.graph.node})
    print(f"{name}: {os.path.getsize(path)} bytes, "
          f"{len(proto.graph.node)} nodes, ops={ops}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--models",
                        default=",".join(m for m in MODELS
                                         if m not in BENCH_ONLY | ON_DEMAND),
                        help="comma-separated subset of: " + ",".join(MODELS))
    args = parser.parse_args()
    names = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in names if m not in MODELS]
    if unknown:
        parser.error(f"unknown model(s): {', '.join(unknown)}")
    os.makedirs(args.out, exist_ok=True)
    # The exporter warns once per BatchNorm about dropping the in-place
    # num_batches_tracked update; that counter is irrelevant here.
    warnings.filterwarnings("ignore", message="ONNX Preprocess - Removing mutation")
    for name in names:
        export(name, args.out)


if __name__ == "__main__":
    main()

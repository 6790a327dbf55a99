"""Writes the model of a reported interleaved deadlock (issue 42, item 1).

torch's TransformerEncoder (2 layers, 4 heads, d_model 32, batch-first) over
a token embedding whose weight the output head shares, exported by
torch.onnx.export in eval mode. The exporter then also merges initializers
with equal values (every zero bias, every LayerNorm weight of ones), so
many weights are shared by stages on different devices, and the updates of
those stages exchange messages in both directions between devices.
"""
import sys

import torch
import torch.nn as nn


class TiedEncoder(nn.Module):
    def __init__(self, vocab=64, d_model=32):
        super().__init__()
        self.emb = nn.Embedding(vocab, d_model)
        layer = nn.TransformerEncoderLayer(d_model, 4, 64, dropout=0.0,
                                           batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2,
                                         enable_nested_tensor=False)
        self.head = nn.Linear(d_model, vocab, bias=False)
        self.head.weight = self.emb.weight

    def forward(self, tokens):
        return self.head(self.enc(self.emb(tokens)))


def main():
    torch.manual_seed(0)
    model = TiedEncoder().eval()
    tokens = torch.randint(0, 64, (4, 16))
    torch.onnx.export(model, (tokens,), sys.argv[1], opset_version=17,
                      input_names=["tokens"], output_names=["logits"])


if __name__ == "__main__":
    main()

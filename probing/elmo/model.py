"""The ELMo biLM in PyTorch: character CNN, highway layers, projection, and stacked biLSTMs.

Parameters keep the orientation of the official weights (``x @ W``), so loading and exporting are
plain copies. The LSTM bias folds in TensorFlow's run-time forget bias of 1.0.
"""

from __future__ import annotations

import math
import warnings
from typing import Optional

import torch
from torch import Tensor, nn

from .options import ElmoOptions

State = list[tuple[Tensor, Tensor]]


class CharCNN(nn.Module):
    """Context-free token representation from character ids (layer 0 of ELMo)."""

    def __init__(self, opts: ElmoOptions):
        super().__init__()
        self.opts = opts
        self.char_embed = nn.Embedding(opts.n_characters, opts.char_embed_dim, padding_idx=0)
        self.convs = nn.ModuleList(nn.Conv1d(opts.char_embed_dim, n, w) for w, n in opts.filters)
        nf = opts.n_filters
        self.highway_carry = nn.ModuleList(nn.Linear(nf, nf) for _ in range(opts.n_highway))
        self.highway_transform = nn.ModuleList(nn.Linear(nf, nf) for _ in range(opts.n_highway))
        self.projection = nn.Linear(nf, opts.projection_dim)
        self.activation = torch.relu if opts.activation == "relu" else torch.tanh

    def forward(self, char_ids: Tensor) -> Tensor:
        """``(n_tokens, max_chars)`` shifted ids -> ``(n_tokens, projection_dim)``."""
        x = self.char_embed(char_ids).transpose(1, 2)
        x = torch.cat([self.activation(conv(x).amax(dim=-1)) for conv in self.convs], dim=-1)
        for carry, transform in zip(self.highway_carry, self.highway_transform):
            t = torch.sigmoid(carry(x))
            x = t * torch.relu(transform(x)) + (1.0 - t) * x
        return self.projection(x)


class LstmDirection(nn.Module):
    """One direction of the biLM: ``n_layers`` LSTM cells with projection, clipping and skips."""

    def __init__(self, opts: ElmoOptions):
        super().__init__()
        c, p = opts.lstm_dim, opts.projection_dim
        self.opts = opts
        self.weight = nn.ParameterList(nn.Parameter(torch.empty(p + p, 4 * c)) for _ in range(opts.n_layers))
        self.bias = nn.ParameterList(nn.Parameter(torch.empty(4 * c)) for _ in range(opts.n_layers))
        self.proj = nn.ParameterList(nn.Parameter(torch.empty(c, p)) for _ in range(opts.n_layers))

    def forward(self, x: Tensor, mask: Tensor, state: Optional[State], dropout: float = 0.0
                ) -> tuple[list[Tensor], State]:
        """Run all layers over ``x`` ``(B, T, P)`` with ``mask`` ``(B, T)`` (valid steps first).

        Returns each layer's output ``(B, T, P)`` (zero at padding) and the final ``(h, c)`` per layer,
        taken at each row's last valid step. ``dropout`` (training only) applies to each layer's input.
        """
        opts = self.opts
        cell_clip = opts.cell_clip if opts.cell_clip else math.inf
        proj_clip = opts.proj_clip if opts.proj_clip else math.inf
        b, t, p = x.shape
        mask_t = mask.transpose(0, 1).unsqueeze(-1)
        outputs, final = [], []
        for layer in range(opts.n_layers):
            w = self.weight[layer]
            if state is None:
                h0 = x.new_zeros(b, p)
                c0 = x.new_zeros(b, opts.lstm_dim)
            else:
                h0, c0 = state[layer]
            x_in = nn.functional.dropout(x, dropout, self.training) if dropout else x
            gates_x = torch.addmm(self.bias[layer], x_in.reshape(b * t, p), w[:p]).view(b, t, -1)
            # TorchScript re-specialises its autograd graph for every new batch shape, which makes
            # training ~6x slower than eager mode; it only pays without gradients.
            recurrence = lstm_recurrence if torch.is_grad_enabled() else _scripted_recurrence
            out, h, c = recurrence(gates_x.transpose(0, 1).contiguous(), w[p:], self.proj[layer],
                                        h0, c0, mask_t, cell_clip, proj_clip)
            out = out.transpose(0, 1)
            if opts.use_skip_connections and layer > 0:
                out = out + x * mask.unsqueeze(-1)
            outputs.append(out)
            final.append((h, c))
            x = out
        return outputs, final


def lstm_recurrence(gates_x: Tensor, w_h: Tensor, w_p: Tensor, h: Tensor, c: Tensor, mask: Tensor,
                    cell_clip: float, proj_clip: float) -> tuple[Tensor, Tensor, Tensor]:
    """The time loop of one LSTM layer (time-major): gate order i, j, f, o as in TensorFlow.

    ``gates_x`` already holds ``x W_x + b``. Padded steps (``mask`` False) leave the state unchanged
    and output zeros, so the returned state is each row's state at its last valid step.
    """
    outs: list[Tensor] = []
    for s in range(gates_x.size(0)):
        z = torch.addmm(gates_x[s], h, w_h)
        i, j, f, o = z.chunk(4, 1)
        c_new = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(j)
        c_new = torch.clamp(c_new, -cell_clip, cell_clip)
        h_new = torch.mm(torch.sigmoid(o) * torch.tanh(c_new), w_p)
        h_new = torch.clamp(h_new, -proj_clip, proj_clip)
        m = mask[s]
        c = torch.where(m, c_new, c)
        h = torch.where(m, h_new, h)
        outs.append(h_new * m)
    return torch.stack(outs), h, c


with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # TorchScript still compiles this loop in ~1 s
    _scripted_recurrence = torch.jit.script(lstm_recurrence)


def reverse_padded(x: Tensor, lengths: Tensor) -> Tensor:
    """Reverse each row of ``x`` ``(B, T, ...)`` within its length; padding stays at the end."""
    b, t = x.shape[:2]
    steps = torch.arange(t, device=x.device).expand(b, t)
    idx = torch.where(steps < lengths.unsqueeze(1), lengths.unsqueeze(1) - 1 - steps, steps)
    return x.gather(1, idx.view(b, t, *([1] * (x.dim() - 2))).expand_as(x))


class BiLM(nn.Module):
    """The full biLM. ``forward`` returns every layer with sentence boundaries still in place."""

    def __init__(self, opts: ElmoOptions):
        super().__init__()
        self.opts = opts
        self.char_cnn = CharCNN(opts)
        self.forward_lstm = LstmDirection(opts)
        self.backward_lstm = LstmDirection(opts)

    def token_embeddings(self, char_ids: Tensor) -> Tensor:
        """``(B, T, C)`` ids -> ``(B, T, P)``, running the char CNN once per distinct token."""
        b, t, n = char_ids.shape
        flat = char_ids.reshape(b * t, n)
        uniq, inverse = torch.unique(flat, dim=0, return_inverse=True)
        return self.char_cnn(uniq)[inverse].view(b, t, -1)

    def forward(self, char_ids: Tensor, state: Optional[tuple[State, State]] = None, dropout: float = 0.0
                ) -> tuple[Tensor, list[Tensor], list[Tensor], Tensor, tuple[State, State]]:
        """Returns token embeddings, forward outputs, backward outputs (each ``(B, T, P)``), the mask,
        and the final state of both directions."""
        mask = (char_ids > 0).any(dim=-1)
        lengths = mask.sum(dim=1)
        tokens = self.token_embeddings(char_ids) * mask.unsqueeze(-1)
        fw_state, bw_state = state if state is not None else (None, None)
        fw, fw_final = self.forward_lstm(tokens, mask, fw_state, dropout)
        bw_rev, bw_final = self.backward_lstm(reverse_padded(tokens, lengths), mask, bw_state, dropout)
        bw = [reverse_padded(o, lengths) for o in bw_rev]
        return tokens, fw, bw, mask, (fw_final, bw_final)


class ScalarMix(nn.Module):
    """Peters et al. (2018) Eq. 1: ``gamma * sum_j softmax(s)_j * h_j`` over the layers."""

    def __init__(self, n_layers: int, initial: Optional[list[float]] = None, trainable: bool = True):
        super().__init__()
        init = torch.tensor(initial if initial is not None else [0.0] * n_layers, dtype=torch.float32)
        if init.numel() != n_layers:
            raise ValueError(f"ScalarMix: {n_layers} layers but {init.numel()} initial weights")
        self.scalars = nn.Parameter(init, requires_grad=trainable)
        self.gamma = nn.Parameter(torch.ones(()), requires_grad=trainable)

    @property
    def weights(self) -> Tensor:
        """The normalised layer weights softmax(s)."""
        return torch.softmax(self.scalars, dim=0)

    def forward(self, layers: Tensor | list[Tensor]) -> Tensor:
        """``layers``: a tensor ``(n_layers, ...)`` or a list of equally shaped tensors."""
        stacked = torch.stack(list(layers)) if isinstance(layers, (list, tuple)) else layers
        if stacked.size(0) != self.scalars.numel():
            raise ValueError(f"ScalarMix expects {self.scalars.numel()} layers, got {stacked.size(0)}")
        w = self.weights.view(-1, *([1] * (stacked.dim() - 1)))
        return self.gamma * (w * stacked).sum(dim=0)

"""The ELMo biLM in PyTorch: character CNN, highway layers, projection, and stacked biLSTMs.

Parameters keep the orientation of the official weights (``x @ W``), so loading and exporting are
plain copies. The LSTM bias folds in TensorFlow's run-time forget bias of 1.0.

Two paths compute the same function. With gradients (training): plain convolutions and a padded,
masked per-step loop. Without gradients (inference): the char CNN as one GEMM over character
windows, the biLSTM on packed sequences with both directions in parallel, float32 matmuls through
oneDNN where that stays exact, and optionally bfloat16 matmul operands. tests/test_elmo_speed_modes.py
ties the second to the first, tests/test_elmo.py both to the reference activations.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import warnings
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import torch
from torch import Tensor, nn

from probing.errors import InputError

from .chars import PAD_CHAR
from .options import ElmoOptions

State = list[tuple[Tensor, Tensor]]
Edit = Callable[[Tensor], Tensor]
"""A map on one direction's layer output, row by row: ``(..., P) -> (..., P)`` (e.g. a concept eraser)."""
Edits = Mapping[int, tuple[Edit, Edit]]
"""Per biLSTM layer (1..n_layers, the stored layer names) the (forward, backward) edit of its output: the
edited output is the layer's output and what the next layer reads (its input and its skip connection)."""
PAD_ID = PAD_CHAR + 1  # the shifted id of the padding character inside a token


class CastCache:
    """Copies of parameters in another dtype for inference, made once and remade only when the
    parameter changed in place (its version counter moved). Not part of ``state_dict``."""

    def __init__(self) -> None:
        self._copies: dict[int, tuple[Tensor, int, Tensor]] = {}

    def __call__(self, param: Tensor, dtype: torch.dtype) -> Tensor:
        if param.dtype == dtype:
            return param
        hit = self._copies.get(id(param))
        if (
            hit is not None
            and hit[0] is param
            and hit[1] == param._version
            and hit[2].dtype == dtype
            and hit[2].device == param.device
        ):
            return hit[2]
        with torch.no_grad():
            copy = param.to(dtype)
        self._copies[id(param)] = (param, param._version, copy)
        return copy

    def clear(self) -> None:
        self._copies.clear()


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
        """``(n_tokens, max_chars)`` shifted ids -> ``(n_tokens, projection_dim)``.

        With gradients the plain convolutions; without, the same function as one GEMM over windows.

        Parameters
        ----------
        char_ids : Tensor (n_tokens, max_chars) of int64
            Shifted character ids (:func:`probing.elmo.chars.token_char_ids`), one token a row.

        Returns
        -------
        Tensor (n_tokens, projection_dim), float32 outside autocast
            The context-free token vectors (layer 0 before :class:`~probing.elmo.Elmo` doubles it).
        """
        if not torch.is_grad_enabled():
            return self._infer(char_ids)
        x = self.char_embed(char_ids).transpose(1, 2)
        x = torch.cat([self.activation(conv(x).amax(dim=-1)) for conv in self.convs], dim=-1)
        for carry, transform in zip(self.highway_carry, self.highway_transform):
            t = torch.sigmoid(carry(x))
            x = t * torch.relu(transform(x)) + (1.0 - t) * x
        return self.projection(x)

    def _infer(self, char_ids: Tensor) -> Tensor:
        x = self.activation(self._pooled_filters(char_ids))
        for carry, transform in zip(self.highway_carry, self.highway_transform):
            t = torch.sigmoid(carry(x))
            x = t * torch.relu(transform(x)) + (1.0 - t) * x
        return self.projection(x)

    def _pooled_filters(self, char_ids: Tensor, chunk: int = 64) -> Tensor:
        """Every filter's max over positions (bias included, activation not yet), as ``convs`` give it.

        All filters run as one GEMM over character windows of the widest filter's width (a narrower
        filter has zero weights for the extra characters); windows that run past the last slot are
        masked for the filters they do not fit. Windows made only of padding characters all give one
        shared response, so positions are computed only up to each token's last non-padding character
        (tokens sorted by that length, in chunks) and the shared response joins the max wherever such
        a window fits.
        """
        n_tok, slots = char_ids.shape
        embed_dim = self.opts.char_embed_dim
        device = char_ids.device
        widths = torch.tensor([w for w, n in self.opts.filters for _ in range(n)], device=device)
        wmax = int(widths.max())
        weight = torch.zeros(wmax * embed_dim, int(widths.numel()), device=device)
        col = 0
        for (w, n), conv in zip(self.opts.filters, self.convs):
            assert isinstance(conv, nn.Conv1d)
            weight[: w * embed_dim, col : col + n] = conv.weight.permute(2, 1, 0).reshape(w * embed_dim, n)
            col += n
        table = self.char_embed.weight
        positions = torch.arange(slots, device=device).unsqueeze(1)
        invalid = torch.zeros(slots, weight.size(1), device=device).masked_fill_(
            positions + widths.unsqueeze(0) > slots, float("-inf")
        )
        nonpad = char_ids != PAD_ID
        length = torch.where(nonpad.any(1), slots - nonpad.flip(1).to(torch.uint8).argmax(1), 0)
        padded = nn.functional.pad(char_ids, (0, wmax - 1), value=PAD_ID)
        pooled = torch.empty(n_tok, weight.size(1), device=device)
        order = torch.argsort(length)
        for start in range(0, n_tok, chunk):
            idx = order[start : start + chunk]
            n_pos = max(1, int(length[idx[-1]]))
            windows = table[padded[idx, : n_pos + wmax - 1].unfold(1, wmax, 1)]
            resp = torch.mm(windows.reshape(-1, wmax * embed_dim), weight).view(len(idx), n_pos, -1)
            pooled[idx] = (resp + invalid[:n_pos]).amax(1)
        pad_resp = torch.mm(table[PAD_ID].repeat(wmax).unsqueeze(0), weight).squeeze(0)
        fits = length.unsqueeze(1) + widths.unsqueeze(0) <= slots
        pooled = torch.where(fits, torch.maximum(pooled, pad_resp), pooled)
        return pooled + torch.cat([cast(Tensor, cast(nn.Conv1d, conv).bias) for conv in self.convs])


class LstmDirection(nn.Module):
    """One direction of the biLM: ``n_layers`` LSTM cells with projection, clipping and skips."""

    def __init__(self, opts: ElmoOptions):
        super().__init__()
        c, p = opts.lstm_dim, opts.projection_dim
        self.opts = opts
        self.weight = nn.ParameterList(nn.Parameter(torch.empty(p + p, 4 * c)) for _ in range(opts.n_layers))
        self.bias = nn.ParameterList(nn.Parameter(torch.empty(4 * c)) for _ in range(opts.n_layers))
        self.proj = nn.ParameterList(nn.Parameter(torch.empty(c, p)) for _ in range(opts.n_layers))

    def forward(
        self,
        x: Tensor,
        mask: Tensor,
        state: State | None,
        dropout: float = 0.0,
        edits: Mapping[int, Edit] | None = None,
    ) -> tuple[list[Tensor], State]:
        """Run all layers over ``x`` ``(B, T, P)`` with ``mask`` ``(B, T)`` (valid steps first).

        Returns each layer's output ``(B, T, P)`` (zero at padding) and the final ``(h, c)`` per layer,
        taken at each row's last valid step. ``dropout`` (training only) applies to each layer's input.
        ``edits`` maps a layer (1..n_layers) to an :data:`Edit` of its output before the next layer reads it.

        Parameters
        ----------
        x : Tensor (B, T, P)
            The input sequence (token embeddings, already reversed for the backward direction);
            P = ``projection_dim``.
        mask : Tensor (B, T) of bool
            True at valid steps, which come first in each row.
        state : list (n_layers,) of (h (B, P), c (B, C)) Tensors, optional
            Initial state per layer (C = ``lstm_dim``); None starts from zeros.
        dropout, edits : input dropout probability, and the per-layer output edits.

        Returns
        -------
        outputs : list (n_layers,) of Tensor (B, T, P)
            Each layer's output, zero at padding (from layer 2 on it includes the skip connection, if used).
        final : list (n_layers,) of (h (B, P), c (B, C)) Tensors
            Each layer's state at each row's last valid step.
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
            out, h, c = lstm_recurrence(
                gates_x.transpose(0, 1).contiguous(), w[p:], self.proj[layer], h0, c0, mask_t, cell_clip, proj_clip
            )
            out = out.transpose(0, 1)
            if opts.use_skip_connections and layer > 0:
                out = out + x * mask.unsqueeze(-1)
            if edits and layer + 1 in edits:
                out = edits[layer + 1](out) * mask.unsqueeze(-1)
            outputs.append(out)
            final.append((h, c))
            x = out
        return outputs, final


def lstm_recurrence(
    gates_x: Tensor, w_h: Tensor, w_p: Tensor, h: Tensor, c: Tensor, mask: Tensor, cell_clip: float, proj_clip: float
) -> tuple[Tensor, Tensor, Tensor]:
    """The time loop of one LSTM layer (time-major): gate order i, j, f, o as in TensorFlow.

    ``gates_x`` already holds ``x W_x + b``. Padded steps (``mask`` False) leave the state unchanged
    and output zeros, so the returned state is each row's state at its last valid step.

    Parameters
    ----------
    gates_x : Tensor (T, B, 4 * C)
        Input part of the gate pre-activations, time-major (C = ``lstm_dim``).
    w_h : Tensor (P, 4 * C)
        Recurrent weights applied to the projected state h (P = ``projection_dim``).
    w_p : Tensor (C, P)
        Projection of the cell output.
    h : Tensor (B, P)
        Initial projected state.
    c : Tensor (B, C)
        Initial cell state.
    mask : Tensor (T, B, 1) of bool
        True at valid steps.
    cell_clip, proj_clip : bounds of the cell and the projected state (``inf``: no clipping).

    Returns
    -------
    outputs : Tensor (T, B, P)
        The projected state per step, zero at padded steps.
    h : Tensor (B, P)
        Final projected state per row.
    c : Tensor (B, C)
        Final cell state per row.
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


def packed_recurrence(
    gates: Tensor,
    w_h: Tensor,
    w_p: Tensor,
    h0: Tensor,
    c0: Tensor,
    batch_sizes: list[int],
    cell_clip: float,
    proj_clip: float,
) -> tuple[Tensor, Tensor, Tensor]:
    """``lstm_recurrence`` without autograd, over a packed sequence (it overwrites ``gates``, ``h0``, ``c0``).

    Rows are sorted by length, longest first, and ``gates`` ``(N, 4C)`` holds ``x W_x + b`` for the
    valid slots only, step after step: step ``s`` is the next ``batch_sizes[s]`` rows, so padding
    costs nothing; a row leaves the loop after its last step, where its final state is kept.
    The matmuls run in the weights' dtype (so in bfloat16 the gate pre-activations are rounded to
    it); the nonlinearities, the cell and the hidden state are float32.
    Returns the packed outputs ``(N, P)`` and the final ``h``, ``c`` of every row.

    Parameters
    ----------
    gates : Tensor (N, 4 * C), the weights' dtype
        ``x W_x + b`` of the N = ``sum(batch_sizes)`` valid slots, step-major (C = ``lstm_dim``); overwritten.
    w_h : Tensor (P, 4 * C)
        Recurrent weights (P = ``projection_dim``), float32 or bfloat16.
    w_p : Tensor (C, P)
        Projection of the cell output, in ``w_h``'s dtype.
    h0 : Tensor (B, P), float32
        Initial projected state, rows in length order (longest first); overwritten with the final one.
    c0 : Tensor (B, C), float32
        Initial cell state, rows as ``h0``; overwritten with the final one.
    batch_sizes : list (T,) of int
        Rows still running at each step, non-increasing, ``batch_sizes[0] <= B``.
    cell_clip, proj_clip : bounds of the cell and the projected state (``inf``: no clipping).

    Returns
    -------
    out : Tensor (N, P), float32
        The projected state of every valid slot, packed as ``gates``.
    h, c : Tensor (B, P) and (B, C), float32
        ``h0`` and ``c0`` holding each row's state at its last step.
    """
    out = torch.empty(gates.size(0), w_p.size(1), dtype=h0.dtype, device=h0.device)
    h, c = h0, c0
    start = 0
    for n in batch_sizes:
        if n < h.size(0):
            h0[n : h.size(0)] = h[n:]
            c0[n : c.size(0)] = c[n:]
            h, c = h[:n], c[:n]
        z = gates[start : start + n].addmm_(h.to(w_h.dtype), w_h).float()
        i, j, f, o = z.chunk(4, 1)
        i.sigmoid_()
        j.tanh_()
        f.sigmoid_()
        o.sigmoid_()
        c = (f * c).addcmul_(i, j).clamp_(-cell_clip, cell_clip)
        h = out[start : start + n]
        torch.clamp(torch.mm(torch.tanh(c).mul_(o).to(w_p.dtype), w_p).float(), -proj_clip, proj_clip, out=h)
        start += n
    h0[: h.size(0)] = h
    c0[: c.size(0)] = c
    return out, h0, c0


with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # TorchScript compiles these in about a second

    _scripted_packed = torch.jit.script(packed_recurrence)

    @torch.jit.script
    def _parallel_directions(
        fw: list[Tensor], bw: list[Tensor], batch_sizes: list[int], cell_clip: float, proj_clip: float
    ) -> list[tuple[Tensor, Tensor, Tensor]]:
        """Both directions of a layer at once: the forward one on an inter-op thread."""
        fut = torch.jit.fork(_scripted_packed, fw[0], fw[1], fw[2], fw[3], fw[4], batch_sizes, cell_clip, proj_clip)
        backward = _scripted_packed(bw[0], bw[1], bw[2], bw[3], bw[4], batch_sizes, cell_clip, proj_clip)
        return [torch.jit.wait(fut), backward]


def run_directions(
    args: list[list[Tensor]], batch_sizes: list[int], cell_clip: float, proj_clip: float
) -> list[tuple[Tensor, Tensor, Tensor]]:
    """``packed_recurrence`` for the forward and backward direction (``args``: gates, w_h, w_p, h, c each),
    in parallel when torch may use more than one thread (1.3x on 2 cores), else one after the other.

    Parameters
    ----------
    args : list (2,) of [gates (N, 4 * C), w_h (P, 4 * C), w_p (C, P), h (B, P), c (B, C)]
        The forward then the backward direction's arguments of :func:`packed_recurrence` (both packed
        with the same ``batch_sizes``; ``gates``, ``h``, ``c`` are overwritten).
    batch_sizes, cell_clip, proj_clip : as in :func:`packed_recurrence`.

    Returns
    -------
    list (2,) of (out (N, P), h (B, P), c (B, C))
        :func:`packed_recurrence`'s result per direction, forward first.
    """
    if torch.get_num_threads() > 1:
        return _parallel_directions(args[0], args[1], batch_sizes, cell_clip, proj_clip)
    return [packed_recurrence(a[0], a[1], a[2], a[3], a[4], batch_sizes, cell_clip, proj_clip) for a in args]


_AMX_FLAGS = {"amx_bf16", "amx_tile", "amx_int8", "amx_fp16"}

PRIMITIVE_CACHE_CAPACITY = 64
"""Compiled oneDNN kernels kept per cache (oneDNN's own and torch's ideep one; 1,024 each by default)."""


def bound_primitive_caches() -> None:
    """Cap oneDNN's and ideep's caches of compiled kernels at PRIMITIVE_CACHE_CAPACITY, unless the user set them.

    Both keep one compiled matmul or convolution per distinct shape, and every batch of new sentence lengths
    has new shapes: with the default 1,024 entries an extraction grew with the corpus (peak RSS 1.8 GiB on UD
    EWT train, 1.1 GiB with 64 entries, ~4% more CPU time for remade kernels). Both libraries read the variables when first used, so this runs at import, before any
    oneDNN kernel is made.
    """
    for var in ("ONEDNN_PRIMITIVE_CACHE_CAPACITY", "LRU_CACHE_CAPACITY"):
        os.environ.setdefault(var, str(PRIMITIVE_CACHE_CAPACITY))


bound_primitive_caches()


def cpu_flags() -> set[str]:
    """The CPU feature flags of /proc/cpuinfo (empty where there is none)."""
    try:
        cpuinfo = Path("/proc/cpuinfo").read_text()
    except OSError:
        return set()
    return {f for line in cpuinfo.splitlines() if line.startswith("flags") for f in line.split(":", 1)[1].split()}


@functools.cache
def onednn_fp32_is_exact() -> bool:
    """Whether float32 matmuls may go through oneDNN here without losing float32 precision.

    ``torch.backends.mkldnn.matmul.fp32_precision = "bf16"`` routes float32 GEMMs through oneDNN,
    1.1-1.5x faster than the default MKL path on AVX-512 CPUs, and still float32 there; on CPUs
    with AMX the same switch lets oneDNN compute in bfloat16. So the route is taken only where
    /proc/cpuinfo lists no AMX flag and a probe GEMM keeps float32 accuracy. ``PROBING_ONEDNN_FP32=0``
    turns it off; torch versions without the switch keep the default path.
    """
    if os.environ.get("PROBING_ONEDNN_FP32", "") == "0" or not torch.backends.mkldnn.is_available():
        return False
    if not hasattr(getattr(torch.backends.mkldnn, "matmul", None), "fp32_precision"):
        return False  # torch before the per-backend precision switches: keep the default MKL path
    flags = cpu_flags()
    if not flags or flags & _AMX_FLAGS:
        return False
    gen = torch.Generator().manual_seed(0)
    a, b = torch.rand(64, 256, generator=gen) + 1, torch.rand(256, 96, generator=gen) + 1
    with onednn_fp32_route():
        got = (a @ b).double()
    exact = a.double() @ b.double()
    # positive terms: float32 stays near 1e-7 relative, bfloat16 inputs would give about 2e-3
    return bool(((got - exact).abs() / exact).max() < 1e-5)


@contextlib.contextmanager
def onednn_fp32_route() -> Iterator[None]:
    """Route float32 matmuls through oneDNN inside the block (unchecked: see ``onednn_fp32_is_exact``)."""
    matmul: Any = getattr(torch.backends.mkldnn, "matmul")  # noqa: B009 (absent from torch's type stubs)
    before = matmul.fp32_precision
    matmul.fp32_precision = "bf16"
    try:
        yield
    finally:
        matmul.fp32_precision = before


def fast_fp32_matmuls() -> contextlib.AbstractContextManager:
    """A context in which float32 matmuls take the faster oneDNN route, where that stays exact."""
    return onednn_fp32_route() if onednn_fp32_is_exact() else contextlib.nullcontext()


def reverse_padded(x: Tensor, lengths: Tensor) -> Tensor:
    """Reverse each row of ``x`` ``(B, T, ...)`` within its length; padding stays at the end.

    Parameters
    ----------
    x : Tensor (B, T, ...)
        Batch-major sequences, valid steps first.
    lengths : Tensor (B,) of int64
        Valid steps per row.

    Returns
    -------
    Tensor (B, T, ...)
        ``x`` with steps ``0 .. lengths[i] - 1`` of row i reversed, in ``x``'s dtype.
    """
    b, t = x.shape[:2]
    steps = torch.arange(t, device=x.device).expand(b, t)
    idx = torch.where(steps < lengths.unsqueeze(1), lengths.unsqueeze(1) - 1 - steps, steps)
    return x.gather(1, idx.view(b, t, *([1] * (x.dim() - 2))).expand_as(x))


class BiLM(nn.Module):
    """The full biLM. ``forward`` returns every layer with sentence boundaries still in place."""

    def __init__(self, opts: ElmoOptions):
        super().__init__()
        opts.check_memory()
        self.opts = opts
        self.char_cnn = CharCNN(opts)
        self.forward_lstm = LstmDirection(opts)
        self.backward_lstm = LstmDirection(opts)
        self.casts = CastCache()

    def clear_casts(self) -> None:
        """Drop the low-precision weight copies that inference in bfloat16 keeps."""
        self.casts.clear()

    def token_embeddings(self, char_ids: Tensor) -> Tensor:
        """``(B, T, C)`` ids -> ``(B, T, P)``, running the char CNN once per distinct token.

        Parameters
        ----------
        char_ids : Tensor (B, T, C) of int64
            Shifted character ids (:func:`probing.elmo.chars.batch_char_ids`), C = ``max_characters_per_token``.

        Returns
        -------
        Tensor (B, T, P), float32 outside autocast
            P = ``projection_dim``. Padding slots (all ids 0) are not zeroed here (``forward`` masks them).
        """
        b, t, n = char_ids.shape
        flat = char_ids.reshape(b * t, n)
        uniq, inverse = torch.unique(flat, dim=0, return_inverse=True)
        return self.char_cnn(uniq)[inverse].view(b, t, -1)

    def forward(
        self,
        char_ids: Tensor,
        state: tuple[State, State] | None = None,
        dropout: float = 0.0,
        dtype: torch.dtype = torch.float32,
        edits: Edits | None = None,
    ) -> tuple[Tensor, list[Tensor], list[Tensor], Tensor, tuple[State, State]]:
        """Returns token embeddings, forward outputs, backward outputs (each ``(B, T, P)``), the mask,
        and the final state of both directions. ``dtype`` is the operand type of the biLSTM matmuls
        without gradients (bfloat16: fast, approximate); the char CNN and every gradient run in float32.
        ``edits`` (see :data:`Edits`) intervene on a layer's output per direction, e.g. erase a concept
        from layer 1 so that layer 2 computes from the erased input; without it nothing changes.

        Parameters
        ----------
        char_ids : Tensor (B, T, n_chars) of int64
            Shifted character ids of ``<S> w1 .. wn </S>`` per row (:func:`probing.elmo.chars.batch_char_ids`),
            all 0 at padding slots; n_chars = ``max_characters_per_token``.
        state : (forward, backward) State, optional
            Initial state per direction: a list (n_layers,) of (h (B, P), c (B, lstm_dim)); None: zeros.
        dropout, dtype, edits : dropout on each LSTM layer's input, the matmul operand dtype, the edits.

        Returns
        -------
        tokens : Tensor (B, T, P)
            Token embeddings, zero at padding (P = ``projection_dim``); float32 (whatever ``dtype``) outside autocast.
        forward, backward : list (n_layers,) of Tensor (B, T, P)
            Each biLSTM layer's output per direction, aligned with the input steps, zero at padding; as ``tokens``.
        mask : Tensor (B, T) of bool
            True at the slots that hold a token (boundaries included).
        final : (forward, backward) State
            Per direction, per layer, ``(h (B, P), c (B, lstm_dim))`` after each row's last step in that
            direction (the backward direction ends at ``<S>``), rows in batch order.
        """
        if edits:
            bad = [k for k in edits if not 1 <= k <= self.opts.n_layers]
            if bad:
                raise InputError(f"edits: no biLSTM layer {bad}; the layers are 1..{self.opts.n_layers}")
        mask = (char_ids > 0).any(dim=-1)
        lengths = mask.sum(dim=1)
        if not torch.is_grad_enabled():
            with fast_fp32_matmuls():
                return self._infer(char_ids, mask, lengths, state, dropout, dtype, edits or {})
        tokens = self.token_embeddings(char_ids) * mask.unsqueeze(-1)
        fw_state, bw_state = state if state is not None else (None, None)
        fw_edits = {k: e[0] for k, e in (edits or {}).items()}
        bw_edits = {k: e[1] for k, e in (edits or {}).items()}
        fw, fw_final = self.forward_lstm(tokens, mask, fw_state, dropout, fw_edits)
        bw_rev, bw_final = self.backward_lstm(reverse_padded(tokens, lengths), mask, bw_state, dropout, bw_edits)
        bw = [reverse_padded(o, lengths) for o in bw_rev]
        return tokens, fw, bw, mask, (fw_final, bw_final)

    def _infer(
        self,
        char_ids: Tensor,
        mask: Tensor,
        lengths: Tensor,
        state: tuple[State, State] | None,
        dropout: float,
        dtype: torch.dtype,
        edits: Edits,
    ) -> tuple[Tensor, list[Tensor], list[Tensor], Tensor, tuple[State, State]]:
        """``forward`` without autograd, on packed sequences: rows sorted by length, padding skipped,
        the backward direction's reversal folded into the packing index."""
        opts = self.opts
        b, t, n = char_ids.shape
        p, c = opts.projection_dim, opts.lstm_dim
        uniq, inverse = torch.unique(char_ids.reshape(b * t, n), dim=0, return_inverse=True)
        tokens = self.char_cnn(uniq)[inverse].view(b, t, -1) * mask.unsqueeze(-1)
        order = torch.argsort(lengths, descending=True, stable=True)
        valid = mask[order].t()
        batch_sizes = [k for k in valid.sum(1).tolist() if k > 0]
        steps = torch.arange(t, device=char_ids.device).unsqueeze(1)
        slots = [(order * t + steps)[valid], (order * t + lengths[order] - 1 - steps)[valid]]
        flat = tokens.reshape(b * t, p)
        xs = [flat[idx] for idx in slots]
        cell_clip = opts.cell_clip if opts.cell_clip else math.inf
        proj_clip = opts.proj_clip if opts.proj_clip else math.inf
        outputs: list[list[Tensor]] = [[], []]
        finals: list[State] = [[], []]
        for layer in range(opts.n_layers):
            args = []
            for d, direction in enumerate((self.forward_lstm, self.backward_lstm)):
                w = self.casts(direction.weight[layer], dtype)
                x_in = nn.functional.dropout(xs[d], dropout, self.training) if dropout else xs[d]
                gates = torch.addmm(self.casts(direction.bias[layer], dtype), x_in.to(dtype), w[:p])
                if state is None:
                    h0, c0 = tokens.new_zeros(b, p), tokens.new_zeros(b, c)
                else:
                    h0, c0 = (s[order] for s in state[d][layer])
                args.append([gates, w[p:], self.casts(direction.proj[layer], dtype), h0, c0])
            for d, (out, h, c_last) in enumerate(run_directions(args, batch_sizes, cell_clip, proj_clip)):
                if opts.use_skip_connections and layer > 0:
                    out += xs[d]
                if layer + 1 in edits:
                    out = edits[layer + 1][d](out)
                xs[d] = out
                padded = tokens.new_zeros(b * t, p).index_copy_(0, slots[d], out)
                outputs[d].append(padded.view(b, t, p))
                finals[d].append(
                    (
                        torch.empty_like(h).index_copy_(0, order, h),
                        torch.empty_like(c_last).index_copy_(0, order, c_last),
                    )
                )
        return tokens, outputs[0], outputs[1], mask, (finals[0], finals[1])


class ScalarMix(nn.Module):
    """Peters et al. (2018) Eq. 1: ``gamma * sum_j softmax(s)_j * h_j`` over the layers."""

    def __init__(self, n_layers: int, initial: list[float] | None = None, trainable: bool = True):
        super().__init__()
        init = torch.tensor(initial if initial is not None else [0.0] * n_layers, dtype=torch.float32)
        if init.numel() != n_layers:
            raise InputError(f"ScalarMix: {n_layers} layers but {init.numel()} initial weights")
        self.scalars = nn.Parameter(init, requires_grad=trainable)
        self.gamma = nn.Parameter(torch.ones(()), requires_grad=trainable)

    @property
    def weights(self) -> Tensor:
        """The normalised layer weights softmax(s), float32 ``(n_layers,)``.

        Returns
        -------
        Tensor (n_layers,), float32
        """
        return torch.softmax(self.scalars, dim=0)

    def forward(self, layers: Tensor | list[Tensor]) -> Tensor:
        """``layers``: a tensor ``(n_layers, ...)`` or a list of equally shaped tensors.

        Parameters
        ----------
        layers : Tensor (n_layers, ...) or list (n_layers,) of Tensor (...)
            The layers to mix, e.g. ``(n_layers, B, T, dim)``.

        Returns
        -------
        Tensor (...)
            ``gamma * sum_j softmax(s)_j * layers[j]``, at least float32.
        """
        stacked = torch.stack(list(layers)) if isinstance(layers, (list, tuple)) else layers
        if stacked.size(0) != self.scalars.numel():
            raise InputError(f"ScalarMix expects {self.scalars.numel()} layers, got {stacked.size(0)}")
        w = self.weights.view(-1, *([1] * (stacked.dim() - 1)))
        return self.gamma * (w * stacked).sum(dim=0)

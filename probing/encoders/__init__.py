"""Encoders: anything that turns tokenized sentences into per-layer vectors (DESIGN.md's Encoder contract).

Each kind of encoder is an :class:`EncoderKind` registered in :data:`ENCODER_KINDS`, one module per family:

* :mod:`~probing.encoders.elmo`: ``elmo``, a trained biLM (:class:`ElmoEncoder`: official files, a registry
  name, a model folder, or an in-memory ``Elmo``);
* :mod:`~probing.encoders.random_elmo`: ``random-elmo``, the same architecture with seeded random weights
  (:class:`RandomElmoEncoder`);
* :mod:`~probing.encoders.static`: ``glove``, static type vectors with one layer named ``"glove"``
  (:class:`GloveEncoder`);
* :mod:`~probing.encoders.static_trained`: ``word2vec`` and ``fasttext``, static vectors trained with gensim
  (:class:`TrainedStaticEncoder`, :func:`train_static`);
* :mod:`~probing.encoders.transformer`: ``transformer``, a local Hugging Face model's layers, words pooled from
  their pieces (:class:`TransformerEncoder`).

:mod:`~probing.encoders.base` holds the contract, :mod:`~probing.encoders.registry` the kinds and
:func:`get_encoder`.
"""

from probing.encoders.base import FINGERPRINT_VERSION, CodeKeyedEncoder, EncoderKind
from probing.encoders.elmo import (
    ELMO_COMPUTE_VERSION,
    VOCAB_FILES,
    ElmoEncoder,
    ElmoEncoderOptions,
    elmo_code_digest,
    elmo_options_path,
    training_vocabulary,
    weights_in_folder,
)
from probing.encoders.random_elmo import RandomElmoEncoder, RandomElmoEncoderOptions
from probing.encoders.registry import (
    ENCODER_KINDS,
    encoder_kind,
    get_encoder,
    lm_checkpoint,
    register_encoder_kind,
)
from probing.encoders.static import GLOVE_DEFAULT, GloveEncoder, GloveEncoderOptions
from probing.encoders.static_trained import StaticTrainedOptions, TrainedStaticEncoder, train_static
from probing.encoders.transformer import TransformerEncoder, TransformerEncoderOptions
from probing.protocols import EncoderLike

Encoder = EncoderLike  # the protocol every encoder here satisfies (probing.protocols.EncoderLike)

__all__ = [
    "ELMO_COMPUTE_VERSION",
    "ENCODER_KINDS",
    "FINGERPRINT_VERSION",
    "GLOVE_DEFAULT",
    "VOCAB_FILES",
    "CodeKeyedEncoder",
    "ElmoEncoder",
    "ElmoEncoderOptions",
    "Encoder",
    "EncoderKind",
    "GloveEncoder",
    "GloveEncoderOptions",
    "RandomElmoEncoder",
    "RandomElmoEncoderOptions",
    "StaticTrainedOptions",
    "TrainedStaticEncoder",
    "TransformerEncoder",
    "TransformerEncoderOptions",
    "elmo_code_digest",
    "elmo_options_path",
    "encoder_kind",
    "get_encoder",
    "lm_checkpoint",
    "register_encoder_kind",
    "train_static",
    "training_vocabulary",
    "weights_in_folder",
]

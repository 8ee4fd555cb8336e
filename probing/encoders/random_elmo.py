"""The random ELMo kind (``kind = "random-elmo"``): ELMo's architecture with seeded random weights, the control
for what the architecture alone gives (character CNN + LSTMs without training)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from probing._toml import Table
from probing.elmo.options import ElmoOptions
from probing.encoders.base import EncoderKind, legacy_fingerprint
from probing.encoders.elmo import (
    _canonical_options,
    _LazyElmo,
    _state_policy,
    as_bilm,
    elmo_code_digest,
    elmo_options_path,
    read_model,
)
from probing.errors import InputError, check_count


def _as_options(options: ElmoOptions | dict | str | os.PathLike) -> ElmoOptions:
    if isinstance(options, ElmoOptions):
        return options
    if isinstance(options, dict):
        return ElmoOptions.from_dict(options)
    return ElmoOptions.from_json(Path(options))


class RandomElmoEncoder(_LazyElmo):
    """ELMo's architecture with seeded random weights (``Elmo.random``), named ``random-elmo``.

    ``options`` is an ``options.json`` path, its dict, or an ``ElmoOptions``. Probing it shows what the
    structure alone (character CNN, random LSTMs) makes linearly available, without any training.
    """

    kind = "random-elmo"

    def __init__(
        self,
        options: ElmoOptions | dict | str | os.PathLike,
        seed: int = 0,
        *,
        batch_size: int = 64,
        name: str = "random-elmo",
        device: str | None = None,
    ):
        super().__init__(device)
        self.options = _as_options(options)
        if isinstance(seed, bool) or not isinstance(seed, int):
            raise InputError(f"seed must be an integer, got {seed!r}")
        self.seed = seed
        self.stateful = False
        self.batch_size = check_count(batch_size, "batch_size")
        self.name = name
        self.source = f"random(seed={seed})"

    @property
    def fingerprint(self) -> str:
        """sha256 of the canonical options, the seed and the ELMo code (which holds the initialiser)."""
        return legacy_fingerprint(
            "random-elmo",
            _canonical_options(self.options),
            f"seed={self.seed}",
            _state_policy(False),
            elmo_code_digest(),
        )

    def _build(self):
        from probing.elmo.elmo import Elmo

        return Elmo.random(self.options, seed=self.seed)


@dataclass(frozen=True)
class RandomElmoEncoderOptions:
    """The keys of a ``kind = "random-elmo"`` table: the architecture of checkpoint or folder ``model`` (none:
    ``default``, the bundled model) or of an ``options`` file, ``seed`` and ``batch_size``."""

    model: str | None = None
    options: Path | None = None
    seed: int = 0
    batch_size: int = 64


def _parse(t: Table) -> RandomElmoEncoderOptions:
    model, options, _ = read_model(t, weights=False)
    d = RandomElmoEncoderOptions()
    return RandomElmoEncoderOptions(
        model=model,
        options=options,
        seed=t.integer("seed", d.seed),
        batch_size=t.integer("batch_size", d.batch_size, minimum=1),
    )


def _shorthand(text: str) -> RandomElmoEncoderOptions | None:
    """``random-elmo`` (the bundled model's architecture) or ``random-elmo:MODEL`` (a checkpoint name, a folder
    or an options.json path)."""
    if text != "random-elmo" and not text.startswith("random-elmo:"):
        return None
    return RandomElmoEncoderOptions(model=text.partition(":")[2] or "default")


def _build(o: RandomElmoEncoderOptions, name: str | None, device: str | None) -> RandomElmoEncoder:
    options = o.options or elmo_options_path(o.model or "default")
    return RandomElmoEncoder(options, seed=o.seed, batch_size=o.batch_size, name=name or "random-elmo", device=device)


RANDOM_ELMO = EncoderKind(
    "random-elmo",
    options=RandomElmoEncoderOptions,
    build=_build,
    parse=_parse,
    shorthand=_shorthand,
    forms=lambda: "random-elmo[:MODEL]",
    bilm=as_bilm,
    own_fingerprint=True,
)

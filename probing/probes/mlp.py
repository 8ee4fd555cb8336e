"""``MLPProbe``: the MLP of Voita & Titov's MDL probing (ReLU, 1 or 2 hidden layers, Adam, early stopping on
dev loss), a scikit-learn classifier; :func:`probing.probes.mdl.online_codelength` uses it with ``probe="mlp"``."""

from __future__ import annotations

import math

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted, validate_data

from probing.errors import InputError
from probing.probes.solver import _check_common, _check_label_types, _encode_labels, _index_labels, _torch_generator

__all__ = ["MLPProbe"]


class MLPProbe(ClassifierMixin, BaseEstimator):
    """ReLU MLP classifier (``hidden_layers`` of ``width`` units) trained with Adam and early stopping.

    Features are standardised with the training rows' mean and standard deviation. Each epoch shuffles
    the rows (seeded by ``random_state``) in minibatches of ``batch_size``; after each epoch the mean dev
    cross-entropy is measured, the learning rate is halved when it does not improve (the reference's
    ``ReduceLROnPlateau(factor=0.5, patience=0)``), training stops after ``patience`` epochs without an
    improvement of more than ``tol`` and the best-dev weights are kept. Without dev data it trains for
    ``max_epochs``. X: (n, d) any numeric dtype; labels any hashable (at least two classes).

    Attributes: ``classes_``, ``n_features_in_``, ``mean_`` and ``scale_`` (d,) (the standardisation),
    ``net_`` (the torch module), ``n_iter_`` (epochs run), ``dev_loss_`` (best mean dev cross-entropy, or None).

    Examples
    --------
    >>> import numpy as np
    >>> X = np.random.default_rng(0).normal(size=(200, 3))
    >>> probe = MLPProbe(width=16, max_epochs=20).fit(X, np.where(X[:, 0] > 0, "pos", "neg"))
    >>> probe.predict_proba(X[:4]).shape
    (4, 2)
    """

    def __init__(
        self,
        hidden_layers: int = 1,
        width: int = 256,
        *,
        learning_rate: float = 1e-3,
        batch_size: int = 128,
        max_epochs: int = 40,
        patience: int = 5,
        tol: float = 1e-3,
        random_state: int | None = 0,
    ):
        self.hidden_layers = hidden_layers
        self.width = width
        self.learning_rate = learning_rate
        self.batch_size = batch_size
        self.max_epochs = max_epochs
        self.patience = patience
        self.tol = tol
        self.random_state = random_state

    def _net(self, d: int, k: int) -> torch.nn.Sequential:
        layers: list[torch.nn.Module] = []
        for i in range(self.hidden_layers):
            layers += [torch.nn.Linear(d if i == 0 else self.width, self.width), torch.nn.ReLU()]
        layers.append(torch.nn.Linear(self.width if self.hidden_layers else d, k))
        return torch.nn.Sequential(*layers)

    def _tensor(self, X) -> torch.Tensor:
        """Standardised fp32 features (n, d) of X (n, d): an array or an fp32 tensor."""
        x = X if isinstance(X, torch.Tensor) else torch.from_numpy(np.asarray(X, dtype=np.float32))
        return (x - self.mean_) / self.scale_

    def fit(self, X, y, X_dev=None, y_dev=None) -> MLPProbe:
        """Train on ``X`` and ``y``, stopping early on ``X_dev``, ``y_dev``.

        Parameters
        ----------
        X : array-like (n, d)
        y : array-like (n,)
        X_dev, y_dev : array-like (n_dev, d) and (n_dev,), optional
            Early-stopping data (dev labels unseen in ``y`` are left out).

        Returns
        -------
        MLPProbe
            ``self``, fitted.
        """
        name = type(self).__name__
        if self.hidden_layers not in (1, 2):
            raise InputError(f"{name}: hidden_layers must be 1 or 2, got {self.hidden_layers!r}")
        if not (isinstance(self.width, int) and self.width >= 1):
            raise InputError(f"{name}: width must be a positive int, got {self.width!r}")
        _check_common(self, ("batch_size", "max_epochs", "patience"))
        _check_label_types(y, name)  # before validate_data makes ["a", 1] the strings "a", "1"
        X, y = validate_data(self, X, y, reset=True, dtype="numeric")
        self.classes_, y_idx = _encode_labels(y, name)
        x32 = torch.from_numpy(np.asarray(X, dtype=np.float32))
        total, sq = torch.zeros(X.shape[1], dtype=torch.float64), torch.zeros(X.shape[1], dtype=torch.float64)
        for chunk in x32.split(65536):
            total += chunk.double().sum(0)
        mean = total / len(x32)
        for chunk in x32.split(65536):
            sq += ((chunk.double() - mean) ** 2).sum(0)
        std = (sq / len(x32)).sqrt()
        self.mean_, self.scale_ = mean.float(), torch.where(std > 0, std, 1.0).float()
        gen = _torch_generator(self.random_state)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(int(torch.randint(2**62, (1,), generator=gen)))
            net = self._net(X.shape[1], len(self.classes_))
        opt = torch.optim.Adam(net.parameters(), lr=self.learning_rate)
        sched = torch.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=0)
        x, t = self._tensor(x32), torch.from_numpy(y_idx)
        dev = None
        if X_dev is not None and len(X_dev):
            d_idx = _index_labels(y_dev, self.classes_)
            seen = d_idx >= 0
            if seen.any():
                dev = (self._tensor(np.asarray(X_dev)[seen]), torch.from_numpy(d_idx[seen]))
        best, best_state, stale = math.inf, None, 0
        self.n_iter_ = 0
        for _ in range(self.max_epochs):
            net.train()
            for idx in torch.randperm(len(t), generator=gen).split(self.batch_size):
                opt.zero_grad()
                torch.nn.functional.cross_entropy(net(x[idx]), t[idx]).backward()
                opt.step()
            self.n_iter_ += 1
            if dev is None:
                continue
            net.eval()
            with torch.no_grad():
                loss = float(torch.nn.functional.cross_entropy(net(dev[0]), dev[1]))
            sched.step(loss)
            if loss < best - self.tol:
                best, best_state, stale = loss, {k: v.clone() for k, v in net.state_dict().items()}, 0
            else:
                stale += 1
                if stale >= self.patience:
                    break
        if best_state is not None:
            net.load_state_dict(best_state)
        net.eval()
        self.net_ = net
        self.dev_loss_ = best if dev is not None else None
        return self

    def predict_log_proba(self, X) -> np.ndarray:
        """Log-probabilities (n, n_classes) in float64 of X (n, d).

        Parameters
        ----------
        X : array-like (n, d)
            Features with the ``d = n_features_in_`` columns of fit, any numeric dtype (standardised as in fit).

        Returns
        -------
        ndarray (n, n_classes), float64
            Column j is the log-probability of ``classes_[j]`` (log-softmax of the fp32 logits, in float64).
        """
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype="numeric")
        with torch.no_grad():
            return torch.log_softmax(self.net_(self._tensor(X)).double(), dim=1).numpy()

    def predict_proba(self, X) -> np.ndarray:
        """Probabilities (n, n_classes) of X (n, d).

        Parameters
        ----------
        X : array-like (n, d)
            Features with the ``d = n_features_in_`` columns of fit, any numeric dtype (standardised as in fit).

        Returns
        -------
        ndarray (n, n_classes), float64
            Column j is the probability of ``classes_[j]``; rows sum to 1.
        """
        return np.exp(self.predict_log_proba(X))

    def predict(self, X) -> np.ndarray:
        """The most probable class (n,) of each row of X (n, d).

        Parameters
        ----------
        X : array-like (n, d)
            Features with the ``d = n_features_in_`` columns of fit, any numeric dtype (standardised as in fit).

        Returns
        -------
        ndarray (n,)
            Items of ``classes_`` (its dtype).
        """
        best = self.predict_log_proba(X).argmax(1)
        return self.classes_[best]

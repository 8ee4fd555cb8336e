"""LinearProbe and ScalarMixProbe pass scikit-learn's estimator checks (all apply; none is marked as expected
to fail). ScalarMixProbe gets scikit-learn's 2-D data as one layer (its default ``n_layers``)."""

from sklearn.utils.estimator_checks import parametrize_with_checks

from probing.probes.linear import LinearProbe
from probing.probes.mix import ScalarMixProbe


@parametrize_with_checks([LinearProbe(), ScalarMixProbe()])
def test_sklearn_compatible(estimator, check):
    check(estimator)

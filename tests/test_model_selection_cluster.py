"""select(client=...) sends the data set to the workers once, not with every task.

Found by the previous session's final review: each rung mapped its candidates with
``client.map(..., [source] * len(alive), ...)``, so the data (the ``_Source``) were pickled
into every task of every rung (measured with a worker process per worker: 5 pickles for a
rung of 4 candidates, 7 for the selection; 1 after the change). The answer stays the
sequential one (tests/test_model_selection.py::test_a_dask_client_gives_the_same_answer).
"""

import numpy as np
import pytest

from tensorstream import OnlineCPDL
from tensorstream.model_selection import _Source, select

distributed = pytest.importorskip("distributed")


def test_the_data_are_scattered_once_and_no_task_carries_them(monkeypatch):
    X = np.random.default_rng(0).random((300, 5, 4, 3))
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                                  dashboard_address=":0") as cluster, \
            distributed.Client(cluster) as client:
        scattered, mapped = [], []
        real_scatter, real_map = client.scatter, client.map

        def scatter(data, **kwargs):
            scattered.append((type(data), kwargs))
            return real_scatter(data, **kwargs)

        def map_(function, *iterables, **kwargs):
            mapped.append([list(arguments) for arguments in iterables])
            return real_map(function, *iterables, **kwargs)

        monkeypatch.setattr(client, "scatter", scatter)
        monkeypatch.setattr(client, "map", map_)
        select(OnlineCPDL(3, batch_size=64, random_state=0), X, client=client,
               modes=["0;1;2", "0,1;2"], n_components=[2, 3], n_passes=1, max_passes=2)
    assert [(kind, kwargs["broadcast"]) for kind, kwargs in scattered] == [(_Source, True)]
    assert len(mapped) >= 2  # several rungs, one scatter
    for iterables in mapped:
        arguments = [a for arguments in iterables for a in arguments]
        assert not any(isinstance(a, _Source) for a in arguments)
        sources = iterables[1]
        assert all(isinstance(a, distributed.Future) for a in sources)
        assert len({a.key for a in sources}) == 1

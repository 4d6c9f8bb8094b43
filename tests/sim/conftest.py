"""What the sim tests share: a real dask.distributed LocalCluster (two worker processes
on 127.0.0.1), skipped with the reason when the sweep extra is not installed."""
import pytest


@pytest.fixture
def dask_cluster():
    distributed = pytest.importorskip("dask.distributed", reason="dask.distributed is optional (the sweep extra)")
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None) as cluster:
        yield cluster

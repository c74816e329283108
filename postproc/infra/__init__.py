"""Infrastructure: solver back-ends and executors (serial, process pool, Dask)."""

"""Running records on a Dask cluster: the worker-side tasks, the preload of `wwref worker`, and the
bridge between the orchestrator's JSON-lines protocol and Dask's client (pipelines/execution/dask/)."""

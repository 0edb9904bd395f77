"""The reward-scoring HTTP server behind ``rlsim serve`` and the ``http`` runtime.

- ``settings``: ``ServeSettings`` (what to run, where, and the limits);
- ``schemas``: request/response bodies; ``backend``: scorer + dynamic batcher;
- ``app``: the FastAPI app (``/score``, ``/health``, ``/metrics``); ``metrics``: Prometheus metrics;
- ``middleware``: body-size limit and request accounting; ``runner``: uvicorn, port file, parent watch.

FastAPI, uvicorn and prometheus_client are imported only when a server is built.
"""

"""The reward-scoring HTTP server behind ``rlsim serve`` and the ``http`` runtime.

- ``settings``: ``ServeSettings`` (what to run, where, and the limits);
- ``protocols``: OpenRLHF's and vLLM's routes; the bodies of all three protocols are ``rlsim.http_schemas``, which
  the ``http`` runtime's client reads them with; ``backend``: scorer + dynamic batcher;
- ``app``: the FastAPI app (``/score``, ``/health``, ``/metrics``); ``metrics``: Prometheus metrics;
- ``middleware``: body-size limit and request accounting; ``runner``: uvicorn, port file, parent watch.

FastAPI, uvicorn and prometheus_client are imported only when a server is built.
"""

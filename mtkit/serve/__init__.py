"""`mtkit serve`: a LibreTranslate-compatible HTTP server that batches across requests.

``batcher`` (the queue and the model worker: plain Python, no HTTP), ``api`` (request checks
and response shapes), ``languages`` (the pair a model translates), ``app`` (the FastAPI app and
the page in ``static/``). :func:`mtkit.pipeline.serve.serve` wires them to an engine and uvicorn.
"""

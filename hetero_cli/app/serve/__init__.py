"""Serving a split over HTTP (``hetero serve``): KServe v2 REST (protocol), what an engine provides
(backend: Backend, Metrics), the FastAPI app over it (http: make_app) and the engines that run it
(engines: local, one process under uvicorn; ray, a Ray Serve deployment per subgraph).

fastapi and uvicorn come with the ``serve`` extra (``pip install 'hetero-cli[serve]'``): import
``hetero_cli.app.serve.http`` only where they are needed.
"""

from ...errors import RequestError
from .backend import Backend, Metrics
from .protocol import TensorSpec

__all__ = ["Backend", "Metrics", "RequestError", "TensorSpec"]

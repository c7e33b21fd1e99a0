"""cera from Python: load a GGUF model, generate, chat, stream, tokenize and embed.

    import cera
    engine = cera.Engine("model.gguf")
    print(engine.generate("Once upon a time", max_tokens=32).text)

The work runs in cera's C++ engine with the GIL released; Ctrl-C cancels a request in flight.
Errors are cera.Error subclasses carrying cera's message (docs/python.md lists them).
"""

from ._cera import (
    CancelledError,
    ChatMessage,
    Completion,
    CorruptError,
    Error,
    InternalError,
    InvalidArgumentError,
    IoError,
    ModelInfo,
    NotFoundError,
    OutOfRangeError,
    Stream,
    UnavailableError,
    UnsupportedError,
    __version__,
)
from ._engine import Engine

__all__ = [
    "CancelledError",
    "ChatMessage",
    "Completion",
    "CorruptError",
    "Engine",
    "Error",
    "InternalError",
    "InvalidArgumentError",
    "IoError",
    "ModelInfo",
    "NotFoundError",
    "OutOfRangeError",
    "Stream",
    "UnavailableError",
    "UnsupportedError",
    "__version__",
]

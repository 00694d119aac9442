"""byref: the model routes references; the bytes stay below the context boundary."""

__version__ = "0.1.0"

"""torchlint: find what makes PyTorch training slower than it needs to be, and fix it."""

__version__ = "0.1.0"

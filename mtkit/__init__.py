"""mtkit: a command-line machine-translation toolkit."""

__version__ = "0.1.0"

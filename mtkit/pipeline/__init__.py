"""The pipeline stages: file I/O and wiring between the CLI and the core packages."""

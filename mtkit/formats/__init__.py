"""File formats that one part of mtkit writes and another reads (an exporter and an engine),
each described in one module that both import."""

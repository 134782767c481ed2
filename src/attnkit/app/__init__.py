"""Layer 7 (top): what users call -- the Python API, the CLI, the HTTP server and its
pages, the demo and the environment report."""

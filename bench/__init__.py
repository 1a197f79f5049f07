"""Benchmarks (not tests): ``python -m bench NAME [OPTIONS]``; each ends with one JSON line of figures."""

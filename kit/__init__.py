"""kit: a reproducibility kit for LLM-serving benchmarks."""

__version__ = "0.1.0"

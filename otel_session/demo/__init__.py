"""Demo building blocks (a deterministic mock LLM; the demo agent and driver build on them)."""

"""The engine inside other libraries' clients: `httpx` (a balancing transport;
also importable as leastload.httpx)."""

"""Built-in MQTT broker: codec (sans-I/O), sessions, store, asyncio server."""

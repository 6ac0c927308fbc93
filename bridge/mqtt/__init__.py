"""Built-in MQTT broker: a sans-I/O core (codec, topic tree, sessions, the broker's rooms by concern,
the SQLite journal) driven by the asyncio server (server.py); broker.py says which room does what."""

"""mqbridge running gateway: MQTT broker core, connectors, router, store, conversion log, CLI."""

__version__ = "0.1.0"

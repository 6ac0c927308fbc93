"""mqbridge running gateway: MQTT broker core, connectors, router, store, conversion log, CLI."""

"""Pure conversion library: MQ wire formats, JMS, MQTT, typed XML, selectors. No I/O; never imports bridge."""

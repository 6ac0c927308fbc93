"""Connectors to IBM MQ (pymqi), JMS providers (STOMP) and the embedded queue store."""
